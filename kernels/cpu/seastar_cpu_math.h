// kernels/cpu/seastar_cpu_math.h: the top of every generated CPU kernel (the C++ emitter pastes it
// in; the kernel cache's key covers it). What a kernel needs from outside the language, without
// one standard header: <cmath>, <algorithm>, <numeric> and <vector> took about as long to parse
// as a small kernel takes to compile, and every program pays for every kernel it compiles
// (benchmarks/bench_first_compile.py). The math functions are the compiler's builtins, which are
// what std::exp and the rest compile to; min and max follow std::min and std::max (the first
// argument when neither is less). ops.def's expressions say std::f and are read as sk::f.
typedef __INT64_TYPE__ int64_t;
typedef __INT32_TYPE__ int32_t;
typedef __SIZE_TYPE__ size_t;
#define INFINITY (__builtin_inff())
namespace sk {
#define SK_UNARY(name, f32, f64) \
  static inline float name(float a) { return f32(a); } \
  static inline double name(double a) { return f64(a); }
SK_UNARY(exp, __builtin_expf, __builtin_exp)
SK_UNARY(log, __builtin_logf, __builtin_log)
SK_UNARY(sqrt, __builtin_sqrtf, __builtin_sqrt)
SK_UNARY(abs, __builtin_fabsf, __builtin_fabs)
SK_UNARY(tanh, __builtin_tanhf, __builtin_tanh)
SK_UNARY(log1p, __builtin_log1pf, __builtin_log1p)
SK_UNARY(expm1, __builtin_expm1f, __builtin_expm1)
#undef SK_UNARY
static inline int64_t abs(int64_t a) { return a < 0 ? -a : a; }
static inline float pow(float a, float b) { return __builtin_powf(a, b); }
static inline double pow(double a, double b) { return __builtin_pow(a, b); }
template <class A> static constexpr A max(A a, A b) { return a < b ? b : a; }
template <class A> static constexpr A min(A a, A b) { return b < a ? b : a; }
// n zeroed elements, freed at the end of the scope
template <class A> struct buffer {
  A* p;
  explicit buffer(int64_t n) : p(new A[n > 0 ? n : 1]()) {}
  ~buffer() { delete[] p; }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  A* data() const { return p; }
  A& operator[](int64_t i) const { return p[i]; }
};
// the n blocks in the order they are handed out: those for which heavy(b) holds first, by
// weight(b) from the largest (ties in id order: a stable merge sort), then the rest in id order
template <class H, class W> static void block_order(int64_t n, int64_t* out, H heavy, W weight) {
  int64_t h = 0;
  for (int64_t b = 0; b < n; ++b) if (heavy(b)) out[h++] = b;
  int64_t l = h;
  for (int64_t b = 0; b < n; ++b) if (!heavy(b)) out[l++] = b;
  if (h < 2) return;
  buffer<int64_t> tmp(h);
  for (int64_t w = 1; w < h; w *= 2) {
    for (int64_t lo = 0; lo < h; lo += 2 * w) {
      const int64_t mid = min(lo + w, h), hi = min(lo + 2 * w, h);
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = weight(out[j]) > weight(out[i]) ? out[j++] : out[i++];
      while (i < mid) tmp[k++] = out[i++];
      while (j < hi) tmp[k++] = out[j++];
    }
    for (int64_t k = 0; k < h; ++k) out[k] = tmp[k];
  }
}
}  // namespace sk
