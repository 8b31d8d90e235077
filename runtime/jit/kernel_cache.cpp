/** \file Self-verifying entries of the on-disk kernel cache; see kernel_cache.h. */
#include "runtime/jit/kernel_cache.h"

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
#include "runtime/jit/cache_trust.h"

// POSIX calls, not std::filesystem: libtorch exports its own copies of std::filesystem's
// functions, and the dynamic linker may bind ours to them (remove_all crashed that way).

namespace seastar::runtime {
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

/// mkdir -p, new folders with `mode`; errno of the failure, else 0.
int make_dirs(const std::string& dir, mode_t mode) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) return errno;
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/// Reads the rest of `fd` into `out`; errno on failure, else 0.
int read_fd(int fd, std::string* out) {
  out->clear();
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    out->append(buf, static_cast<size_t>(n));
  }
}

/// Renames `name` in the folder open as `dir_fd` (AT_FDCWD: a path) to `path`.
void rename_into_place(int dir_fd, const std::string& name, const std::string& path) {
  if (::renameat(dir_fd, name.c_str(), AT_FDCWD, path.c_str()) == 0) return;
  int err = errno;
  if (err == EISDIR || err == ENOTEMPTY || err == EEXIST) {  // a directory squats the entry's name
    cache::remove_tree_at(AT_FDCWD, path);
    if (::renameat(dir_fd, name.c_str(), AT_FDCWD, path.c_str()) == 0) return;
    err = errno;
  }
  SEASTAR_THROW(CompileError, "cannot rename ", name, " to ", path, ": ", std::strerror(err), where(path));
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
  if (int err = make_dirs(dir, folder_mode()))
    SEASTAR_THROW(CompileError, "cannot create the kernel cache directory ", dir, ": ", std::strerror(err),
                  " (SEASTAR_CACHE_DIR selects another directory)");
  // the folders checked are the folders used: through a symbolic link, another folder's
  // owner and mode would decide, and the link could be pointed elsewhere afterwards
  char* real = ::realpath(dir.c_str(), nullptr);
  if (!real)
    SEASTAR_THROW(CompileError, "cannot resolve the kernel cache directory ", dir, ": ", std::strerror(errno),
                  " (SEASTAR_CACHE_DIR selects another directory)");
  dir = real;
  std::free(real);
  check_folder(dir);
  static std::mutex mutex;
  static std::set<std::string> swept;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (swept.insert(dir).second) sweep_stale_temps(dir);
  }
  return dir;
}

int64_t temp_owner(const std::string& file_name) {
  // <entry>.<pid>-<n>.tmp, optionally followed by a suffix (a WorkDir's mkdtemp letters)
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
    // a WorkDir is a folder of this user's; another user's is theirs to remove
    if (::lstat(path.c_str(), &st) != 0 || !(S_ISREG(st.st_mode) || (S_ISDIR(st.st_mode) && st.st_uid == ::geteuid())))
      continue;
    const int64_t age = static_cast<int64_t>(now - st.st_mtime);
    // a dead writer on this machine: its rename never comes; a writer on another machine that
    // shares the folder cannot be asked, so only a day-old file counts as abandoned there
    const bool dead = ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    if ((dead && age >= dead_after_s) || age >= any_after_s) {
      if (remove_tree_at(AT_FDCWD, path) == 0) ++removed;
    }
  }
  ::closedir(d);
  if (removed) log::info("kernel cache: removed " + std::to_string(removed) + " temporary files of processes that "
                         "died while writing them (" + dir + ")");
  return removed;
}

