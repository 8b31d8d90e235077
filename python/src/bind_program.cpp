/** \file Python binding of the orchestrator (ProgramCore, Signature) that `@seastar.vertex_program` drives. */
#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <torch/python.h>

#include "core/util/errors.h"
#include "runtime/engine/fused_program.h"
#include "runtime/engine/program_core.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace seastar::python {
namespace {

/// The infos of a dict of bound tensors: real tensors, or torch.compile's descriptions of them
/// (seastar.torch_ops.TensorMeta: shape, dtype, device, requires_grad) at trace time.
TensorInfos infos_of(const py::dict& tensors) {
  TensorInfos infos;
  for (const auto& [key, value] : tensors) {
    const std::string name = key.cast<std::string>();
    if (THPVariable_Check(value.ptr())) {
      infos.emplace(name, TensorInfo::of(THPVariable_Unpack(value.ptr())));
      continue;
    }
    TensorInfo i;
    i.shape = value.attr("shape").cast<std::vector<int64_t>>();
    i.dtype = torch::python::detail::py_object_to_dtype(value.attr("dtype"));
    i.device = torch::python::detail::py_object_to_device(value.attr("device"));
    i.requires_grad = value.attr("requires_grad").cast<bool>();
    infos.emplace(name, std::move(i));
  }
  return infos;
}

/// A prepared call's misfit as (kind, message), or (None, None): Python raises it naming the calling line.
py::tuple misfit_of(const PreparedCall& call) {
  if (!call.misfit) return py::make_tuple(py::none(), py::none());
  try {
    std::rethrow_exception(call.misfit);
  } catch (const TypeError& e) {
    return py::make_tuple(py::str("TypeError"), py::str(e.what()));
  } catch (const ValueError& e) {
    return py::make_tuple(py::str("ValueError"), py::str(e.what()));
  }
}

}  // namespace

void bind_program(py::module_& m) {
  py::class_<Signature, std::shared_ptr<Signature>>(m, "Signature",
                                                    "One traced and lowered signature of a vertex program.")
      .def_property_readonly("lowered", &Signature::lowered, py::return_value_policy::reference_internal)
      .def_property_readonly("names", &Signature::names,
                             "The tensors the kernels read, sorted (x@dst: x's first num_dst rows).")
      .def_property_readonly("kernels", &Signature::kernels, "The FusedProgram (planned on first use).")
      .def("check", [](const Signature& s, const std::string& prog, const Graph& g, const py::dict& tensors) {
        s.check(prog, g, infos_of(tensors));
      }, py::arg("program"), py::arg("graph"), py::arg("tensors"),
           "Raises ValueError / TypeError for tensors that do not fit the graph or each other.")
      .def("unsupported", [](const Signature& s, const py::dict& tensors) { return s.unsupported(infos_of(tensors)); },
           py::arg("tensors"), "Why the fused kernels cannot run these tensors; empty when they can.")
      .def("bind", &Signature::bind, py::arg("graph"), py::arg("tensors"), "The tensors in names order.")
      .def("run", &Signature::run, py::arg("graph"), py::arg("tensors"),
           "Runs the fused kernels with autograd; returns the outputs.");

  py::class_<ProgramCore, std::shared_ptr<ProgramCore>>(m, "ProgramCore",
                                                        "The trace cache and call checks of one vertex program.")
      .def(py::init<std::string>(), py::arg("name"))
      .def_property_readonly("name", &ProgramCore::name)
      .def_property_readonly("num_traces", &ProgramCore::num_traces)
      .def("signature", [](ProgramCore& p, const Graph& g, const py::dict& tensors,
                           const std::function<ir::Module()>& trace) {
        const TensorInfos infos = infos_of(tensors);
        // without the GIL while waiting for the cache's lock: the thread tracing under that lock
        // needs the GIL to run its Python tracer (the callback takes it back)
        py::gil_scoped_release unlocked;
        return std::const_pointer_cast<Signature>(p.signature(g, infos, trace));
      }, py::arg("graph"), py::arg("tensors"), py::arg("trace"),
           "The signature of these tensors; on a miss, trace() gives the module to lower.")
      .def("prepare", [](ProgramCore& p, const Graph& g, const py::dict& tensors,
                         const std::function<ir::Module()>& trace) {
        const TensorInfos infos = infos_of(tensors);
        PreparedCall call;
        {
          py::gil_scoped_release unlocked;  // as in signature(): the tracer takes the GIL back
          call = p.prepare(g, infos, trace);
        }
        const py::tuple misfit = misfit_of(call);
        return py::make_tuple(std::const_pointer_cast<Signature>(call.signature), call.unsupported, misfit[0],
                              misfit[1]);
      }, py::arg("graph"), py::arg("tensors"), py::arg("trace"),
           "One call's preparation: (signature, why the fused kernels cannot run these tensors or '', the kind and "
           "message of the tensors' misfit or None, None). Trace and lowering errors are raised.")
      .def("call", [](ProgramCore& p, const Graph& g, const Tensors& tensors, const std::function<ir::Module()>& trace,
                      bool use_fused) {
        const TensorInfos infos = seastar::infos_of(tensors);
        PreparedCall prepared;
        {
          py::gil_scoped_release unlocked;  // as in signature(): the tracer takes the GIL back
          prepared = p.prepare(g, infos, trace);
        }
        // the kernels run with the GIL: a forward's JIT compile polls Ctrl-C through it
        const CallResult call = ProgramCore::run_prepared(std::move(prepared), g, tensors, use_fused);
        const py::tuple misfit = misfit_of(call.prepared);
        py::object outputs = call.ran ? py::cast(call.outputs) : py::none();
        return py::make_tuple(outputs, std::const_pointer_cast<Signature>(call.prepared.signature),
                              call.prepared.unsupported, misfit[0], misfit[1]);
      }, py::arg("graph"), py::arg("tensors"), py::arg("trace"), py::arg("use_fused"),
           "A warm call's one entry: (the fused kernels' outputs, or None when they did not run; the signature; "
           "why they cannot run these tensors or ''; the kind and message of the tensors' misfit or None, None).");
}

}  // namespace seastar::python
