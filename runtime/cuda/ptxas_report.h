/** \file ptxas's verbose report (--ptxas-options=-v, part of NVRTC's log): registers, stack
 * and spills of every kernel, parsed and logged. No CUDA or torch headers. */
#pragma once

#include <string>
#include <vector>

namespace seastar::runtime {

/// What ptxas reported for one kernel (-1: not reported, e.g. for PTX).
struct CudaKernelResources {
  std::string name;
  int registers = -1;
  int stack_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
};

/// Parses ptxas's verbose report out of an NVRTC log.
std::vector<CudaKernelResources> parse_ptxas_report(const std::string& log);

/// Logs each kernel's resources for program `name` built for `target`: a warning when it spills.
void log_kernel_resources(const std::string& name, const std::string& target,
                          const std::vector<CudaKernelResources>& kernels);

}  // namespace seastar::runtime
