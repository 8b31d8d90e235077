/** \file
 * Runs a program from an argument vector (posix_spawn, no shell), so program names, cache paths
 * and compiler commands reach the compiler as they are: a name like `x;touch y` or a directory
 * with a space is one argument, never shell syntax. Standard output and error are captured
 * together through a pipe; standard input is /dev/null.
 *
 * The child runs in a process group of its own. While it waits, the caller's interrupt check
 * (set_interrupt_check) is polled; when it throws (Python's pending KeyboardInterrupt, say),
 * the whole group is killed and every member gone before the exception propagates, so no
 * compiler or linker outlives the call or writes into the cache afterwards.
 */
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace seastar::runtime {

struct ProcessResult {
  bool started = false;   ///< false: the program could not be run (spawn_error says why)
  std::string spawn_error;
  int exit_code = -1;     ///< when it exited
  int signal = 0;         ///< the signal that ended it, 0 if it exited
  std::string output;     ///< stdout and stderr, interleaved as written

  bool ok() const { return started && signal == 0 && exit_code == 0; }
  /// "exit status 1", "killed by signal 2 (Interrupt)", or the spawn error.
  std::string describe() const;
};

/// Splits a command such as SEASTAR_CXX="ccache g++ -Wno-psabi" on whitespace (no quoting:
/// a program path with spaces belongs in PATH, not in the command).
std::vector<std::string> split_command(const std::string& command);

/// The argument vector as one line for messages, each word quoted where a shell would need it.
std::string format_command(const std::vector<std::string>& argv);

/// Runs argv[0] (searched in PATH when it has no '/') with argv; waits for it to finish. With
/// `cwd_fd`, the child starts in the folder open as that descriptor (the folder itself, even if
/// its path names another one by then: the JIT's private WorkDir); a relative argv[0] with a
/// '/' is still taken relative to the caller's working directory.
ProcessResult run_process(const std::vector<std::string>& argv, int cwd_fd = -1);

/// Installs the check polled while a child runs (about every 50 ms) and after it was ended by
/// SIGINT; it may throw to abandon the child. The Python bindings install one that raises a
/// pending KeyboardInterrupt. Not installed: children run to completion.
void set_interrupt_check(std::function<void()> check);
/// Calls the installed check, if any.
void check_interrupt();

}  // namespace seastar::runtime
