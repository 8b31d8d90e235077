/** \file Whether a loaded library carries its own copy of libstdc++.
 *
 * torch loads the shared libstdc++ (libstdc++.so.6). A library linked with libstdc++.a (a compiler
 * whose search path finds the archive first, or -static-libstdc++) carries a copy whose code then
 * runs against state the shared one set up: seastar._C built so crashes at its first call, in
 * ostream formatting. cmake/SeastarLibstdcxx.cmake keeps the build from producing such a library;
 * this is the check at import, for an extension built some other way, so that it fails with an
 * ImportError that names the fix instead of a segmentation fault. */
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace seastar::python {

struct LibstdcxxUse {
  bool own_copy = false;   ///< the library defines libstdc++'s functions itself
  std::string defined_in;  ///< the object whose definitions its lookups find ("" when it uses none)
  std::string symbol;      ///< the libstdc++ function that decided it
};

/// Where the library at `path`, already loaded in this process, takes libstdc++'s functions from:
/// dlsym of a few libstdc++ functions through its own handle, dladdr of what comes back. Throws
/// ValueError when no library of that path is loaded.
LibstdcxxUse libstdcxx_use(const std::string& path);

/// The text of the ImportError for an extension at `path` that carries its own libstdc++, naming
/// the compiler this extension was built with and the fix; "" when it takes the shared one.
std::string libstdcxx_import_error(const std::string& path);

/// The path of the loaded object that holds this code (seastar._C itself).
std::string this_library_path();

/// Throws pybind11::import_error when seastar._C carries its own libstdc++.
void check_own_libstdcxx();

void bind_libstdcxx(pybind11::module_& m);  ///< libstdcxx_use, _libstdcxx_import_error

}  // namespace seastar::python
