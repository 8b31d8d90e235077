/** \file Who may have written the kernel cache; see cache_trust.h. */
#include "runtime/jit/cache_trust.h"

#include <pwd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/util/errors.h"
#include "core/util/log.h"

namespace seastar::runtime::cache {
namespace {

constexpr const char* kAdvice =
    "; SEASTAR_CACHE_SHARED=1 shares a cache on purpose, at that risk (docs/kernel_cache.md)";

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

/// "group", "others" or "group and others": who besides the owner may write.
std::string writers(mode_t mode) {
  const bool group = mode & S_IWGRP, others = mode & S_IWOTH;
  return group && others ? "group and others" : group ? "group" : "others";
}

bool trusted_owner(uid_t uid) { return uid == ::geteuid() || uid == 0; }

}  // namespace

bool shared() {
  const char* v = std::getenv("SEASTAR_CACHE_SHARED");
  const std::string value = v ? v : "";
  if (value.empty() || value == "0") return false;
  if (value == "1") return true;
  SEASTAR_THROW(ValueError, "SEASTAR_CACHE_SHARED='", value,
                "': expected 1 (share the kernel cache on purpose, see README.md) or 0");
}

std::string describe_owner(uid_t uid) {
  std::string s = "uid " + std::to_string(uid);
  std::vector<char> buf(16384);
  struct passwd pw, *found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_name)
    s += std::string(" (") + found->pw_name + ")";
  return s;
}

std::string describe_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

void check_folder(const std::string& dir) {
  if (shared()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      log::warn("SEASTAR_CACHE_SHARED=1: the kernel cache " + dir + " is used without checking who owns it or "
                "can write to it; anyone who can write there can run their code in this process");
    return;
  }
  for (std::string path = dir;; path = parent_of(path)) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      SEASTAR_THROW(CompileError, "cannot check the kernel cache folder ", dir, ": ", path, ": ", std::strerror(errno),
                    " (SEASTAR_CACHE_DIR selects another folder)");
    const bool itself = path == dir;
    const std::string what = itself ? "the kernel cache folder " + dir
                                    : "the kernel cache folder " + dir + " is inside " + path + ", which";
    const std::string state = "owner " + describe_owner(st.st_uid) + ", mode " + describe_mode(st.st_mode);
    if (!trusted_owner(st.st_uid))
      SEASTAR_THROW(CompileError, what, " is owned by ", describe_owner(st.st_uid), ", neither you (",
                    describe_owner(::geteuid()), ") nor root (mode ", describe_mode(st.st_mode), "): its owner could ",
                    itself ? "put their code in it" : "replace the cache folder",
                    " and this process would run it. Set SEASTAR_CACHE_DIR to a folder of your own", kAdvice);
    // a sticky folder above (/tmp): others may create in it but not rename or remove what is ours
    const bool sticky_above = !itself && (st.st_mode & S_ISVTX);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !sticky_above)
      SEASTAR_THROW(CompileError, what, " is writable by ", writers(st.st_mode), " (", state, "): they could ",
                    itself ? "put their code in it" : "replace the cache folder",
                    " and this process would run it. Remove the write permission (chmod go-w ", path,
                    ") or set SEASTAR_CACHE_DIR to a folder only you can write", kAdvice);
    if (path == "/") break;
  }
}

std::string untrusted_entry(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "it is a directory, not a file";
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  if (shared()) return "";
  if (st.st_uid != ::geteuid())
    return "it is owned by " + describe_owner(st.st_uid) + ", not by you, " + describe_owner(::geteuid()) + "; mode " +
           describe_mode(st.st_mode);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "it is writable by " + writers(st.st_mode) + " (owner " + describe_owner(st.st_uid) + ", mode " +
           describe_mode(st.st_mode) + ")";
  return "";
}

mode_t folder_mode() { return shared() ? 0755 : 0700; }

mode_t entry_mode(bool executable) {
  if (shared()) return executable ? 0755 : 0644;
  return executable ? 0700 : 0600;
}

}  // namespace seastar::runtime::cache
