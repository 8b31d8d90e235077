/** \file One compile of a kernel at a time across processes; see build_lock.h. */
#include "runtime/jit/build_lock.h"

#include <fcntl.h>
#include <unistd.h>
#include <sys/file.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <thread>

#include "core/util/log.h"
#include "runtime/jit/subprocess.h"

namespace seastar::runtime {

BuildLock::BuildLock(const std::string& path, double max_wait_s) : path_(path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) {
    log::debug("no build lock " + path + ": " + std::strerror(errno));
    return;
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
    fd_ = std::move(fd);
    return;
  }
  if (errno != EWOULDBLOCK) return;  // a file system without flock: compile without the lock
  log::debug("waiting for another process compiling the same kernel (" + path + ")");
  // polled rather than blocking: the wait has a bound, and Ctrl-C ends it (the interrupt check
  // the Python bindings install raises the pending KeyboardInterrupt)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(max_wait_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    check_interrupt();
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      fd_ = std::move(fd);
      return;
    }
  }
  log::warn("another process has been compiling " + path.substr(0, path.size() - 5) + " for over " +
            std::to_string(static_cast<int>(max_wait_s)) + " s; compiling it here too");
}

BuildLock::~BuildLock() {
  if (fd_) ::unlink(path_.c_str());  // still held: no one else can be compiling under it
}

}  // namespace seastar::runtime
