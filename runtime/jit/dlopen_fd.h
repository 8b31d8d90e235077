/** \file
 * dlopen of a file already open: the loader is given `/proc/self/fd/<n>`, so the file it maps is
 * the one the descriptor was opened on and checked through (owner, mode and trailer, see
 * kernel_cache.h), whatever its path names by the time the loader runs.
 *
 * The loader treats a name it has loaded before as the same library, and descriptor numbers are
 * reused, so each load is given a descriptor number that no loaded library is named after. Where
 * /proc is not mounted, the file is loaded by its path instead: the folder checks
 * (cache_trust.h) still keep everyone else from replacing it.
 */
#pragma once

#include <string>

namespace seastar::runtime {

/// dlopen(…, `flags`) of the file open as `fd` (whose path is `path`, for the fallback and
/// messages). Returns the handle, or nullptr with the loader's reason in `why`.
void* dlopen_fd(int fd, const std::string& path, int flags, std::string* why);

}  // namespace seastar::runtime
