/** \file dlopen of an open file; see dlopen_fd.h. */
#include "runtime/jit/dlopen_fd.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "core/util/log.h"

namespace seastar::runtime {
namespace {

void* open_by_name(const std::string& name, int flags, std::string* why) {
  void* h = ::dlopen(name.c_str(), flags);
  if (!h) {
    const char* e = ::dlerror();
    *why = std::string("dlopen failed: ") + (e ? e : "unknown error");
  }
  return h;
}

/// Whether a loaded library is named `name` (not merely the same file under another name,
/// which the loader would hand back for this file anyway).
bool name_taken(const std::string& name) {
  void* h = ::dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!h) {
    ::dlerror();
    return false;
  }
  link_map* lm = nullptr;
  const bool same = ::dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && name == lm->l_name;
  ::dlclose(h);
  return same;
}

}  // namespace

void* dlopen_fd(int fd, const std::string& path, int flags, std::string* why) {
  static std::mutex mutex;
  static int next = 0;  // the lowest descriptor number to try: names below it were used
  std::lock_guard<std::mutex> lock(mutex);
  struct stat st;
  if (::stat("/proc/self/fd", &st) != 0) {
    log::debug("no /proc/self/fd: loading " + path + " by its path");
    return open_by_name(path, flags, why);
  }
  bool wrapped = false;
  for (int attempt = 0; attempt < 65536; ++attempt) {
    const int n = ::fcntl(fd, F_DUPFD_CLOEXEC, next);
    if (n < 0) {
      if ((errno == EINVAL || errno == EMFILE) && !wrapped) {  // past the descriptor limit: from the bottom again
        wrapped = true;
        next = 0;
        continue;
      }
      break;
    }
    next = n + 1;
    const std::string name = "/proc/self/fd/" + std::to_string(n);
    if (name_taken(name)) {
      ::close(n);
      continue;
    }
    void* h = open_by_name(name, flags, why);
    ::close(n);  // the loader holds its own mapping
    return h;
  }
  log::debug("no unused descriptor name to load " + path + " through: loading it by its path");
  return open_by_name(path, flags, why);
}

}  // namespace seastar::runtime
