/** \file posix_spawn with a captured pipe; see subprocess.h. */
#include "runtime/jit/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <sstream>

extern char** environ;

namespace seastar::runtime {
namespace {

std::mutex g_check_mutex;
std::function<void()> g_check;

/// Closes a descriptor once, on every path out of run_process.
struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

int wait_child(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

std::string ProcessResult::describe() const {
  if (!started) return spawn_error;
  if (signal != 0) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exit status " + std::to_string(exit_code);
}

std::vector<std::string> split_command(const std::string& command) {
  std::vector<std::string> words;
  std::istringstream in(command);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string format_command(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& a : argv) {
    if (!line.empty()) line += ' ';
    bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                   "_-+=/.,:@%") == std::string::npos;
    if (plain) {
      line += a;
      continue;
    }
    line += '\'';
    for (char c : a) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

void set_interrupt_check(std::function<void()> check) {
  std::lock_guard<std::mutex> lock(g_check_mutex);
  g_check = std::move(check);
}

void check_interrupt() {
  std::function<void()> check;
  {
    std::lock_guard<std::mutex> lock(g_check_mutex);
    check = g_check;
  }
  if (check) check();
}

ProcessResult run_process(const std::vector<std::string>& argv, int cwd_fd) {
  ProcessResult r;
  if (argv.empty()) {
    r.spawn_error = "no program given (an empty command)";
    return r;
  }
  std::string program = argv[0];
  if (cwd_fd >= 0 && program[0] != '/' && program.find('/') != std::string::npos) {
    char cwd[4096];  // "./cxx" means the caller's ./cxx, not one in the child's folder
    if (::getcwd(cwd, sizeof cwd)) program = std::string(cwd) + "/" + program;
  }
  // close-on-exec on both ends: a child spawned concurrently by another thread must not
  // inherit the write end, or this read would never see end-of-file
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.spawn_error = std::string("cannot create a pipe: ") + std::strerror(errno);
    return r;
  }
  Fd read_end{fds[0]}, write_end{fds[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, write_end.fd, 2);
  if (cwd_fd >= 0) posix_spawn_file_actions_addfchdir_np(&actions, cwd_fd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Python ignores SIGPIPE and a caller's thread may block signals; the compiler gets defaults
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  // its own process group, so abandoning it reaches the driver's children too (cc1plus, as, ld:
  // ld would otherwise go on writing the output file after the driver died)
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int err = posix_spawnp(&pid, program.c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  write_end.reset();
  if (err != 0) {
    r.spawn_error = "cannot run '" + argv[0] + "': " + std::strerror(err);
    return r;
  }
  r.started = true;

  try {
    char buf[4096];
    for (;;) {
      pollfd p{read_end.fd, POLLIN, 0};
      int n = poll(&p, 1, 50);
      if (n < 0 && errno != EINTR) break;
      if (n > 0) {
        ssize_t got = read(read_end.fd, buf, sizeof buf);
        if (got > 0) {
          r.output.append(buf, static_cast<size_t>(got));
          continue;
        }
        if (got == 0 || errno != EINTR) break;  // end of file: the child (and its children) closed it
      }
      check_interrupt();
    }
  } catch (...) {
    kill(-pid, SIGKILL);
    wait_child(pid);
    // the pipe closes once every process of the group is gone: then nothing writes any more
    // (bounded, in case something outside the group holds the pipe open)
    char drain[4096];
    for (int tries = 0; tries < 100; ++tries) {
      pollfd p{read_end.fd, POLLIN, 0};
      if (poll(&p, 1, 50) == 0) continue;
      ssize_t got = read(read_end.fd, drain, sizeof drain);
      if (got == 0 || (got < 0 && errno != EINTR)) break;
    }
    throw;
  }
  int status = wait_child(pid);
  if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  }
  return r;
}

}  // namespace seastar::runtime
