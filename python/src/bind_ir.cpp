/** \file Python binding of the tracer back end (Builder, Var), GIR modules and lowering. */
#include <pybind11/stl.h>

#include "core/frontend/builder.h"
#include "core/passes/passes.h"
#include "core/passes/pipeline.h"
#include "core/util/errors.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace seastar::python {
namespace {

ir::Group group_of(const std::string& s) {
  if (s == "src") return ir::Group::Src;
  if (s == "dst") return ir::Group::Dst;
  if (s == "none" || s.empty()) return ir::Group::None;
  SEASTAR_THROW(ValueError, "unknown group '", s, "' (expected src, dst or none)");
}

ir::Op op_of(const std::string& s) {
  ir::Op op;
  if (!ir::op_from_name(s, &op)) SEASTAR_THROW(ValueError, "unknown GIR op '", s, "'");
  return op;
}

py::dict value_dict(const ir::Value& v) {
  py::dict d;
  d["id"] = v.id;
  d["op"] = ir::op_info(v.op).name;
  d["dtype"] = ir::to_string(v.dtype);
  d["space"] = ir::to_string(v.space);
  d["shape"] = v.shape;
  d["inputs"] = v.inputs;
  d["group"] = ir::to_string(v.group);
  d["p0"] = v.p0;
  d["p1"] = v.p1;
  d["name"] = v.name;
  d["attr_shape"] = v.attr_shape;
  d["loc"] = v.loc.str();
  return d;
}

}  // namespace

