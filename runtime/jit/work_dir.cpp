/** \file A private folder for one compile; see work_dir.h. */
#include "runtime/jit/work_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/util/errors.h"
#include "core/util/log.h"
#include "runtime/jit/cache_trust.h"
#include "runtime/jit/kernel_cache.h"

namespace seastar::runtime::cache {
namespace {

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string where(const std::string& path) {
  return " (kernel cache " + folder_of(path) + "; SEASTAR_CACHE_DIR selects another directory)";
}

}  // namespace

WorkDir::WorkDir(const std::string& entry) {
  std::string pattern = temp_path(entry) + ".XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))  // 0700 whatever the umask
    SEASTAR_THROW(CompileError, "cannot write ", pattern, ": ", std::strerror(errno), where(entry));
  path_ = buf.data();
  fd_.reset(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  // the folder held is the one just made: a name taken over in between (a shared cache
  // folder) is neither this user's nor private
  if (!fd_ || ::fstat(fd_.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077)) {
    const int err = fd_ ? EPERM : errno;
    fd_.reset();
    SEASTAR_THROW(CompileError, "cannot use the private folder ", path_, ": ",
                  err == EPERM ? "another user's, or not private" : std::strerror(err), where(entry));
  }
}

WorkDir::~WorkDir() {
  if (!fd_) return;
  // its files through the descriptor; then the folder, if its name still names it (in a
  // shared cache folder, someone may have renamed it away and put theirs in its place)
  if (int err = clear_dir(fd_.get())) log::warn("cannot empty " + path_ + ": " + std::strerror(err));
  struct stat held, named;
  if (::fstat(fd_.get(), &held) == 0 && ::lstat(path_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
      held.st_ino == named.st_ino) {
    if (::rmdir(path_.c_str()) != 0 && errno != ENOENT)
      log::warn("cannot remove " + path_ + ": " + std::strerror(errno));
  } else {
    log::warn("the private folder " + path_ + " was renamed or replaced while a kernel compiled in it; "
              "whatever is now under that name is left alone");
  }
}

void WorkDir::write(const std::string& name, const std::string& data) const {
  UniqueFd fd(::openat(fd_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, entry_mode(false)));
  bool ok = fd && write_all(fd.get(), data);
  int err = ok ? 0 : errno;
  if (fd && ::close(fd.release()) != 0 && ok) ok = false, err = errno;
  if (!ok) SEASTAR_THROW(CompileError, "cannot write ", path_, "/", name, ": ", std::strerror(err), where(path_));
}

}  // namespace seastar::runtime::cache
