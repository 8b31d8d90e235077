/** \file Python binding of the fused-kernel runtime (FusedProgram and its autograd function). */
#include <pybind11/stl.h>
#include <torch/python.h>

#include "runtime/engine/autograd.h"
#include "runtime/jit/compiler.h"
#include "runtime/cpu/cpu_allocator.h"
#include "runtime/cpu/thread_governor.h"
#include "runtime/cpu/torch_threads.h"
#include "runtime/cpu/worker_pool.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace seastar::python {
namespace {

py::list cuda_launches(FusedProgram& p, const std::string& direction, py::object dtype, const std::string& index) {
  auto st = torch::python::detail::py_object_to_dtype(dtype);
  py::list out;
  for (const codegen::CudaLaunch& l : p.cuda_program(direction, st, index == "int64" ? torch::kLong : torch::kInt).launches) {
    static const char* items[] = {"vertices", "edges", "chunks", "fixed"};
    py::dict d;
    d["name"] = l.name;
    d["what"] = l.what;
    d["items"] = items[static_cast<int>(l.items)];
    d["count"] = l.count;
    d["group_threads"] = l.mapping.group_threads;
    d["block_threads"] = l.mapping.block_threads;
    d["groups_per_block"] = l.mapping.groups_per_block;
    d["elems_per_thread"] = l.mapping.elems_per_thread;
    d["features"] = l.mapping.features;
    d["shared_bytes"] = l.shared_bytes;
    d["counter"] = l.counter;
    d["hub_degree"] = l.hub_degree;
    d["hub_workers"] = l.hub_workers;
    py::list traffic;  // the static traffic model (codegen/traffic.h)
    for (const codegen::TrafficTerm& t : l.traffic) {
      py::dict r;
      r["what"] = t.what;
      r["buffer"] = t.buffer;
      r["per"] = codegen::to_string(t.per);
      r["write"] = t.write;
      r["gathered"] = t.gathered;
      r["bytes"] = t.bytes;
      r["pass"] = t.pass;
      traffic.append(r);
    }
    d["traffic"] = traffic;
    d["src_side"] = l.src_side;
    out.append(d);
  }
  return out;
}

/// The fields of a launch dict (cuda_launches) that size its work.
codegen::CudaLaunch launch_of(const py::dict& launch) {
  codegen::CudaLaunch l;
  const std::string items = launch["items"].cast<std::string>();
  l.items = items == "vertices" ? codegen::CudaLaunch::Items::Vertices
            : items == "edges"  ? codegen::CudaLaunch::Items::Edges
            : items == "chunks" ? codegen::CudaLaunch::Items::Chunks
                                : codegen::CudaLaunch::Items::Fixed;
  l.count = launch["count"].cast<int64_t>();
  l.mapping.group_threads = launch["group_threads"].cast<int>();
  l.mapping.block_threads = launch["block_threads"].cast<int>();
  l.mapping.groups_per_block = launch["groups_per_block"].cast<int>();
  return l;
}

int64_t cuda_grid(const py::dict& launch, int64_t num_nodes, int64_t num_edges, int64_t max_blocks) {
  const codegen::CudaLaunch l = launch_of(launch);
  return launch::grid_size(l.mapping, std::max<int64_t>(l.num_items(num_nodes, num_edges, num_nodes), 1), max_blocks);
}

}  // namespace

