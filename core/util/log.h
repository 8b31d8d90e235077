/** \file
 * The project logger. Its level comes from SEASTAR_LOG_LEVEL (trace, debug, info, warn,
 * error, off; default warn) and can be changed at run time, e.g. from Python.
 * spdlog is kept out of this header so that including it stays cheap.
 */
#pragma once

#include <string>

namespace seastar::log {

enum class Level { trace, debug, info, warn, error, off };

void set_level(const std::string& level);  ///< throws ValueError for an unknown name
std::string get_level();
bool enabled(Level level);
void write(Level level, const std::string& message);

inline void debug(const std::string& m) { write(Level::debug, m); }
inline void info(const std::string& m) { write(Level::info, m); }
inline void warn(const std::string& m) { write(Level::warn, m); }

}  // namespace seastar::log
