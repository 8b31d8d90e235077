/** \file torch's thread count for a CPU launch; see torch_threads.h. */
#include "runtime/cpu/torch_threads.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include "runtime/cpu/thread_governor.h"

namespace seastar::runtime {

int launch_threads() {
  const int current = at::get_num_threads();
  const LaunchThreads want = govern_threads(current, !at::globalContext().deterministicAlgorithms());
  if (want.torch != current) at::set_num_threads(want.torch);
  return want.kernels;
}

void set_thread_governor(bool enabled) {
  const int current = at::get_num_threads();
  const int want = set_thread_governor_enabled(enabled, current);
  if (want != current) at::set_num_threads(want);
}

}  // namespace seastar::runtime
