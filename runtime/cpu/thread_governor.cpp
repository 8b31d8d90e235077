/** \file The thread governor; see thread_governor.h. */
#include "runtime/cpu/thread_governor.h"

#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>

#include "core/util/errors.h"
#include "core/util/log.h"
#include "runtime/cpu/per_process.h"

namespace seastar::runtime {

int governed_threads(int requested, int cpus, double other_cores) {
  // Below half a core the static split still gains: a thread sharing a core with a process that
  // wants less than half of it gets more than half of that core.
  if (requested <= 1 || other_cores < 0.5) return requested;
  const int left = static_cast<int>(std::floor(cpus - other_cores + 0.5));
  return std::clamp(left, 1, requested);
}

std::optional<double> busy_seconds(std::string_view text, const std::vector<int>& cpus, long ticks_per_second) {
  if (ticks_per_second <= 0) return std::nullopt;
  std::vector<bool> found(cpus.size(), false);
  double ticks = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9') continue;  // "cpu " is the sum
    int id = -1;
    const char* p = line.data() + 3;
    const char* end = line.data() + line.size();
    auto [after_id, ec] = std::from_chars(p, end, id);
    if (ec != std::errc()) return std::nullopt;
    const auto at = std::find(cpus.begin(), cpus.end(), id);
    if (at == cpus.end()) continue;
    // user nice system idle iowait irq softirq steal (guest time is already inside user)
    uint64_t field[8] = {};
    p = after_id;
    for (uint64_t& f : field) {
      while (p < end && *p == ' ') ++p;
      auto [next, err] = std::from_chars(p, end, f);
      if (err != std::errc()) return std::nullopt;
      p = next;
    }
    ticks += static_cast<double>(field[0] + field[1] + field[2] + field[5] + field[6] + field[7]);
    found[static_cast<size_t>(at - cpus.begin())] = true;
  }
  if (std::find(found.begin(), found.end(), false) != found.end()) return std::nullopt;
  return ticks / static_cast<double>(ticks_per_second);
}

void ThreadGovernor::measure(const LoadReading& reading) {
  const std::optional<LoadReading> last = baseline_;
  baseline_ = reading;
  if (!last || reading.wall_s - last->wall_s > kStaleSeconds) return;  // an average over a long gap says little about now
  const double wall = reading.wall_s - last->wall_s;
  if (wall <= 0) return;
  const double other = std::max(0.0, (reading.busy_s - last->busy_s - (reading.own_s - last->own_s)) / wall);
  ++samples_;
  const int now = governed_threads(requested_, cpus_, other_cores_);
  const int measured = governed_threads(requested_, cpus_, other);
  if (measured == now || measured == pending_) {  // agrees with the standing decision, or the second in a row
    other_cores_ = other;
    pending_ = 0;
  } else {
    pending_ = measured;
  }
}

int ThreadGovernor::advise(int current, const std::optional<LoadReading>& reading) {
  if (current != applied_) {  // torch.set_num_threads since the last launch: the user's count
    if (requested_ != current) pending_ = 0;
    requested_ = applied_ = current;
  }
  if (reading) measure(*reading);
  const int want = target();
  if (want != current) {
    // the first change says why torch.get_num_threads() moved (info); later ones only at debug
    const log::Level level = lowered_ + restored_ == 0 ? log::Level::info : log::Level::debug;
    (want < current ? lowered_ : restored_) += 1;
    if (log::enabled(level)) {
      char m[200];
      std::snprintf(m, sizeof m,
                    "thread governor: torch's threads %d -> %d (other processes keep %.2f of %d cores busy; "
                    "seastar.set_thread_governor(False) keeps the count)",
                    current, want, other_cores_, cpus_);
      log::write(level, m);
    }
    applied_ = want;
  }
  return want;
}

int ThreadGovernor::release(int current) {
  const int back = current == applied_ && requested_ > 0 ? requested_ : current;
  requested_ = applied_ = 0;  // the next advise takes torch's count as the user's (the load measured stands)
  return back;
}

ThreadGovernorStats ThreadGovernor::stats() const {
  ThreadGovernorStats s;
  s.requested = requested_;
  s.threads = applied_;
  s.other_cores = other_cores_;
  s.samples = samples_, s.lowered = lowered_, s.restored = restored_;
  return s;
}

namespace {

double seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<int> usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool enabled_by_env() {
  const char* env = std::getenv("SEASTAR_THREAD_GOVERNOR");
  const std::string v = env ? env : "";
  if (v == "1" || v == "on") return true;
  if (v.empty() || v == "0" || v == "off") return false;  // off unless asked: torch's thread count is the user's
  SEASTAR_THROW(ValueError, "SEASTAR_THREAD_GOVERNOR='", v, "': expected 1/on or 0/off (the default)");
}

/// The process's governor with what it reads the load from.
struct ProcessGovernor {
  std::mutex m;
  bool enabled = enabled_by_env();
  std::vector<int> cpus = usable_cpus();
  long ticks = sysconf(_SC_CLK_TCK);
  ThreadGovernor governor{static_cast<int>(std::max<size_t>(1, cpus.size()))};
  bool available = read(0).has_value();

  std::optional<LoadReading> read(double wall_s) const {
    std::ifstream f("/proc/stat");
    if (!f) return std::nullopt;
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::optional<double> busy = busy_seconds(text, cpus, ticks);
    if (!busy) return std::nullopt;
    return LoadReading{wall_s, *busy, seconds(CLOCK_PROCESS_CPUTIME_ID)};
  }
};

// a forked child has its own load and CPU clock, and the parent's lock may be held there;
// the constructor throws for a bad SEASTAR_THREAD_GOVERNOR
ProcessGovernor& process_governor() { return per_process<ProcessGovernor>(); }

bool on_main_thread() { return static_cast<pid_t>(syscall(SYS_gettid)) == getpid(); }

}  // namespace

LaunchThreads govern_threads(int current, bool allowed) {
  ProcessGovernor& p = process_governor();
  if (!on_main_thread()) return {current, current};
  std::lock_guard<std::mutex> lock(p.m);
  if (!p.enabled || !p.available) return {current, current};
  if (!allowed) {
    const int user = p.governor.release(current);
    return {user, user};
  }
  const double wall = seconds(CLOCK_MONOTONIC);
  const int torch_threads = p.governor.advise(current, p.governor.sample_due(wall) ? p.read(wall) : std::nullopt);
  return {torch_threads, p.governor.requested()};
}

int set_thread_governor_enabled(bool enabled, int current) {
  ProcessGovernor& p = process_governor();
  std::lock_guard<std::mutex> lock(p.m);
  if (p.enabled == enabled) return current;
  p.enabled = enabled;
  return enabled ? current : p.governor.release(current);
}

ThreadGovernorStats thread_governor_stats() {
  ProcessGovernor& p = process_governor();
  std::lock_guard<std::mutex> lock(p.m);
  ThreadGovernorStats s = p.governor.stats();
  s.enabled = p.enabled;
  s.available = p.available;
  return s;
}

}  // namespace seastar::runtime
