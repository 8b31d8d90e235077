/** \file Python binding of the fused-kernel runtime. */
#include "python/src/bindings.h"

namespace py = pybind11;

namespace seastar::python {
void bind_runtime(py::module_& m) { (void)m; }
}  // namespace seastar::python
