/**
 * \file A caching allocator for torch's large CPU tensors.
 *
 * A training epoch allocates and frees the same large tensors in the same order every epoch
 * (activations, their gradients, the kernels' outputs). glibc serves them from its heap below
 * its mmap threshold (which it raises to the size of every large block freed, up to 32 MB),
 * where the holes freed blocks leave rarely fit the next epoch's tensors, so the process keeps
 * about twice what it uses; above the threshold every tensor is mapped and faulted in anew at
 * each allocation. This allocator keeps each large block (1 MiB and up) mapped once freed and
 * hands it to the next request of about its size: an epoch's tensors reuse the previous epoch's
 * pages, with no page fault and no hole. The mapped total (live + idle) never exceeds the most
 * ever live at once: a request that would pass it takes the front of a larger idle block (the
 * rest stays idle, and the pieces merge again when freed: an epoch that cuts small tensors out
 * of a large one's pages gets the large block back for the next epoch) or unmaps the oldest
 * idle ones, and blocks not lent for a long while go back to the system too.
 *
 * Smaller requests go to the allocator it replaced (torch's own). Installed process-wide by
 * install_caching_cpu_allocator(), only when the user asks (Python: seastar.install_cpu_allocator(),
 * or SEASTAR_CPU_ALLOCATOR=caching at `import seastar`); tensors allocated before keep their own
 * deleters.
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace seastar::runtime {

struct CpuAllocatorStats {
  bool installed = false;
  size_t live_bytes = 0;       ///< capacity of the cached-size blocks in use
  size_t idle_bytes = 0;       ///< mapped blocks that wait for a request
  size_t peak_live_bytes = 0;  ///< the largest live_bytes so far
  int64_t idle_blocks = 0;
  int64_t reused = 0;    ///< requests served by an idle block
  int64_t mapped = 0;    ///< requests that mapped a new block
  int64_t unmapped = 0;  ///< idle blocks given back to the system
};

/// Makes the caching allocator torch's CPU allocator (once; later calls do nothing). Returns
/// whether it is installed.
bool install_caching_cpu_allocator();

/// What `import seastar` does: installs it if SEASTAR_CPU_ALLOCATOR=caching (unset or "torch":
/// torch's stays). Throws ValueError naming the variable for any other value.
bool install_cpu_allocator_from_env();

CpuAllocatorStats caching_cpu_allocator_stats();

/// Gives every idle block back to the system (blocks in use stay).
void release_idle_cpu_blocks();

}  // namespace seastar::runtime

// C++ training programs call these as seastar::kernels::..., the runtime's earlier name.
namespace seastar { namespace kernels = runtime; }
