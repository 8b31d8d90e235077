/** \file The C++/OpenMP emitter: the hooks of EmitterBase for host code; see cpu_emitter.h. */
#include "codegen/cpu_emitter.h"

#include <algorithm>
#include <sstream>

#include "codegen/emitter_base.h"
#include "core/util/errors.h"

namespace seastar::codegen {
using namespace ir;

namespace {

/// A traversal with parameter-gradient partial sums has at most kEdgesPerPartial edges' worth of
/// blocks per partial element (NB * partial elements <= kEdgesPerPartial * edges), and at least
/// kMinPartialBlocks blocks (to balance a few threads) where the centres allow.
constexpr int64_t kEdgesPerPartial = 8;
constexpr int64_t kMinPartialBlocks = 32;

class CpuEmitter : public EmitterBase {
 public:
  using EmitterBase::EmitterBase;

  // A neighbour row is a random read the hardware prefetcher cannot predict, and a long edge
  // body keeps out-of-order execution from reaching the next edges' loads: request the rows of
  // an edge some places on in the edge array early. (Past the end of the centre's list that is
  // the next centre's, as blocks run in id order.) An edge's own row, read through its original
  // id, is as random unless the edges came sorted by destination, so it is requested too. The
  // distance keeps about kPrefetchBytes of rows in flight, between 8 and 128 edges: a neighbour
  // sum on the 1M-vertex graph of benchmarks/run.py ran fastest from about 16 KiB ahead (128
  // one-line rows at F=16, 64 rows at F=64), as fast up to 32 KiB, and markedly slower at the
  // 2 KiB used before (docs/benchmarks.md: the figures).
  static constexpr int kPrefetchBytes = 16384, kPrefetchMin = 8, kPrefetchMax = 128;
  std::string prefetch(const RandomRows& rows) const override {
    if (rows.empty()) return "";
    int64_t numel = 0;
    for (const auto& r : rows.nbr) numel += r.second;
    for (const auto& r : rows.edge) numel += r.second;
    numel = std::max<int64_t>(numel, 1);
    std::ostringstream os;
    os << "        {\n"
       << "          constexpr int64_t ahead = sk::min<int64_t>(" << kPrefetchMax << ", sk::max<int64_t>("
       << kPrefetchMin << ", " << kPrefetchBytes << " / (" << numel << " * (int64_t)sizeof(T))));\n"
       << "          if (j + ahead < E) {\n";
    if (!rows.nbr.empty()) os << "            const int64_t pn = nbr[j + ahead];\n";
    if (!rows.edge.empty()) os << "            const int64_t pe = eid[j + ahead];\n";
    auto lines = [&](const std::vector<std::pair<int, int64_t>>& rs, const char* row) {
      for (const auto& [b, n] : rs)
        os << "            for (int64_t q = 0; q < " << n << " * (int64_t)sizeof(T); q += 64) "
           << "__builtin_prefetch((const char*)" << buffer_ptr(b, row) << " + q);\n";
    };
    lines(rows.nbr, "pn");
    lines(rows.edge, "pe");
    os << "          }\n        }\n";
    return os.str();
  }