void bind_runtime(py::module_& m) {
  py::class_<FusedProgram, std::shared_ptr<FusedProgram>>(m, "FusedProgram")
      .def(py::init<LoweredProgram>(), py::arg("lowered"))
      .def_property_readonly("unsupported", &FusedProgram::unsupported)
      .def("source", [](FusedProgram& p, const std::string& direction, py::object dtype, const std::string& index) {
        auto st = torch::python::detail::py_object_to_dtype(dtype);
        return p.source(direction, st, index == "int64" ? torch::kLong : torch::kInt);
      }, py::arg("direction"), py::arg("dtype"), py::arg("index_dtype") = "int32")
      // the CUDA backend's source and launch plan, available without a GPU (see bind_cuda.cpp)
      .def("cuda_source", [](FusedProgram& p, const std::string& direction, py::object dtype, const std::string& index) {
        auto st = torch::python::detail::py_object_to_dtype(dtype);
        return p.cuda_program(direction, st, index == "int64" ? torch::kLong : torch::kInt).source;
      }, py::arg("direction"), py::arg("dtype"), py::arg("index_dtype") = "int32")
      // one direction without autograd: what the torch.library ops seastar::vertex_program and
      // seastar::vertex_program_backward run (torch.compile and export record those ops instead of
      // the autograd function of fused_apply)
      .def("run_forward", [](FusedProgram& p, const Graph& g, const std::map<std::string, torch::Tensor>& inputs) {
        return p.forward(g, inputs);
      }, py::arg("graph"), py::arg("inputs"), "The forward outputs; no autograd history.")
      .def("run_backward", [](FusedProgram& p, const Graph& g, const std::map<std::string, torch::Tensor>& inputs,
                              const std::vector<torch::Tensor>& grad_outputs) {
        return p.backward(g, inputs, grad_outputs);
      }, py::arg("graph"), py::arg("inputs"), py::arg("grad_outputs"), "The gradients of lowered.wrt, in that order.")
      .def("cuda_launches", &cuda_launches, py::arg("direction"), py::arg("dtype"), py::arg("index_dtype") = "int32")
      .def_static("cuda_grid", &cuda_grid, py::arg("launch"), py::arg("num_nodes"), py::arg("num_edges"),
                  py::arg("max_blocks") = 0,
                  "Blocks a launch (a dict of cuda_launches) takes for a graph of that size, at most max_blocks "
                  "(the device's resident blocks; 0: no cap), as the runtime sizes its grid.")
      .def_static("cuda_hub_piece_edges", [](const py::dict& launch, int64_t num_nodes, int64_t num_edges) {
        return launch_of(launch).hub_piece_edges(num_nodes, num_edges, num_nodes);
      }, py::arg("launch"), py::arg("num_nodes"), py::arg("num_edges"),
                  "Edges of one piece of a hub, for a launch that cuts hubs into pieces (items 'chunks', "
                  "hub_degree > 0), on a square graph of that size, as the kernel computes it.");
  m.def("fused_apply", &apply_fused, py::arg("program"), py::arg("graph"), py::arg("names"), py::arg("tensors"),
        "Runs a FusedProgram with autograd; returns its outputs.");
  m.def("kernel_cache_dir", &runtime::cache_dir);
  m.def("jit_compile_cpu", [](const std::string& source, const std::string& name) {
    runtime::CompiledKernel k = runtime::compile_cpu(source, name);
    py::dict r;
    r["path"] = k.path;
    r["cache_hit"] = k.cache_hit;
    return r;
  }, py::arg("source"), py::arg("name"),
     "Compiles (or loads from the kernel cache) C++ source defining seastar_entry, as the fused backend does; "
     "returns the shared object's path and whether it came from a cache. For tests and tools.");
  m.def("jit_stats", [] {
    const runtime::JitStats s = runtime::jit_stats();
    py::dict d;
    d["compiled"] = s.compiled;
    d["compile_seconds"] = s.compile_seconds;
    d["loaded_from_disk"] = s.loaded_from_disk;
    d["reused"] = s.reused;
    return d;
  }, "What the host JIT did in this process: compiled (compiler runs), compile_seconds (their wall time), "
     "loaded_from_disk (kernel cache entries loaded), reused (calls answered by an already loaded kernel).");
  m.def("install_caching_cpu_allocator", &runtime::install_caching_cpu_allocator,
        "Makes seastar's caching allocator torch's CPU allocator (runtime/cpu/cpu_allocator.h); returns "
        "whether it is in force.");
  m.def("install_cpu_allocator_from_env", &runtime::install_cpu_allocator_from_env,
        "install_caching_cpu_allocator if SEASTAR_CPU_ALLOCATOR=caching (ValueError for a value other than caching or torch).");
  m.def("cpu_allocator_stats", [] {
    const runtime::CpuAllocatorStats s = runtime::caching_cpu_allocator_stats();
    py::dict d;
    d["installed"] = s.installed;
    d["live_bytes"] = s.live_bytes;
    d["idle_bytes"] = s.idle_bytes;
    d["peak_live_bytes"] = s.peak_live_bytes;
    d["idle_blocks"] = s.idle_blocks;
    d["reused"] = s.reused;
    d["mapped"] = s.mapped;
    d["unmapped"] = s.unmapped;
    return d;
  });
  m.def("kernel_pool_stats", [] {
    const runtime::WorkerPoolStats s = runtime::worker_pool_stats();
    py::dict d;
    d["pooled"] = s.pooled;
    d["lost"] = s.lost;
    d["benched"] = s.benched;
    return d;
  }, "The CPU kernels' worker pool counters (runtime/cpu/worker_pool.h).");
  m.def("thread_governor_stats", [] {
    const runtime::ThreadGovernorStats s = runtime::thread_governor_stats();
    py::dict d;
    d["enabled"] = s.enabled;
    d["available"] = s.available;
    d["requested"] = s.requested;
    d["threads"] = s.threads;
    d["other_cores"] = s.other_cores;
    d["samples"] = s.samples;
    d["lowered"] = s.lowered;
    d["restored"] = s.restored;
    return d;
  }, "The thread governor's state and counters (runtime/cpu/thread_governor.h); ValueError for a bad "
     "SEASTAR_THREAD_GOVERNOR.");
  m.def("set_thread_governor", &runtime::set_thread_governor, py::arg("enabled"),
        "Switches the thread governor on or off (off: torch gets the user's thread count back).");
  m.def("release_idle_cpu_blocks", &runtime::release_idle_cpu_blocks, py::call_guard<py::gil_scoped_release>(),
        "Gives the caching CPU allocator's idle blocks back to the system.");
}

}  // namespace seastar::python
