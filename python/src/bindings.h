/** \file Declarations shared by the binding translation units of seastar._C. */
#pragma once

#include <pybind11/pybind11.h>

namespace seastar::python {
void bind_graph(pybind11::module_& m);
void bind_ir(pybind11::module_& m);
void bind_runtime(pybind11::module_& m);
void bind_program(pybind11::module_& m);  ///< the orchestrator: ProgramCore, Signature
void bind_sampling(pybind11::module_& m);  ///< the neighbour sampler
void bind_cuda(pybind11::module_& m);  ///< defines cuda_built (and NVRTC when built)
}  // namespace seastar::python
