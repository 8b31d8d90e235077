/** \file torch's thread count for a CPU launch, after the thread governor (thread_governor.h). */
#pragma once

namespace seastar::runtime {

/// Asks the governor, applies its answer to torch (at::set_num_threads) and returns the count
/// the kernels run on (the user's). The governor sits out while torch's deterministic algorithms
/// are on: the same program should not change its thread count, and so its float rounding, with
/// the load.
int launch_threads();

/// Switches the governor on or off; off gives torch back the user's count if it had lowered it.
void set_thread_governor(bool enabled);

}  // namespace seastar::runtime
