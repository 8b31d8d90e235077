/** \file
 * The on-disk kernel cache shared by the host-compiler JIT (compiler.h) and NVRTC
 * (nvrtc_compiler.h): where it lives, how entries are named, and self-verifying entries.
 *
 * An entry is the compiler's object (a shared library, a cubin, PTX) followed by a trailer:
 * text fields (`key`, `size`, `hash` of the object, and the writer's own, e.g. the compiler's
 * version or NVRTC's log), then a fixed footer giving the fields' length and hash. A reader
 * checks all of it before the object is used, so a truncated file, garbage written over one, or
 * a valid entry copied under another key is found out instead of crashing dlopen or a kernel.
 * The trailer sits after everything a loader reads (an ELF file is read through its headers'
 * offsets), so a shared library with a trailer loads as it is.
 *
 * The key catches damage, not intent: anyone who can write to the folder can recompute it. So
 * the folder and every entry must also be such that only this user can have written them
 * (cache_trust.h), checked before anything is compiled or loaded: the folder and those above it
 * by ensure_dir(), an entry through the very descriptor it is then read (and loaded) through.
 *
 * Writers write under a temporary name in the same directory (a private folder, work_dir.h, for
 * what a compiler writes) and rename: another process sees the old entry or the whole new one.
 * Concurrent writers of the same key write equivalent entries; the last rename wins.
 *
 * Directory: $SEASTAR_CACHE_DIR, else $XDG_CACHE_HOME/seastar/kernels, else
 * ~/.cache/seastar/kernels.
 */
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "runtime/jit/unique_fd.h"

namespace seastar::runtime {

/// The cache directory as configured (not created).
std::string cache_dir();

/// 64-bit FNV-1a of `text` as 16 hex digits: cache keys and the trailer's integrity check
/// (accidental damage, not an adversary: cache_trust.h keeps others out of the folder).
std::string content_hash(const std::string& text);

namespace cache {

/// The symbol every cached object defines with the key it was built for (a C string): the host
/// JIT's shared objects export it (checked after dlopen), CUDA images hold it as a __device__
/// string (read back before loading, cuda_image_key.h).
inline constexpr const char* kKeySymbol = "seastar_kernel_key";

/// The cache directory as an absolute path without symbolic links, created if missing (with
/// the folders above it: cache::folder_mode()) and checked (cache::check_folder). Throws
/// CompileError naming the directory and the reason when it cannot be created or trusted.
std::string ensure_dir();

struct Entry {
  std::string object;                         ///< the bytes the compiler produced
  std::map<std::string, std::string> fields;  ///< key, size, hash and the writer's extras
};

enum class Found { hit, missing, bad };

/// Reads the entry at `path` and checks its trailer against `key`. On `bad`, `why` says what is
/// wrong (truncated, a hash mismatch, another key, a directory, a symbolic link, unreadable,
/// another owner, writable by others...). The file is opened once, without following a
/// symbolic link, and its owner and mode are checked (cache::untrusted_entry) through the
/// descriptor its bytes are then read through; on a hit, `fd` (when given) receives that
/// descriptor, so that what is loaded is the file that was checked (dlopen_fd.h), and is
/// closed otherwise.
Found read_entry(const std::string& path, const std::string& key, Entry* entry, std::string* why,
                 UniqueFd* fd = nullptr);

/// Appends the trailer to the object file `name` in the folder open as `dir_fd` (a WorkDir,
/// where a compiler wrote it), gives it an entry's mode and renames it to `path`. Throws
/// CompileError naming the file that could not be read or written.
void seal_and_install(int dir_fd, const std::string& name, const std::string& path, const std::string& key,
                      const std::map<std::string, std::string>& fields);

/// Renames the file `name` in the folder open as `dir_fd` to `path` (a directory squatting
/// `path` is removed first). Throws CompileError.
void install(int dir_fd, const std::string& name, const std::string& path);

/// Writes `object` with its trailer as the entry at `path` (temporary file + rename).
void write_entry(const std::string& path, const std::string& key, const std::string& object,
                 const std::map<std::string, std::string>& fields);

/// Writes a plain file (a generated source) through a temporary file + rename.
void write_file(const std::string& path, const std::string& data);

/// Writes all of `data` to `fd`, retrying on EINTR; false (errno set) on failure.
bool write_all(int fd, const std::string& data);

/// rm -r of `name` in the folder open as `dir_fd` (AT_FDCWD: `name` is a path), following no
/// symbolic link below it; errno of the first failure, else 0 (also when nothing is there).
int remove_tree_at(int dir_fd, const std::string& name);

/// Removes everything inside the folder open as `fd`, not the folder itself (as remove_tree_at).
int clear_dir(int fd);

/// A temporary name beside `path`, unique to this process and call: `<path>.<pid>-<n>.tmp`.
std::string temp_path(const std::string& path);

/// The pid in a temp_path file name (a suffix after ".tmp" is allowed), or -1 for any other name.
int64_t temp_owner(const std::string& file_name);

/// Removes the temporary files (and WorkDir folders) in `dir` that a killed process left behind
/// (they are never renamed into place): those of a process no longer running on this machine once
/// `dead_after_s` old, and any once `any_after_s` old (a writer on another machine sharing the
/// folder). ensure_dir() runs it once per process and folder. Returns how many it removed.
int sweep_stale_temps(const std::string& dir, int64_t dead_after_s = 600, int64_t any_after_s = 86400);

/// Removes the bad entry at `path` (a file or a directory in its place) unless another process
/// has meanwhile replaced it with a valid one for `key`. Returns false (and logs) when it
/// cannot be removed.
bool discard(const std::string& path, const std::string& key);

/// Removes its file when it goes out of scope: temporaries never outlive a failed compile.
struct TempFile {
  std::string path;
  explicit TempFile(std::string p) : path(std::move(p)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile();
};

}  // namespace cache
}  // namespace seastar::runtime
