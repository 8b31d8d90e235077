/** \file Python binding of the fused-kernel runtime (FusedProgram and its autograd function). */
#include <pybind11/stl.h>
#include <torch/python.h>

#include "kernels/autograd.h"
#include "kernels/compiler.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace seastar::python {

void bind_runtime(py::module_& m) {
  py::class_<FusedProgram, std::shared_ptr<FusedProgram>>(m, "FusedProgram")
      .def(py::init<LoweredProgram>(), py::arg("lowered"))
      .def_property_readonly("unsupported", &FusedProgram::unsupported)
      .def("source", [](FusedProgram& p, const std::string& direction, py::object dtype, const std::string& index) {
        auto st = torch::python::detail::py_object_to_dtype(dtype);
        return p.source(direction, st, index == "int64" ? torch::kLong : torch::kInt);
      }, py::arg("direction"), py::arg("dtype"), py::arg("index_dtype") = "int32");
  m.def("fused_apply", &apply_fused, py::arg("program"), py::arg("graph"), py::arg("names"), py::arg("tensors"),
        "Runs a FusedProgram with autograd; returns its outputs.");
  m.def("kernel_cache_dir", &kernels::cache_dir);
}

}  // namespace seastar::python