Found read_entry(const std::string& path, const std::string& key, Entry* entry, std::string* why, UniqueFd* fd_out) {
  if (fd_out) fd_out->reset();
  auto bad = [&](const std::string& reason) {
    if (why) *why = reason;
    return Found::bad;
  };
  // O_NONBLOCK: a FIFO in an entry's place must not stall the open
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) {
    const int err = errno;
    if (err == ENOENT) return Found::missing;
    if (err == ELOOP) return bad("it is a symbolic link");
    return bad(std::string("it cannot be read: ") + std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return bad(std::string("it cannot be read: ") + std::strerror(errno));
  if (const std::string untrusted = untrusted_entry(st); !untrusted.empty()) return bad(untrusted);
  std::string data;
  data.reserve(static_cast<size_t>(st.st_size));
  if (int err = read_fd(fd.get(), &data)) return bad(std::string("it cannot be read: ") + std::strerror(err));
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
  if (fd_out) *fd_out = std::move(fd);
  return Found::hit;
}

void seal_and_install(int dir_fd, const std::string& name, const std::string& path, const std::string& key,
                      const std::map<std::string, std::string>& fields) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0)
    SEASTAR_THROW(CompileError, "cannot read the compiler's output ", name, ": ", std::strerror(errno), where(path));
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid())
    SEASTAR_THROW(CompileError, "the compiler's output ", name, " is not a file of this user's", where(path));
  std::string object;
  if (int err = read_fd(fd.get(), &object))
    SEASTAR_THROW(CompileError, "cannot read the compiler's output ", name, ": ", std::strerror(err), where(path));
  // the compiler made it 0777 & ~umask; an entry is private unless the cache is shared
  bool ok = write_all(fd.get(), trailer(object, key, fields)) && ::fchmod(fd.get(), entry_mode(true)) == 0;
  int err = ok ? 0 : errno;
  if (::close(fd.release()) != 0 && ok) ok = false, err = errno;
  if (!ok) SEASTAR_THROW(CompileError, "cannot write ", name, ": ", std::strerror(err), where(path));
  rename_into_place(dir_fd, name, path);
}

void install(int dir_fd, const std::string& name, const std::string& path) { rename_into_place(dir_fd, name, path); }

void write_entry(const std::string& path, const std::string& key, const std::string& object,
                 const std::map<std::string, std::string>& fields) {
  write_file(path, object + trailer(object, key, fields));
}

void write_file(const std::string& path, const std::string& data) {
  const std::string tmp = temp_path(path);
  TempFile guard(tmp);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, entry_mode(false));
  bool ok = fd >= 0 && write_all(fd, data);
  int err = errno;
  if (fd >= 0 && ::close(fd) != 0 && ok) ok = false, err = errno;
  if (!ok) SEASTAR_THROW(CompileError, "cannot write ", tmp, ": ", std::strerror(err), where(path));
  rename_into_place(AT_FDCWD, tmp, path);
}

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

int clear_dir(int fd) {
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  DIR* d = copy >= 0 ? ::fdopendir(copy) : nullptr;
  if (!d) {
    const int err = errno;
    if (copy >= 0) ::close(copy);
    return err;
  }
  int err = 0;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") err = err ? err : remove_tree_at(fd, n);
  }
  ::closedir(d);
  return err;
}

int remove_tree_at(int dir_fd, const std::string& name) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? 0 : errno;
  if (!S_ISDIR(st.st_mode)) return ::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT ? 0 : errno;
  // through a descriptor opened without following links: a folder swapped for a symbolic link
  // meanwhile is not followed into whatever it points at
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return errno == ENOENT ? 0 : errno;
  if (int err = clear_dir(fd.get())) return err;
  return ::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : errno;
}

std::string temp_path(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return path + "." + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".tmp";
}

bool discard(const std::string& path, const std::string& key) {
  if (read_entry(path, key, nullptr, nullptr) == Found::hit) return true;  // replaced meanwhile
  if (int err = remove_tree_at(AT_FDCWD, path)) {
    log::warn("cannot remove the bad kernel cache entry " + path + ": " + std::strerror(err));
    return false;
  }
  return true;
}

TempFile::~TempFile() {
  if (!path.empty()) ::unlink(path.c_str());
}

}  // namespace cache
}  // namespace seastar::runtime
