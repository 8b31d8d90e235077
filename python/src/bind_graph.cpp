/** \file Python binding of seastar::Graph. */
#include <pybind11/stl.h>
#include <torch/python.h>

#include "core/graph/graph.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace seastar::python {

void bind_graph(py::module_& m) {
  py::class_<Graph>(m, "Graph")
      .def_static("from_edge_index", &Graph::from_edge_index, py::arg("edge_index"), py::arg("num_nodes") = py::none(),
                  py::arg("node_type") = py::none(), py::arg("edge_type") = py::none(),
                  py::arg("num_node_types") = -1, py::arg("num_edge_types") = -1)
      .def_static("from_coo", &Graph::from_coo, py::arg("src"), py::arg("dst"), py::arg("num_nodes") = py::none(),
                  py::arg("node_type") = py::none(), py::arg("edge_type") = py::none(),
                  py::arg("num_node_types") = -1, py::arg("num_edge_types") = -1)
      .def_static("bipartite", &Graph::bipartite, py::arg("edge_index"), py::arg("num_src"), py::arg("num_dst"),
                  py::arg("edge_type") = py::none(), py::arg("num_edge_types") = -1,
                  py::arg("node_type") = py::none(), py::arg("num_node_types") = -1)
      .def_property_readonly("num_nodes", &Graph::num_nodes)
      .def_property_readonly("num_src", &Graph::num_src)
      .def_property_readonly("num_dst", &Graph::num_dst)
      .def_property_readonly("is_bipartite", &Graph::is_bipartite)
      .def_property_readonly("num_edges", &Graph::num_edges)
      .def_property_readonly("num_node_types", [](const Graph& g) { return g.data().types().num_node_types; })
      .def_property_readonly("num_edge_types", [](const Graph& g) { return g.data().types().num_edge_types; })
      .def_property_readonly("has_node_types", [](const Graph& g) { return g.data().has_node_types(); })
      .def_property_readonly("has_edge_types", [](const Graph& g) { return g.data().has_edge_types(); })
      .def_property_readonly("uid", [](const Graph& g) { return g.data().uid(); })
      .def("edge_index", &Graph::edge_index)
      .def("in_degrees", &Graph::in_degrees)
      .def("out_degrees", &Graph::out_degrees)
      .def("add_self_loops", &Graph::add_self_loops, py::arg("loop_type") = 0)
      .def("remove_self_loops", &Graph::remove_self_loops)
      .def("replace_self_loops", &Graph::replace_self_loops, py::arg("num_loops"),
           "The edges that are not self loops, in order, then loops at 0 .. num_loops-1, without types.")
      .def("self_loop_ids", &Graph::self_loop_ids, py::arg("num_loops"),
           "(kept, loops, loop_vertex): the ids of the edges that are not self loops, of the self loops at "
           "vertices below num_loops, and those loops' vertices.")
      .def(
          "in_edge_order",
          [](const Graph& g) {
            py::gil_scoped_release nogil;
            return g.in_edge_order();
          },
          "The graph with edge j = slot j of this graph's in-edge index (whose in_eid holds the original ids).")
      .def_property_readonly("sources_global", [](const Graph& g) { return g.data().sources_global(); })
      .def(
          "with_global_sources",
          [](const Graph& g, const torch::Tensor& source_ids, int64_t num_src) {
            std::vector<int64_t> ids = ids_from_tensor(source_ids, "source_ids", "vertex ids");
            py::gil_scoped_release nogil;
            return Graph(g.data().with_global_sources(ids, num_src));
          },
          py::arg("source_ids"), py::arg("num_src"),
          "This bipartite graph with source j renamed source_ids[j] of num_src sources (see "
          "GraphData::with_global_sources).")
      .def("index_dtype", [](const Graph& g) { return g.data().fits_int32() ? "int32" : "int64"; })
      .def(
          "tensors",
          [](const Graph& g, const std::string& device, bool coo, bool out_edges, bool non_blocking) {
            const torch::Device dev(device);
            const DeviceGraph* built = nullptr;
            {  // sorting the out-edges and staging copies take a while: the loader thread calls this
              py::gil_scoped_release nogil;
              built = &g.on(dev, coo, out_edges, non_blocking);
            }
            const DeviceGraph& d = *built;
            py::dict out;
            out["in_ptr"] = d.in.ptr, out["in_nbr"] = d.in.nbr, out["in_eid"] = d.in.eid;
            out["in_order"] = d.in.degree_order;
            if (d.out.ptr.defined()) {
              out["out_ptr"] = d.out.ptr, out["out_nbr"] = d.out.nbr, out["out_eid"] = d.out.eid;
              out["out_order"] = d.out.degree_order;
            }
            if (coo) out["src"] = d.src, out["dst"] = d.dst;
            if (d.node_type.defined()) out["node_type"] = d.node_type;
            if (d.edge_type.defined()) out["edge_type"] = d.edge_type;
            return out;
          },
          py::arg("device") = "cpu", py::arg("coo") = true, py::arg("out") = true, py::arg("non_blocking") = false,
          "Index tensors on `device` (built once per graph and device, then cached); the COO arrays "
          "src and dst only with `coo`, the out-edge index (out_*) only with `out` (or once built); "
          "`non_blocking`: arrays built now are copied to a CUDA device asynchronously on the current "
          "stream (Graph::on).");
}

}  // namespace seastar::python