  // What a kernel needs from outside the language, without one standard header: the headers
  // <cmath>, <algorithm>, <numeric> and <vector> took about as long to parse as a small
  // kernel takes to compile, and every program pays for every kernel it compiles
  // (benchmarks/bench_first_compile.py). The math functions are the compiler's builtins, which
  // are what std::exp and the rest compile to; min and max follow std::min and std::max (the
  // first argument when neither is less). ops.def's expressions say std::f and are read as sk::f.
  static constexpr const char* kTypesPrelude =
      "typedef __INT64_TYPE__ int64_t;\ntypedef __INT32_TYPE__ int32_t;\ntypedef __SIZE_TYPE__ size_t;\n"
      "#define INFINITY (__builtin_inff())\n"
      "namespace sk {\n"
      "#define SK_UNARY(name, f32, f64) \\\n"
      "  static inline float name(float a) { return f32(a); } \\\n"
      "  static inline double name(double a) { return f64(a); }\n"
      "SK_UNARY(exp, __builtin_expf, __builtin_exp)\nSK_UNARY(log, __builtin_logf, __builtin_log)\n"
      "SK_UNARY(sqrt, __builtin_sqrtf, __builtin_sqrt)\nSK_UNARY(abs, __builtin_fabsf, __builtin_fabs)\n"
      "SK_UNARY(tanh, __builtin_tanhf, __builtin_tanh)\nSK_UNARY(log1p, __builtin_log1pf, __builtin_log1p)\n"
      "SK_UNARY(expm1, __builtin_expm1f, __builtin_expm1)\n#undef SK_UNARY\n"
      "static inline int64_t abs(int64_t a) { return a < 0 ? -a : a; }\n"
      "static inline float pow(float a, float b) { return __builtin_powf(a, b); }\n"
      "static inline double pow(double a, double b) { return __builtin_pow(a, b); }\n"
      "template <class A> static constexpr A max(A a, A b) { return a < b ? b : a; }\n"
      "template <class A> static constexpr A min(A a, A b) { return b < a ? b : a; }\n"
      "// n zeroed elements, freed at the end of the scope\n"
      "template <class A> struct buffer {\n"
      "  A* p;\n"
      "  explicit buffer(int64_t n) : p(new A[n > 0 ? n : 1]()) {}\n"
      "  ~buffer() { delete[] p; }\n"
      "  buffer(const buffer&) = delete;\n"
      "  buffer& operator=(const buffer&) = delete;\n"
      "  A* data() const { return p; }\n"
      "  A& operator[](int64_t i) const { return p[i]; }\n"
      "};\n"
      "// the n blocks in the order they are handed out: those for which heavy(b) holds first, by\n"
      "// weight(b) from the largest (ties in id order: a stable merge sort), then the rest in id order\n"
      "template <class H, class W> static void block_order(int64_t n, int64_t* out, H heavy, W weight) {\n"
      "  int64_t h = 0;\n"
      "  for (int64_t b = 0; b < n; ++b) if (heavy(b)) out[h++] = b;\n"
      "  int64_t l = h;\n"
      "  for (int64_t b = 0; b < n; ++b) if (!heavy(b)) out[l++] = b;\n"
      "  if (h < 2) return;\n"
      "  buffer<int64_t> tmp(h);\n"
      "  for (int64_t w = 1; w < h; w *= 2) {\n"
      "    for (int64_t lo = 0; lo < h; lo += 2 * w) {\n"
      "      const int64_t mid = min(lo + w, h), hi = min(lo + 2 * w, h);\n"
      "      int64_t i = lo, j = mid, k = lo;\n"
      "      while (i < mid && j < hi) tmp[k++] = weight(out[j]) > weight(out[i]) ? out[j++] : out[i++];\n"
      "      while (i < mid) tmp[k++] = out[i++];\n"
      "      while (j < hi) tmp[k++] = out[j++];\n"
      "    }\n"
      "    for (int64_t k = 0; k < h; ++k) out[k] = tmp[k];\n"
      "  }\n"
      "}\n"
      "}  // namespace sk\n\n";

  std::string fn(const char* name) const override { return std::string("sk::") + name; }
  std::string scalar_expr(const std::string& c_expr) const override { return replace_all(c_expr, "std::", "sk::"); }

  // The threads: the runtime's worker pool (runtime/cpu/worker_pool.h), bound when the object is
  // loaded; unbound (a standalone load), items run in order on the caller.
  static constexpr const char* kParallelPrelude =
      "struct seastar_kernel_runtime { void (*parallel_for)(int64_t, void*, void (*)(void*, int64_t)); };\n"
      "static const seastar_kernel_runtime* seastar_rt = nullptr;\n"
      "extern \"C\" void seastar_bind_runtime(const void* rt) { seastar_rt = (const seastar_kernel_runtime*)rt; }\n"
      "template <class F> static void parallel_for(int64_t n, F f) {\n"
      "  if (!seastar_rt || n <= 1) { for (int64_t i = 0; i < n; ++i) f(i); return; }\n"
      "  seastar_rt->parallel_for(n, &f, [](void* c, int64_t i) { (*static_cast<F*>(c))(i); });\n"
      "}\n"
      "// rows per item of the per-vertex and per-edge maps\n"
      "static constexpr int64_t kChunk = 2048;\n\n";

