/** \file seastar._C: exception mapping, logging, and the sub-bindings. */
#include <torch/python.h>

#include "core/util/errors.h"
#include "core/util/log.h"
#include "runtime/jit/subprocess.h"
#include "python/src/bindings.h"
#include "python/src/libstdcxx_guard.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  // before anything else: an extension with its own libstdc++ imports fine and crashes later
  seastar::python::check_own_libstdcxx();

  m.doc() = "Seastar's C++ core: graphs, the GIR tracer and passes, and the fused-kernel runtime.";

  // C++ exception types -> Python exceptions. TraceError and CompileError are Seastar's own.
  static py::exception<seastar::TraceError> trace_error(m, "TraceError", PyExc_ValueError);
  static py::exception<seastar::CompileError> compile_error(m, "CompileError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const seastar::TraceError& e) {
      py::set_error(trace_error, e.what());
    } catch (const seastar::CompileError& e) {
      py::set_error(compile_error, e.what());
    } catch (const seastar::Interrupted& e) {
      py::set_error(PyExc_KeyboardInterrupt, e.what());
    } catch (const seastar::ValueError& e) {
      py::set_error(PyExc_ValueError, e.what());
    } catch (const seastar::TypeError& e) {
      py::set_error(PyExc_TypeError, e.what());
    } catch (const seastar::NotImplementedError& e) {
      py::set_error(PyExc_NotImplementedError, e.what());
    } catch (const seastar::Error& e) {
      py::set_error(PyExc_RuntimeError, e.what());
    }
  });

  // Ctrl-C while the host compiler runs: Python's handler only sets a flag, so the JIT polls it
  // and abandons the compiler. Only with the GIL already held (a forward call): a backward
  // runs in torch's engine without it, and waiting for the GIL there could deadlock; that
  // compile finishes and the KeyboardInterrupt follows it.
  seastar::runtime::set_interrupt_check([] {
    if (!Py_IsInitialized() || !PyGILState_Check()) return;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  });

  m.def("set_log_level", &seastar::log::set_level, py::arg("level"),
        "Sets the C++ log level: trace, debug, info, warn, error or off.");
  m.def("get_log_level", &seastar::log::get_level);

  seastar::python::bind_graph(m);
  seastar::python::bind_ir(m);
  seastar::python::bind_runtime(m);
  seastar::python::bind_program(m);
  seastar::python::bind_sampling(m);
  seastar::python::bind_cuda(m);
  seastar::python::bind_libstdcxx(m);
}
