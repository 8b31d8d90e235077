// kernels/cpu/seastar_cpu_parallel.h: after seastar_cpu_math.h and the kernel's element types (T,
// I) in every generated CPU kernel. The threads are the runtime's worker pool
// (runtime/cpu/worker_pool.h), bound when the object is loaded (seastar_bind_runtime); unbound
// (a standalone load), items run in order on the caller.
struct seastar_kernel_runtime { void (*parallel_for)(int64_t, void*, void (*)(void*, int64_t)); };
static const seastar_kernel_runtime* seastar_rt = nullptr;
extern "C" void seastar_bind_runtime(const void* rt) { seastar_rt = (const seastar_kernel_runtime*)rt; }
template <class F> static void parallel_for(int64_t n, F f) {
  if (!seastar_rt || n <= 1) { for (int64_t i = 0; i < n; ++i) f(i); return; }
  seastar_rt->parallel_for(n, &f, [](void* c, int64_t i) { (*static_cast<F*>(c))(i); });
}
// rows per item of the per-vertex and per-edge maps
static constexpr int64_t kChunk = 2048;
