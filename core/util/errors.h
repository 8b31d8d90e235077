/** \file
 * Seastar's exception types. Each maps to one Python exception in the bindings, so a C++
 * error reaches Python users as the exception they would expect (ValueError for bad input,
 * TypeError for a wrong dtype, seastar.TraceError for a mistake in a vertex program...).
 */
#pragma once

#include <stdexcept>
#include <string>

namespace seastar {

/// Base of every Seastar error.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// A bad value: an index out of range, mismatched lengths, a shape that does not fit.
struct ValueError : Error {
  using Error::Error;
};
/// A value of the wrong kind: a dtype or device the operation cannot take.
struct TypeError : Error {
  using Error::Error;
};
/// A mistake in a vertex program found while tracing it; the message names the user's line.
struct TraceError : Error {
  using Error::Error;
};
/// The host compiler or NVRTC rejected generated code; the message holds its output.
struct CompileError : Error {
  using Error::Error;
};
/// The user interrupted a long step (SIGINT while the host compiler ran); nothing was cached.
/// Python sees KeyboardInterrupt.
struct Interrupted : Error {
  using Error::Error;
};
/// A feature the backend does not (yet) provide, said plainly instead of computing garbage.
struct NotImplementedError : Error {
  using Error::Error;
};

}  // namespace seastar

/// Throws `Type` with a message built by streaming the remaining arguments.
#define SEASTAR_THROW(Type, ...) throw ::seastar::Type(::seastar::detail::concat(__VA_ARGS__))
#define SEASTAR_CHECK(cond, Type, ...) \
  do {                                 \
    if (!(cond)) SEASTAR_THROW(Type, __VA_ARGS__); \
  } while (0)

#include <sstream>
namespace seastar::detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace seastar::detail
