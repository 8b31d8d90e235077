/** \file Parsing and logging ptxas's report; see ptxas_report.h. */
#include "runtime/cuda/ptxas_report.h"

#include <regex>
#include <sstream>

#include "core/util/log.h"

namespace seastar::runtime {

std::vector<CudaKernelResources> parse_ptxas_report(const std::string& log) {
  // ptxas info    : Compiling entry function 'kernel_0' for 'sm_90'
  // ptxas info    : Function properties for kernel_0
  // ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  // ptxas info    : Used 18 registers, used 0 barriers, 380 bytes cmem[0]
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex props(R"(Function properties for (\S+))");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex regs(R"(Used (\d+) registers)");
  std::vector<CudaKernelResources> out;
  auto current = [&](const std::string& name) -> CudaKernelResources& {
    for (auto& k : out)
      if (k.name == name) return k;
    out.push_back({name});
    return out.back();
  };
  std::string fn;
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry) || std::regex_search(line, m, props)) {
      fn = m[1].str();
      current(fn);
    } else if (!fn.empty() && std::regex_search(line, m, frame)) {
      auto& k = current(fn);
      k.stack_bytes = std::stoi(m[1].str());
      k.spill_store_bytes = std::stoi(m[2].str());
      k.spill_load_bytes = std::stoi(m[3].str());
    } else if (!fn.empty() && std::regex_search(line, m, regs)) {
      current(fn).registers = std::stoi(m[1].str());
    }
  }
  return out;
}

void log_kernel_resources(const std::string& name, const std::string& target,
                          const std::vector<CudaKernelResources>& kernels) {
  for (const CudaKernelResources& k : kernels) {
    std::ostringstream os;
    os << "nvrtc: " << name << " " << k.name << " (" << target << "): " << k.registers << " registers, "
       << k.stack_bytes << " B stack, " << k.spill_store_bytes << " B spill stores, " << k.spill_load_bytes
       << " B spill loads";
    if (k.spill_store_bytes > 0 || k.spill_load_bytes > 0) {
      log::warn(os.str());
    } else {
      log::info(os.str());
    }
  }
}

}  // namespace seastar::runtime
