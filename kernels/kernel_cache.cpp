/** \file Self-verifying entries of the on-disk kernel cache; see kernel_cache.h. */
#include "kernels/kernel_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>

#include "core/util/errors.h"
#include "core/util/log.h"

// POSIX calls, not std::filesystem: libtorch exports its own copies of std::filesystem's
// functions, and the dynamic linker may bind ours to them (remove_all crashed that way).

namespace seastar::kernels {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// footer: "SEASTAR-ENTRY-1 " <fields length, 16 hex> ' ' <fields hash, 16 hex> '\n'
constexpr const char* kMagic = "SEASTAR-ENTRY-1 ";
constexpr size_t kMagicSize = 16;
constexpr size_t kFooterSize = kMagicSize + 16 + 1 + 16 + 1;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '%' || c == '\n' || c == '\r') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::strtol(s.substr(i + 1, 2).c_str(), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string trailer(const std::string& object, const std::string& key, const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> fields = extra;
  fields["key"] = key;
  fields["size"] = std::to_string(object.size());
  fields["hash"] = content_hash(object);
  std::string block;
  for (const auto& [name, value] : fields) block += name + "=" + escape(value) + "\n";
  return block + kMagic + hex16(block.size()) + " " + hex16(fnv1a(block)) + "\n";
}

std::string parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string where(const std::string& path) {
  return " (kernel cache " + parent(path) + "; SEASTAR_CACHE_DIR selects another directory)";
}

/// rm -r: a file, or a directory and everything in it; errno of the first failure, else 0.
int remove_tree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? 0 : errno;
  if (!S_ISDIR(st.st_mode)) return ::unlink(path.c_str()) == 0 || errno == ENOENT ? 0 : errno;
  if (DIR* d = ::opendir(path.c_str())) {
    int err = 0;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") err = err ? err : remove_tree(path + "/" + n);
    }
    ::closedir(d);
    if (err) return err;
  }
  return ::rmdir(path.c_str()) == 0 || errno == ENOENT ? 0 : errno;
}

/// mkdir -p; errno of the failure, else 0.
int make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return errno;
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/// Writes all of `data` to `fd`; errno on failure.
bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Reads a whole regular file; returns errno (EISDIR for a directory), 0 on success.
int read_all(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    ::close(fd);
    return err;
  }
  out->clear();
  out->reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return err;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return 0;
}

void rename_into_place(const std::string& tmp, const std::string& path) {
  if (::rename(tmp.c_str(), path.c_str()) == 0) return;
  int err = errno;
  if (err == EISDIR || err == ENOTEMPTY || err == EEXIST) {  // a directory squats the entry's name
    remove_tree(path);
    if (::rename(tmp.c_str(), path.c_str()) == 0) return;
    err = errno;
  }
  SEASTAR_THROW(CompileError, "cannot rename ", tmp, " to ", path, ": ", std::strerror(err), where(path));
}

}  // namespace