void bind_ir(py::module_& m) {
  py::class_<Var>(m, "Var")
      .def_property_readonly("id", &Var::id)
      .def_property_readonly("elist", [](const Var& v) { return ir::to_string(v.elist()); })
      .def_property_readonly("space", [](const Var& v) { return ir::to_string(v.value().space); })
      .def_property_readonly("dtype", [](const Var& v) { return ir::to_string(v.value().dtype); })
      .def_property_readonly("shape", [](const Var& v) { return v.value().shape; })
      .def_property_readonly("op", [](const Var& v) { return ir::op_info(v.value().op).name; })
      .def_property_readonly("p0", [](const Var& v) { return v.value().p0; });

  py::class_<ir::Module>(m, "Module")
      .def("__str__", [](const ir::Module& mod) { return ir::print(mod); })
      .def("print", [](const ir::Module& mod, const std::string& title) { return ir::print(mod, title); },
           py::arg("title") = "program")
      .def_property_readonly("values", [](const ir::Module& mod) {
        py::list l;
        for (const auto& v : mod.values) l.append(value_dict(v));
        return l;
      })
      .def_readonly("outputs", &ir::Module::outputs)
      .def_readonly("output_names", &ir::Module::output_names)
      .def("__len__", &ir::Module::size);

  // The Python tracer drives this class; every method takes and returns Var handles.
  py::class_<Builder>(m, "Builder")
      .def(py::init([](const std::map<std::string, std::vector<int64_t>>& shapes, bool has_node_types,
                       bool has_edge_types, int64_t num_node_types, int64_t num_edge_types) {
             std::map<std::string, TensorSig> b;
             for (const auto& [k, s] : shapes) b[k] = TensorSig(s);
             GraphSig g{has_node_types, has_edge_types, num_node_types, num_edge_types};
             return std::make_unique<Builder>(std::move(b), g);
           }),
           py::arg("shapes"), py::arg("has_node_types") = false, py::arg("has_edge_types") = false,
           py::arg("num_node_types") = 0, py::arg("num_edge_types") = 0)
      .def("set_loc", [](Builder& b, const std::string& file, int line) { b.set_loc({file, line}); })
      .def("fail", &Builder::fail)
      .def("vertex_input", &Builder::vertex_input)
      .def("edge_input", [](Builder& b, const std::string& n, const std::string& g) { return b.edge_input(n, group_of(g)); })
      .def("param", &Builder::param)
      .def("constant", &Builder::constant)
      .def("edge_id", [](Builder& b, const std::string& g) { return b.edge_id(group_of(g)); })
      .def("edge_type", [](Builder& b, const std::string& g) { return b.edge_type(group_of(g)); })
      .def("node_type", &Builder::node_type)
      .def("degree", [](Builder& b, const std::string& g) { return b.degree(group_of(g)); })
      .def("gather", [](Builder& b, const Var& x, const std::string& endpoint, const std::string& elist) {
        return b.gather(x, group_of(endpoint), group_of(elist));
      })
      .def("unary", [](Builder& b, const std::string& op, const Var& x, double p0, double p1) {
        return b.unary(op_of(op), x, p0, p1);
      }, py::arg("op"), py::arg("x"), py::arg("p0") = 0.0, py::arg("p1") = 0.0)
      .def("binary", [](Builder& b, const std::string& op, const Var& x, const Var& y) {
        return b.binary(op_of(op), x, y);
      })
      .def("elementwise", [](Builder& b, const std::string& op, const std::vector<Var>& inputs,
                             const std::vector<double>& params) { return b.elementwise(op_of(op), inputs, params); })
      .def("reduce_features", [](Builder& b, const std::string& op, const Var& x) {
        return b.reduce_features(op_of(op), x);
      })
      .def("unsqueeze", &Builder::unsqueeze)
      .def("matmul", &Builder::matmul)
      .def("type_index", &Builder::type_index)
      .def("aggregate", [](Builder& b, const std::string& op, const Var& x, int ties) {
        if (ties < 0 || ties > static_cast<int>(Ties::first)) throw py::value_error("no tie rule " + std::to_string(ties));
        return b.aggregate(op_of(op), x, static_cast<Ties>(ties));
      }, py::arg("op"), py::arg("x"), py::arg("ties") = 0)
      .def("softmax", &Builder::softmax)
      .def("finish", &Builder::finish, py::arg("outputs"), py::arg("names") = std::vector<std::string>{});

  py::class_<LoweredProgram>(m, "LoweredProgram")
      .def_readonly("name", &LoweredProgram::name)
      .def_readonly("forward", &LoweredProgram::forward)
      .def_readonly("backward", &LoweredProgram::backward)
      .def_readonly("wrt", &LoweredProgram::wrt)
      .def_readonly("bipartite", &LoweredProgram::bipartite)
      .def_property_readonly("vertex_inputs", [](const LoweredProgram& p) {
        py::dict out;  // name -> "src" / "dst": which vertex set a vertex input's rows index
        for (const auto& [name, side] : p.vertex_inputs) out[py::str(name)] = ir::to_string(side);
        return out;
      });

  m.def("lower", &lower, py::arg("module"), py::arg("wrt"), py::arg("name") = "program", py::arg("bipartite") = false,
        "verify -> [split_sides] -> simplify -> autodiff -> simplify: the forward and backward GIR of a traced "
        "module; bipartite=True lowers it for bipartite graphs.");
  m.def("op_table", [] {
    py::list rows;  // core/ir/ops.def, a dict per op, in Op order
    for (int i = 0; i < ir::num_ops(); ++i) {
      const ir::OpInfo& info = ir::op_info(static_cast<ir::Op>(i));
      py::list params;
      for (const ir::OpParam& p : info.params)
        params.append(py::make_tuple(p.name, p.has_default ? py::cast(p.default_value) : py::none()));
      py::dict d;
      d["name"] = info.name, d["kind"] = ir::to_string(info.kind), d["arity"] = info.arity;
      d["expr"] = info.c_expr, d["params"] = params, d["public"] = info.is_public;
      d["ref"] = info.torch_ref, d["doc"] = info.doc;
      rows.append(d);
    }
    return rows;
  }, "The GIR op table (core/ir/ops.def): name, kind, arity, scalar expression, parameters "
     "(name, default or None), whether seastar exports it, the reference torch expression, docstring.");
  m.def("simplify", &passes::simplify);
  m.def("verify", &passes::verify);
}

}  // namespace seastar::python
