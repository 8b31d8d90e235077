/** \file Python binding of the CUDA backend's compile-time pieces: NVRTC (compile generated CUDA
 * to a cubin for an architecture, without a GPU) and whether this build has the backend. */
#include <pybind11/stl.h>

#include "python/src/bindings.h"
#ifdef SEASTAR_WITH_CUDA
#include "runtime/cuda/nvrtc_compiler.h"
#endif

namespace py = pybind11;

namespace seastar::python {

void bind_cuda(py::module_& m) {
#ifdef SEASTAR_WITH_CUDA
  m.attr("cuda_built") = true;
  m.def("nvrtc_available", [] {
    std::string why;
    bool ok = runtime::nvrtc_available(&why);
    return py::make_tuple(ok, why);
  }, "(True, '') when NVRTC can be loaded, else (False, what was tried).");
  m.def("nvrtc_version", &runtime::nvrtc_version);
  m.def("nvrtc_supported_archs", &runtime::nvrtc_supported_archs);
  m.def("nvrtc_compile", [](const std::string& source, py::object arch, const std::string& name) {
    const int cc = py::isinstance<py::int_>(arch) ? arch.cast<int>() : runtime::parse_arch(arch.cast<std::string>());
    runtime::CudaBinary b;
    {
      py::gil_scoped_release release;
      b = runtime::compile_cuda(source, name, cc);
    }
    py::list kernels;
    for (const auto& k : b.kernels) {
      py::dict d;
      d["name"] = k.name;
      d["registers"] = k.registers;
      d["stack_bytes"] = k.stack_bytes;
      d["spill_store_bytes"] = k.spill_store_bytes;
      d["spill_load_bytes"] = k.spill_load_bytes;
      kernels.append(d);
    }
    py::dict r;
    r["target"] = b.target;
    r["ptx"] = b.is_ptx;
    r["path"] = b.path;
    r["source_path"] = b.source_path;
    r["size"] = b.image.size();
    r["cache_hit"] = b.cache_hit;
    r["log"] = b.log;
    r["kernels"] = kernels;
    return r;
  }, py::arg("source"), py::arg("arch"), py::arg("name") = "program",
     "Compiles CUDA source with NVRTC for an architecture (80, 'sm_90', ...), cached on disk; returns the "
     "target, the cubin's path and every kernel's registers and spills. Raises CompileError with NVRTC's log.");
#else
  m.attr("cuda_built") = false;
#endif
}

}  // namespace seastar::python
