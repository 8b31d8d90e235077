/** \file One compile of a kernel at a time across processes.
 *
 * Processes that share a kernel cache (the ranks of one job, a test run's workers, a user's
 * notebooks) often need the same new kernel at the same moment, and each would compile it. The
 * first to take the kernel's lock file (`<entry>.lock`, flock) compiles; the others wait for it
 * and then load its entry. The lock is advisory and best effort: a lock file that cannot be
 * opened, or a wait longer than `max_wait_s` (a compiler that hangs, a cache on a file system
 * without flock), lets the process compile on its own, as it would without the lock, so a lock
 * never turns into a hang. The lock goes with its holder's descriptor, a crashed one included;
 * the holder removes the file when done, so the cache keeps no lock files (a process that
 * opened the file just before that waits on the removed file, then finds the entry).
 */
#pragma once

#include <string>

#include "runtime/jit/unique_fd.h"

namespace seastar::runtime {

class BuildLock {
 public:
  /// Takes the lock at `path`, waiting up to `max_wait_s` for another holder.
  explicit BuildLock(const std::string& path, double max_wait_s = 300.0);
  ~BuildLock();
  BuildLock(const BuildLock&) = delete;
  BuildLock& operator=(const BuildLock&) = delete;

  /// Whether this process holds the lock (false: it proceeds without one).
  bool held() const { return static_cast<bool>(fd_); }

 private:
  std::string path_;
  UniqueFd fd_;
};

}  // namespace seastar::runtime
