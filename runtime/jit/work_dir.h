/** \file
 * A private folder for one compile, inside the cache folder so that its results rename into
 * place: mkdtemp's 0700 folder, held open by a descriptor. The source is written into it
 * (O_EXCL), the compiler runs with it as its working directory (run_process's `cwd_fd`) and is
 * given names inside it, and the results are renamed out of it through the descriptor. No one
 * else can write into it; and should someone who can write to the cache folder itself (one
 * shared with SEASTAR_CACHE_SHARED=1) rename it away and put a folder of theirs under its
 * name, the compiler still reads the source written here and the cache still installs what the
 * compiler wrote here. Removed with its files when it goes out of scope.
 */
#pragma once

#include <string>

#include "runtime/jit/unique_fd.h"

namespace seastar::runtime::cache {

class WorkDir {
 public:
  /// Creates `<entry>.<pid>-<n>.tmp.XXXXXX` beside `entry` (temp_path's pattern, so that
  /// sweep_stale_temps removes it once its process died). Throws CompileError.
  explicit WorkDir(const std::string& entry);
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  ~WorkDir();

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

  /// Writes `data` as the new file `name` in the folder (private mode). Throws CompileError.
  void write(const std::string& name, const std::string& data) const;

 private:
  std::string path_;
  UniqueFd fd_;
};

}  // namespace seastar::runtime::cache
