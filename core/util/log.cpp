/** \file Implements the project logger on spdlog (stderr, one named logger "seastar"). */
#include "core/util/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <mutex>

#include "core/util/errors.h"

namespace seastar::log {
namespace {

spdlog::level::level_enum parse(const std::string& name) {
  if (name == "trace") return spdlog::level::trace;
  if (name == "debug") return spdlog::level::debug;
  if (name == "info") return spdlog::level::info;
  if (name == "warn" || name == "warning") return spdlog::level::warn;
  if (name == "error") return spdlog::level::err;
  if (name == "off") return spdlog::level::off;
  SEASTAR_THROW(ValueError, "unknown log level '", name, "' (expected trace, debug, info, warn, error or off)");
}

std::shared_ptr<spdlog::logger>& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto l = spdlog::stderr_color_mt("seastar");
    l->set_pattern("[%H:%M:%S.%e] [seastar] [%l] %v");
    const char* env = std::getenv("SEASTAR_LOG_LEVEL");
    try {
      l->set_level(env ? parse(env) : spdlog::level::warn);
    } catch (const ValueError&) {
      l->set_level(spdlog::level::warn);
      l->warn("ignoring SEASTAR_LOG_LEVEL={}: not a level name", env);
    }
    return l;
  }();
  return instance;
}

}  // namespace

void set_level(const std::string& level) { logger()->set_level(parse(level)); }

std::string get_level() {
  auto sv = spdlog::level::to_string_view(logger()->level());
  return std::string(sv.data(), sv.size());
}

// spdlog has a `critical` level between error and off that Seastar does not use.
static spdlog::level::level_enum to_spdlog(Level level) {
  return level == Level::off ? spdlog::level::off : static_cast<spdlog::level::level_enum>(level);
}

bool enabled(Level level) { return logger()->should_log(to_spdlog(level)); }

void write(Level level, const std::string& message) { logger()->log(to_spdlog(level), message); }

}  // namespace seastar::log
