/** \file The host half of the CUDA emulator; see cuda_emulator_runtime.h.
 *
 * The threads of a block are fibers (ucontext) on the launching thread, not host threads: a
 * fiber runs until it waits at a barrier (__syncthreads, __syncwarp, a warp shuffle) or ends,
 * then the next one that can run does, in thread order. A barrier releases its waiters when the
 * last of its threads arrives. So every barrier interleaves the threads for real, as host threads
 * did, without creating hundreds of threads per launch or waking them through the kernel at every
 * barrier. When no fiber can run and some have not ended, the kernel deadlocks (threads of a
 * mask that never arrive), which would hang a GPU too: the emulator says so and aborts.
 */
#include "runtime/cuda/cuda_emulator_runtime.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

namespace seastar::runtime::emulator {
namespace {

// Room for a generated kernel's locals (sized for a GPU thread's registers and local memory);
// mapped without reserving memory, so only the pages a fiber touches are taken.
constexpr size_t kFiberStack = size_t(256) << 10;

unsigned popcount(unsigned m) { return static_cast<unsigned>(__builtin_popcount(m)); }

struct Barrier {
  unsigned arrived = 0;
  std::vector<unsigned> waiting;
};

/// One block: its fibers, their stacks, the barriers and what the threads share.
struct Block {
  unsigned threads = 0;
  void (*run)(const void*, unsigned, unsigned, void*) = nullptr;
  const void* args = nullptr;
  unsigned block_idx = 0;
  ucontext_t scheduler;
  std::vector<ucontext_t> fibers;
  std::vector<char> blocked, ended;
  char* stacks = nullptr;
  unsigned running = 0;
  Barrier block;
  std::map<std::pair<unsigned, unsigned>, Barrier> warp_barriers;  ///< (warp, mask)
  std::vector<uint64_t> slots;                                      ///< one shuffle slot per thread
  std::vector<unsigned char> dynamic_shared;
  const char* last_wait = "";

  /// Thread `t` (running) waits until `count` threads have arrived at `b`.
  void wait(Barrier& b, unsigned count, unsigned t, const char* what) {
    b.waiting.push_back(t);
    if (++b.arrived == count) {
      for (unsigned w : b.waiting) blocked[w] = 0;
      b.waiting.clear();
      b.arrived = 0;
      return;  // the last to arrive goes on at once; the others run when their turn comes
    }
    blocked[t] = 1;
    last_wait = what;
    swapcontext(&fibers[t], &scheduler);
  }
};

thread_local Block* g_block = nullptr;  // the block the fibers of this host thread belong to

void fiber_main() {
  Block& b = *g_block;
  const unsigned t = b.running;
  b.run(b.args, b.block_idx, t, &b);
  b.ended[t] = 1;  // uc_link returns to the scheduler
}

void launch(unsigned grid, unsigned block, size_t shared_bytes,
            void (*run)(const void*, unsigned, unsigned, void*), const void* args) {
  void* stacks = mmap(nullptr, kFiberStack * block, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stacks == MAP_FAILED) {
    std::fprintf(stderr, "seastar CUDA emulator: cannot map the stacks of %u threads\n", block);
    std::abort();
  }
  Block* outer = g_block;
  for (unsigned bi = 0; bi < grid; ++bi) {
    Block b;
    b.threads = block;
    b.run = run;
    b.args = args;
    b.block_idx = bi;
    b.stacks = static_cast<char*>(stacks);
    b.fibers.resize(block);
    b.blocked.assign(block, 0);
    b.ended.assign(block, 0);
    b.slots.assign(block, 0);
    b.dynamic_shared.assign(shared_bytes + 16, 0);
    g_block = &b;
    for (unsigned t = 0; t < block; ++t) {
      getcontext(&b.fibers[t]);
      b.fibers[t].uc_stack.ss_sp = b.stacks + size_t(t) * kFiberStack;
      b.fibers[t].uc_stack.ss_size = kFiberStack;
      b.fibers[t].uc_link = &b.scheduler;
      makecontext(&b.fibers[t], fiber_main, 0);
    }
    for (unsigned left = block; left > 0;) {
      bool ran = false;
      for (unsigned t = 0; t < block; ++t) {
        if (b.ended[t] || b.blocked[t]) continue;
        b.running = t;
        swapcontext(&b.scheduler, &b.fibers[t]);
        ran = true;
        if (b.ended[t]) --left;
      }
      if (!ran) {
        unsigned stuck = 0;
        while (b.ended[stuck]) ++stuck;
        std::fprintf(stderr, "seastar CUDA emulator: %s of thread %u never completes: the generated kernel deadlocks\n",
                     b.last_wait, stuck);
        std::abort();
      }
    }
  }
  g_block = outer;
  munmap(stacks, kFiberStack * block);
}

void sync_block(void* state, unsigned thread) {
  Block& b = *static_cast<Block*>(state);
  b.wait(b.block, b.threads, thread, "__syncthreads");
}

void sync_warp(void* state, unsigned thread, unsigned mask) {
  Block& b = *static_cast<Block*>(state);
  b.wait(b.warp_barriers[{thread / 32, mask}], popcount(mask), thread, "__syncwarp");
}

uint64_t shuffle(void* state, unsigned thread, unsigned mask, uint64_t bits, unsigned src_lane) {
  Block& b = *static_cast<Block*>(state);
  const unsigned warp = thread / 32, lane = thread % 32;
  b.slots[thread] = bits;
  Barrier& bar = b.warp_barriers[{warp, mask}];
  b.wait(bar, popcount(mask), thread, "a warp shuffle");
  if (!(mask >> (src_lane % 32) & 1u)) {
    std::fprintf(stderr, "seastar CUDA emulator: lane %u reads lane %u outside mask %08x\n", lane, src_lane, mask);
    std::abort();
  }
  const uint64_t out = b.slots[warp * 32 + src_lane];
  b.wait(bar, popcount(mask), thread, "a warp shuffle");
  return out;
}

unsigned char* dynamic_shared(void* state) {
  // the vector's storage comes from operator new: aligned for any fundamental type (16 bytes)
  return static_cast<Block*>(state)->dynamic_shared.data();
}

}  // namespace

const Table* table() {
  static const Table t{launch, sync_block, sync_warp, shuffle, dynamic_shared};
  return &t;
}

}  // namespace seastar::runtime::emulator
