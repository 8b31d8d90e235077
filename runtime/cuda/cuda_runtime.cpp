/** \file Driver-API launch of generated CUDA kernels on torch's current stream; see cuda_runtime.h. */
#include "runtime/cuda/cuda_runtime.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "codegen/launch_layout.h"
#include "core/util/errors.h"
#include "core/util/log.h"
#include "runtime/jit/compiler.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/nvrtc_compiler.h"

namespace seastar::runtime {
namespace {

/// A program loaded into one device's primary context.
struct LoadedModule {
  CUmodule module = nullptr;
  std::vector<CUfunction> functions;  ///< one per launch
  std::vector<int64_t> max_blocks;    ///< resident blocks of each kernel on the whole device
};

struct DeviceState {
  CUcontext context = nullptr;
  int arch = 0;  ///< compute capability, e.g. 90
  int sms = 0;
};

std::mutex g_mutex;
std::map<int, DeviceState> g_devices;
std::map<std::pair<std::string, int>, std::shared_ptr<LoadedModule>> g_modules;

DeviceState& device_state(CudaDriver& d, int device) {
  auto it = g_devices.find(device);
  if (it != g_devices.end()) return it->second;
  CUdevice dev = 0;
  cuda_check(d.DeviceGet(&dev, device), "cuDeviceGet");
  DeviceState s;
  // torch works in each device's primary context; Seastar's modules live there too
  cuda_check(d.DevicePrimaryCtxRetain(&s.context, dev), "cuDevicePrimaryCtxRetain");
  int major = 0, minor = 0;
  cuda_check(d.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  cuda_check(d.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  cuda_check(d.DeviceGetAttribute(&s.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute");
  s.arch = major * 10 + minor;
  return g_devices.emplace(device, s).first->second;
}

std::shared_ptr<LoadedModule> load(CudaDriver& d, const codegen::CudaProgram& program, const std::string& name,
                                   int device, const DeviceState& ds) {
  const auto key = std::make_pair(content_hash(program.source), device);
  auto it = g_modules.find(key);
  if (it != g_modules.end()) return it->second;
  CudaBinary bin = compile_cuda(program.source, name, ds.arch);
  auto m = std::make_shared<LoadedModule>();
  std::vector<char> error_log(16384, '\0');
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {error_log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(error_log.size()))};
  CUresult r = d.ModuleLoadDataEx(&m->module, bin.image.data(), 2, opts, vals);
  if (r != CUDA_SUCCESS) {
    const char* msg = nullptr;
    d.GetErrorString(r, &msg);
    SEASTAR_THROW(CompileError, "loading the CUDA kernels of '", name, "' (", bin.path, ", ", bin.target,
                  ") on device ", device, " failed: ", msg ? msg : "unknown error", "\n", error_log.data());
  }
  for (const codegen::CudaLaunch& l : program.launches) {
    CUfunction f = nullptr;
    cuda_check(d.ModuleGetFunction(&f, m->module, l.name.c_str()), "cuModuleGetFunction");
    if (l.shared_bytes > 48 * 1024)
      cuda_check(d.FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(l.shared_bytes)),
                 "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    int per_sm = 0;
    cuda_check(d.OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, l.mapping.block_threads,
                                                           static_cast<size_t>(l.shared_bytes)),
               "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (per_sm < 1)
      SEASTAR_THROW(Error, "kernel ", l.name, " of '", name, "' cannot run on device ", device, " with ",
                    l.mapping.block_threads, " threads and ", l.shared_bytes, " bytes of shared memory per block");
    int regs = -1;
    d.FuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
    log::debug("cuda: " + name + " " + l.name + " on device " + std::to_string(device) + ": " + std::to_string(regs) +
               " registers, " + std::to_string(per_sm) + " blocks of " + std::to_string(l.mapping.block_threads) +
               " threads per SM");
    m->functions.push_back(f);
    m->max_blocks.push_back(static_cast<int64_t>(per_sm) * ds.sms);
  }
  g_modules.emplace(key, m);
  return m;
}

}  // namespace

void launch_cuda(const codegen::CudaProgram& program, const std::string& name, int device, int64_t N, int64_t E,
                 int64_t NS, void* const* graph, void* const* buffers) {
  CudaDriver& d = cuda_driver();
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  std::shared_ptr<LoadedModule> mod;
  CUcontext context = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    DeviceState& ds = device_state(d, device);
    context = ds.context;
    CUcontext current = nullptr;  // this thread (autograd runs backward on its own) may have none
    d.CtxGetCurrent(&current);
    if (current != context) cuda_check(d.CtxSetCurrent(context), "cuCtxSetCurrent");
    mod = load(d, program, name, device, ds);
  }

  const at::Device dev(at::kCUDA, static_cast<c10::DeviceIndex>(device));
  // the work counters and the partial sums of parameter gradients start at zero for every
  // call; allocated, zeroed and used on the current stream, so the caching allocator reuses
  // their memory only after these launches
  const auto stream_obj = at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
  torch::Tensor counters = torch::zeros({std::max(program.num_counters, 1)}, torch::dtype(torch::kLong).device(dev));
  torch::Tensor scratch;
  if (program.scratch_elems > 0)
    scratch = torch::zeros({program.scratch_elems},
                           torch::dtype(program.float_bytes == 8 ? torch::kDouble : torch::kFloat).device(dev));
  CUstream stream = reinterpret_cast<CUstream>(stream_obj.stream());

  // the kernels' one argument, struct Args (launch_layout.h), as its words
  std::vector<uint64_t> args = launch::cuda_args_words(N, E, NS, graph, buffers, program.num_buffers, counters.data_ptr(),
                                                       scratch.defined() ? scratch.data_ptr() : nullptr);
  void* params[] = {args.data()};

  for (size_t k = 0; k < program.launches.size(); ++k) {
    const codegen::CudaLaunch& l = program.launches[k];
    const int64_t items = l.num_items(N, E, NS);
    if (items <= 0) continue;  // e.g. a traversal of a graph without vertices
    const int64_t grid = grid_size(l.mapping, items, mod->max_blocks[k]);
    cuda_check(d.LaunchKernel(mod->functions[k], static_cast<unsigned>(grid), 1, 1,
                              static_cast<unsigned>(l.mapping.block_threads), 1, 1,
                              static_cast<unsigned>(l.shared_bytes), stream, params, nullptr),
               "cuLaunchKernel");
  }
}

}  // namespace seastar::runtime