std::string cache_dir() {
  if (const char* d = std::getenv("SEASTAR_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/seastar/kernels";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/seastar/kernels";
}

std::string content_hash(const std::string& text) { return hex16(fnv1a(text)); }

namespace cache {

std::string ensure_dir() {
  std::string dir = cache_dir();
  if (dir[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd)) dir = std::string(cwd) + "/" + dir;
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (int err = make_dirs(dir))
    SEASTAR_THROW(CompileError, "cannot create the kernel cache directory ", dir, ": ", std::strerror(err),
                  " (SEASTAR_CACHE_DIR selects another directory)");
  static std::mutex mutex;
  static std::set<std::string> swept;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (swept.insert(dir).second) sweep_stale_temps(dir);
  }
  return dir;
}

int64_t temp_owner(const std::string& file_name) {
  // <entry>.<pid>-<n>.tmp, optionally followed by a suffix (".so" for the compiler's output)
  const size_t tmp = file_name.rfind(".tmp");
  if (tmp == std::string::npos) return -1;
  const size_t dash = file_name.rfind('-', tmp);
  const size_t dot = dash == std::string::npos ? std::string::npos : file_name.rfind('.', dash);
  if (dot == std::string::npos || dash == dot + 1 || tmp == dash + 1) return -1;
  for (size_t i = dot + 1; i < tmp; ++i)
    if (i != dash && (file_name[i] < '0' || file_name[i] > '9')) return -1;
  return std::strtoll(file_name.c_str() + dot + 1, nullptr, 10);
}

int sweep_stale_temps(const std::string& dir, int64_t dead_after_s, int64_t any_after_s) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  const time_t now = std::time(nullptr);
  while (dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    const int64_t pid = temp_owner(name);
    if (pid <= 0 || pid == ::getpid()) continue;
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const int64_t age = static_cast<int64_t>(now - st.st_mtime);
    // a dead writer on this machine: its rename never comes; a writer on another machine that
    // shares the folder cannot be asked, so only a day-old file counts as abandoned there
    const bool dead = ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    if ((dead && age >= dead_after_s) || age >= any_after_s) {
      if (::unlink(path.c_str()) == 0) ++removed;
    }
  }
  ::closedir(d);
  if (removed) log::info("kernel cache: removed " + std::to_string(removed) + " temporary files of processes that "
                         "died while writing them (" + dir + ")");
  return removed;
}

Found read_entry(const std::string& path, const std::string& key, Entry* entry, std::string* why) {
  std::string data;
  int err = read_all(path, &data);
  if (err == ENOENT) return Found::missing;
  auto bad = [&](const std::string& reason) {
    if (why) *why = reason;
    return Found::bad;
  };
  if (err == EISDIR) return bad("it is a directory, not a file");
  if (err) return bad(std::string("it cannot be read: ") + std::strerror(err));
  if (data.size() < kFooterSize || data.compare(data.size() - kFooterSize, kMagicSize, kMagic) != 0)
    return bad("it has no valid trailer (truncated or overwritten; " + std::to_string(data.size()) + " bytes)");
  const std::string footer = data.substr(data.size() - kFooterSize);
  const uint64_t block_size = std::strtoull(footer.substr(kMagicSize, 16).c_str(), nullptr, 16);
  if (block_size > data.size() - kFooterSize) return bad("its trailer is damaged (a length past the file's start)");
  const size_t object_size = data.size() - kFooterSize - block_size;
  const std::string block = data.substr(object_size, block_size);
  if (hex16(fnv1a(block)) != footer.substr(kMagicSize + 17, 16)) return bad("its trailer is damaged (hash mismatch)");
  Entry e;
  size_t pos = 0;
  while (pos < block.size()) {
    size_t end = block.find('\n', pos);
    if (end == std::string::npos) end = block.size();
    const std::string line = block.substr(pos, end - pos);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) e.fields[line.substr(0, eq)] = unescape(line.substr(eq + 1));
    pos = end + 1;
  }
  if (e.fields["key"] != key) return bad("it belongs to another key (" + e.fields["key"] + ")");
  if (e.fields["size"] != std::to_string(object_size))
    return bad("its object has " + std::to_string(object_size) + " bytes, the trailer says " + e.fields["size"]);
  data.resize(object_size);
  if (content_hash(data) != e.fields["hash"]) return bad("its content does not match its hash (damaged)");
  e.object = std::move(data);
  if (entry) *entry = std::move(e);
  return Found::hit;
}

void seal_and_install(const std::string& tmp, const std::string& path, const std::string& key,
                      const std::map<std::string, std::string>& fields) {
  std::string object;
  if (int err = read_all(tmp, &object))
    SEASTAR_THROW(CompileError, "cannot read the compiler's output ", tmp, ": ", std::strerror(err), where(path));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  bool ok = fd >= 0 && write_all(fd, trailer(object, key, fields));
  int err = errno;
  if (fd >= 0 && ::close(fd) != 0 && ok) ok = false, err = errno;
  if (!ok) SEASTAR_THROW(CompileError, "cannot write ", tmp, ": ", std::strerror(err), where(path));
  rename_into_place(tmp, path);
}

void write_entry(const std::string& path, const std::string& key, const std::string& object,
                 const std::map<std::string, std::string>& fields) {
  write_file(path, object + trailer(object, key, fields));
}

void write_file(const std::string& path, const std::string& data) {
  const std::string tmp = temp_path(path);
  TempFile guard(tmp);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write_all(fd, data);
  int err = errno;
  if (fd >= 0 && ::close(fd) != 0 && ok) ok = false, err = errno;
  if (!ok) SEASTAR_THROW(CompileError, "cannot write ", tmp, ": ", std::strerror(err), where(path));
  rename_into_place(tmp, path);
}

std::string temp_path(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return path + "." + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".tmp";
}

bool discard(const std::string& path, const std::string& key) {
  if (read_entry(path, key, nullptr, nullptr) == Found::hit) return true;  // replaced meanwhile
  if (int err = remove_tree(path)) {
    log::warn("cannot remove the bad kernel cache entry " + path + ": " + std::strerror(err));
    return false;
  }
  return true;
}

TempFile::~TempFile() {
  if (!path.empty()) ::unlink(path.c_str());
}

}  // namespace cache
}  // namespace seastar::kernels
