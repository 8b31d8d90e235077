/** \file
 * Who may have written the kernel cache. Its entries are code this process runs (dlopen, or a
 * CUDA image handed to the driver), and an entry's own key (kernel_cache.h) only catches damage:
 * anyone who can write to the folder can recompute a key. So, as ssh's StrictModes does for
 * ~/.ssh, nothing in the cache is compiled or loaded unless only this user (or root) can have
 * put it there:
 *   - the cache folder is owned by this user or root and not writable by group or others;
 *   - so is every folder above it, up to `/` (whoever can write to one of them can rename the
 *     folders below it and put their own in place); a sticky folder above (`/tmp`) is fine
 *     even when anyone can write to it, since others cannot rename what is not theirs in it,
 *     but the cache folder itself may not be one;
 *   - every entry is a regular file owned by this user and not writable by group or others.
 * A folder that breaks the rules is refused with one CompileError naming it, its owner and
 * mode, and the fix; an entry that breaks them is treated as damaged (rebuilt as a private
 * entry where a compiler runs, one error otherwise).
 *
 * SEASTAR_CACHE_SHARED=1 shares a cache on purpose: the checks are off, the process warns once,
 * and new folders and entries are readable by everyone (0755/0644) instead of private
 * (0700/0600). Everyone who can write to such a folder can run code in every process using it.
 */
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <string>

namespace seastar::runtime::cache {

/// Whether SEASTAR_CACHE_SHARED=1 is set; "" and "0" mean no. Throws ValueError for any
/// other value (a misspelt opt-in must not silently keep or drop the checks).
bool shared();

/// Checks `dir` (an absolute path without symbolic links, e.g. from realpath) and every folder
/// above it. Throws CompileError for the first one that breaks the rules; with the opt-in,
/// warns once per process instead and checks nothing.
void check_folder(const std::string& dir);

/// Why the file described by `st` (fstat of the descriptor it is read through) must not be
/// used, or "" when it may: not a regular file, owned by another user, writable by group or
/// others. Ownership and mode are not checked with the opt-in.
std::string untrusted_entry(const struct stat& st);

/// The mode of a new cache folder: 0700, or 0755 with the opt-in.
mode_t folder_mode();
/// The mode of a new entry: 0600 (0700 for a shared object), or 0644 (0755) with the opt-in.
mode_t entry_mode(bool executable);

/// "uid 65534 (nobody)": a file's owner as messages show it.
std::string describe_owner(uid_t uid);
/// "0777": the permission bits as chmod takes them.
std::string describe_mode(mode_t mode);

}  // namespace seastar::runtime::cache
