/** \file The check at import that seastar._C takes libstdc++ from the shared library torch loads
 * (see libstdcxx_guard.h). */
#include "python/src/libstdcxx_guard.h"

#include <dlfcn.h>
#include <link.h>

#include "core/util/errors.h"

namespace py = pybind11;

#ifndef SEASTAR_BUILD_CXX
#define SEASTAR_BUILD_CXX "an unknown compiler"
#endif

namespace seastar::python {
namespace {

struct Probe {
  const char* symbol;
  const char* name;
};
// Functions every user of iostreams reaches; a copy of libstdc++ that was linked in brings at least
// one of them (the first is what crashed: ProgramCore::signature writes an unsigned long).
constexpr Probe kProbes[] = {
    {"_ZNSo9_M_insertImEERSoT_", "std::ostream::_M_insert<unsigned long>"},
    {"_ZNSt6locale7classicEv", "std::locale::classic()"},
    {"_ZNSt8ios_base4InitC1Ev", "std::ios_base::Init::Init()"},
};

const char* pretty(const std::string& symbol) {
  for (const Probe& p : kProbes)
    if (symbol == p.symbol) return p.name;
  return symbol.c_str();
}

}  // namespace

LibstdcxxUse libstdcxx_use(const std::string& path) {
  // RTLD_NOLOAD: a handle to the library already there, never a second load of it
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) SEASTAR_THROW(ValueError, "no library ", path, " is loaded in this process");
  struct Close {
    void* h;
    ~Close() { dlclose(h); }
  } close{handle};
  link_map* own = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &own) != 0 || !own)
    SEASTAR_THROW(ValueError, "dlinfo of ", path, " failed: ", dlerror());
  LibstdcxxUse use;
  for (const Probe& p : kProbes) {
    // looks in the library first, then in what it depends on
    void* address = dlsym(handle, p.symbol);
    Dl_info info{};
    link_map* map = nullptr;
    if (!address || !dladdr1(address, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP)) continue;
    if (map == own) {
      use.own_copy = true;
      use.defined_in = path;
      use.symbol = p.symbol;
      return use;
    }
    if (use.defined_in.empty()) {
      use.defined_in = map && map->l_name && *map->l_name ? map->l_name : (info.dli_fname ? info.dli_fname : "");
      use.symbol = p.symbol;
    }
  }
  return use;
}

std::string libstdcxx_import_error(const std::string& path) {
  const LibstdcxxUse use = libstdcxx_use(path);
  if (!use.own_copy) return "";
  return "seastar._C (" + path + ") carries its own copy of libstdc++ (it defines " + pretty(use.symbol) +
         " itself): it was linked with libstdc++.a, and beside the libstdc++.so.6 that torch loads it would "
         "crash at its first call. It was built with " SEASTAR_BUILD_CXX ". Rebuild it with a compiler that "
         "links the shared libstdc++: configure a new build folder with -DCMAKE_CXX_COMPILER=/usr/bin/g++ "
         "(CXX=/usr/bin/g++ for pip), and without -static-libstdc++ in the flags.";
}

std::string this_library_path() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void*>(&this_library_path), &info) || !info.dli_fname) return "";
  return info.dli_fname;
}

void check_own_libstdcxx() {
  const std::string path = this_library_path();
  if (path.empty()) return;
  std::string error;
  try {
    error = libstdcxx_import_error(path);
  } catch (const Error&) {
    return;  // the check could not look (no link map): only a copy found is a reason to refuse
  }
  if (!error.empty()) throw py::import_error(error);
}

void bind_libstdcxx(py::module_& m) {
  m.def("libstdcxx_use", [](const std::string& path) {
    const LibstdcxxUse use = libstdcxx_use(path);
    return py::make_tuple(use.own_copy, use.defined_in);
  }, py::arg("path"),
  "(own_copy, defined_in) for a library loaded in this process: whether it carries its own copy of "
  "libstdc++, and which object defines the libstdc++ functions it calls ('' when none).");
  m.def("_libstdcxx_import_error", &libstdcxx_import_error, py::arg("path"),
        "The ImportError text `import seastar` would give for an extension like the loaded library at path.");
}

}  // namespace seastar::python