  bool epilogue_reads_accumulators() const override { return true; }

  std::string run() {
    std::ostringstream out;
    out << "// Generated by Seastar for program '" << o_.name << "'. Do not edit.\n"
        << kTypesPrelude << "typedef " << o_.float_type << " T;\ntypedef " << o_.index_type << " I;\n\n"
        << kParallelPrelude;
    for (size_t k = 0; k < p_.kernels.size(); ++k) out << kernel(static_cast<int>(k), p_.kernels[k]);
    // sizes = {num_dst, E, num_src}: each kernel gets the count of the vertex set it iterates
    // (the two are equal on a square graph, whose source says N throughout)
    out << launch::entry_definition()
        << "  const int64_t N = sizes[" << launch::kNumDst << "], E = sizes[" << launch::kNumEdges
        << "];\n  (void)N; (void)E;\n";
    if (p_.bipartite) out << "  const int64_t NS = sizes[" << launch::kNumSrc << "];\n  (void)NS;\n";
    for (size_t k = 0; k < p_.kernels.size(); ++k)
      out << "  kernel_" << k << "(" << (p_.bipartite && p_.kernels[k].side == Group::Src ? "NS" : "N")
          << ", E, G, B);\n";
    out << "}\n";
    return out.str();
  }

 private:
  std::string kernel(int index, const Kernel& k) {
    begin_kernel(k);
    std::ostringstream out, fin;
    out << kernel_comment(index, k)
        << "static void kernel_" << index << "(const int64_t N, const int64_t E, void* const* G, void* const* B) {\n"
        << "  (void)N; (void)E;\n";

    if (k.kind == Kernel::Kind::Traverse) {
      Traversal t = traversal(k);
      std::ostringstream partials, reduce, block_ptrs;
      for (const RowReduction& r : t.rows) {
        const std::string a = std::to_string(r.value), S = std::to_string(r.numel);
        partials << "  sk::buffer<T> part" << a << "(NB * " << S << ");\n";
        // block by block, each element's sum in block order (the bits of a per-element loop
        // over blocks), reading the partial sums in memory order
        reduce << "  {\n    sk::buffer<T> sum(" << S << ");\n"
               << "    for (int64_t b = 0; b < NB; ++b) {\n      const T* p = part" << a << ".data() + b * " << S << ";\n"
               << "      for (int64_t k = 0; k < " << S << "; ++k) sum[k] += p[k];\n    }\n"
               << "    for (int64_t k = 0; k < " << S << "; ++k) {\n";
        for (int bo : write_[r.value]) reduce << "      " << buffer_ptr(bo, "") << "[k] = sum[k];\n";
        reduce << "    }\n  }\n";
        block_ptrs << "    T* pp" << a << " = part" << a << ".data() + b * " << S << ";\n";
      }
      int ptr = launch::edge_index_base(k.group == Group::Src);
      // Blocks of consecutive centres, handed out dynamically in id order: their edge lists are
      // adjacent in memory (the index streams stay sequential, and the prefetch of the rows some
      // edges ahead reads the next block's) and neighbouring ids tend to share neighbours. Only
      // the heavy blocks (over 4x the mean edge count: hubs) go first, largest first, so that
      // none arrives last while the other threads idle; a block left in order holds at most 4
      // blocks' worth of edges. (Sorting every block by size made a neighbour sum on one thread
      // markedly slower: the order lost its locality; README, Benchmarks.) The block count
      // depends only on N and the partial sums' size, never on the thread count, and partial
      // sums are added in block order, so parameter gradients are summed in the same order on
      // every run. With partial sums, every block clears and adds its own, so the block count
      // also stays below the traversal's edges per partial element (kEdgesPerPartial): a small
      // graph (a sampled block) with large parameter gradients would otherwise spend more on
      // its blocks' partial sums than on its edges.
      const int64_t max_blocks =
          t.partial_elems == 0 ? 4096
                               : std::max<int64_t>(1, std::min<int64_t>(1024, (int64_t(1) << 23) / t.partial_elems));
      std::string nb = "sk::min<int64_t>(N, " + std::to_string(max_blocks) + ")";
      if (t.partial_elems > 0)
        nb = "sk::min<int64_t>(" + nb + ", sk::max<int64_t>(" + std::to_string(kMinPartialBlocks) +
             ", ((int64_t)ptr[N] - (int64_t)ptr[0]) * " + std::to_string(kEdgesPerPartial) + " / " +
             std::to_string(t.partial_elems) + "))";
      out << "  const I* ptr = (const I*)G[" << ptr << "];\n  const I* nbr = (const I*)G[" << ptr + 1 << "];\n"
          << "  const I* eid = (const I*)G[" << ptr + 2 << "];\n  const I* order = (const I*)G[" << ptr + 3 << "];\n"
          << "  const int64_t NB = sk::max<int64_t>(1, " << nb << ");\n"
          << "  const int64_t BS = (N + NB - 1) / NB;\n  (void)order;\n"
          << "  auto block_edges = [&](int64_t b) { return (int64_t)ptr[sk::min(N, (b + 1) * BS)] - (int64_t)ptr[sk::min(N, b * BS)]; };\n"
          << "  const int64_t heavy = 4 * (((int64_t)ptr[N] - (int64_t)ptr[0]) / NB + 1);\n"
          << "  sk::buffer<int64_t> border(NB);\n"
          << "  sk::block_order(NB, border.data(), [&](int64_t b) { return block_edges(b) > heavy; }, block_edges);\n"
          << partials.str()
          << "  parallel_for(NB, [&](int64_t bi) {\n"
          << "    const int64_t b = border[bi];\n"
          << block_ptrs.str()
          << "    for (int64_t c = b * BS; c < sk::min(N, (b + 1) * BS); ++c) {\n"
          << "      const int64_t beg = ptr[c], end = ptr[c + 1];\n"
          << t.passes << "    }\n  });\n" << reduce.str();
    } else if (k.kind == Kernel::Kind::VertexMap) {
      for (int o : k.values) store(fin, o, val(o, "c"), "c", numel(m_.at(o).shape));
      out << "  parallel_for((N + kChunk - 1) / kChunk, [&](int64_t chunk) {\n"
          << "  for (int64_t c = chunk * kChunk; c < sk::min(N, (chunk + 1) * kChunk); ++c) {\n"
          << pre_.str() << fin.str() << "  }\n  });\n";
    } else if (k.kind == Kernel::Kind::ParamMap) {
      for (int o : k.values) store(fin, o, val(o, ""), "", numel(m_.at(o).shape));
      out << pre_.str() << fin.str();
    } else {
      for (int o : k.values) store(fin, o, val(o, "e"), "e", numel(m_.at(o).shape));
      out << "  const I* src = (const I*)G[" << launch::kSrc << "];\n  const I* dst = (const I*)G[" << launch::kDst << "];\n"
          << "  parallel_for((E + kChunk - 1) / kChunk, [&](int64_t chunk) {\n"
          << "  for (int64_t e = chunk * kChunk; e < sk::min(E, (chunk + 1) * kChunk); ++e) {\n"
          << "      const int64_t s = src[e], d = dst[e];\n      (void)s; (void)d;\n"
          << body_.str() << fin.str() << "  }\n  });\n";
    }
    out << "}\n\n";
    return out.str();
  }
};

}  // namespace

std::string emit_cpu(const FusedPlan& plan, const EmitOptions& options) {
  if (!options.storage_type.empty())  // the runtime refuses 16-bit tensors on the CPU before this
    SEASTAR_THROW(NotImplementedError, "the C++ emitter has no 16-bit storage (", options.storage_type, ")");
  return CpuEmitter(plan, options).run();
}

}  // namespace seastar::codegen
