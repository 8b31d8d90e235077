// Hand-written variants of the generated forward kernels of the GCN aggregation and of GAT,
// timed against the generated ones by benchmarks/kernel_variants.py to find what limits them.
// Compiled with the runtime's flags plus -DFW=<width> -DHEADS=<heads>. Same calling convention
// as a generated kernel: G = {CSC offsets, source ids, edge ids, degree order}, B = buffers.
#include <cmath>
#include <cstdint>
#include <algorithm>

typedef float T;
typedef int32_t I;
#ifndef FW
#define FW 64
#endif
#ifndef HEADS
#define HEADS 4
#endif
constexpr int64_t C = FW / HEADS;  // channels per head

// The generated schedule: 4096 blocks of vertices in decreasing-degree order, dynamic.
template <class Body>
static void for_vertices(const int64_t N, const I* order, Body body) {
  const int64_t NB = std::max<int64_t>(1, std::min<int64_t>(N, 4096));
  const int64_t BS = (N + NB - 1) / NB;
  #pragma omp parallel for schedule(dynamic, 1)
  for (int64_t b = 0; b < NB; ++b)
    for (int64_t i = b * BS; i < std::min(N, (b + 1) * BS); ++i) body((int64_t)order[i]);
}

// ---- GCN aggregation: out[c] = sum_j h[nbr[j]] * w[...] ------------------------------------
// B = {h [N, FW], w [E] (edge-id order), out [N, FW], w_csc [E] (CSC slot order)}

// Edge weights pre-permuted into CSC slot order: streamed, no edge-id indirection.
extern "C" void gcn_csc_weights(const int64_t* sizes, void* const* G, void* const* B) {
  const int64_t N = sizes[0];
  const I* ptr = (const I*)G[0]; const I* nbr = (const I*)G[1]; const I* order = (const I*)G[3];
  const T* h = (const T*)B[0]; T* out = (T*)B[2]; const T* wc = (const T*)B[3];
  for_vertices(N, order, [&](const int64_t c) {
    T acc[FW] = {};
    const int64_t beg = ptr[c], end = ptr[c + 1];
    for (int64_t j = beg; j < end; ++j) {
      const T* row = h + (int64_t)nbr[j] * FW;
      const T w = wc[j];
      T v[FW];  // a per-edge temporary as in the generated code: written as one loop
      #pragma omp simd  // GCC vectorises across two edges with AVX-512 gathers instead (slow)
      for (int64_t k = 0; k < FW; ++k) v[k] = row[k] * w;
      #pragma omp simd
      for (int64_t k = 0; k < FW; ++k) acc[k] += v[k];
    }
    std::copy(acc, acc + FW, out + c * FW);
  });
}

// As generated (weights through edge ids) plus a software prefetch of the row 8 edges ahead.
extern "C" void gcn_prefetch(const int64_t* sizes, void* const* G, void* const* B) {
  const int64_t N = sizes[0], E = sizes[1];
  const I* ptr = (const I*)G[0]; const I* nbr = (const I*)G[1]; const I* eid = (const I*)G[2];
  const I* order = (const I*)G[3];
  const T* h = (const T*)B[0]; const T* w = (const T*)B[1]; T* out = (T*)B[2];
  for_vertices(N, order, [&](const int64_t c) {
    T acc[FW] = {};
    const int64_t end = ptr[c + 1];
    for (int64_t j = ptr[c]; j < end; ++j) {
      if (j + 8 < E) {
        const T* nxt = h + (int64_t)nbr[j + 8] * FW;
        for (int64_t k = 0; k < FW; k += 16) __builtin_prefetch(nxt + k);
        __builtin_prefetch(w + eid[j + 8]);
      }
      const T* row = h + (int64_t)nbr[j] * FW;
      const T wj = w[eid[j]];
      #pragma omp simd
      for (int64_t k = 0; k < FW; ++k) acc[k] += row[k] * wj;
    }
    std::copy(acc, acc + FW, out + c * FW);
  });
}

// ---- GAT: out[c] = sum_j softmax_j(leaky_relu(el[nbr[j]] + er[c])) * h[nbr[j]] --------------
// B = {el [N, H], er [N, H], h [N, H, C], out [N, H, C], m [N, H], z [N, H]}

static inline T lrelu(T x) { return x > T(0) ? x : T(0.2) * x; }

// Three traversals like the generated code, but the weighted sum is written per head
// (alpha is one scalar per head, the channel loop is contiguous: no (k / C) % H index) and the
// normaliser is inverted once per vertex instead of divided per edge.
extern "C" void gat_per_head(const int64_t* sizes, void* const* G, void* const* B) {
  const int64_t N = sizes[0];
  const I* ptr = (const I*)G[0]; const I* nbr = (const I*)G[1]; const I* order = (const I*)G[3];
  const T* el = (const T*)B[0]; const T* er = (const T*)B[1]; const T* h = (const T*)B[2];
  T* out = (T*)B[3]; T* M = (T*)B[4]; T* Z = (T*)B[5];
  for_vertices(N, order, [&](const int64_t c) {
    const int64_t beg = ptr[c], end = ptr[c + 1];
    T m[HEADS], z[HEADS], acc[FW] = {};
    for (int k = 0; k < HEADS; ++k) { m[k] = -INFINITY; z[k] = 0; }
    for (int64_t j = beg; j < end; ++j)
      for (int k = 0; k < HEADS; ++k) m[k] = std::max(m[k], lrelu(el[nbr[j] * HEADS + k] + er[c * HEADS + k]));
    for (int64_t j = beg; j < end; ++j)
      for (int k = 0; k < HEADS; ++k) z[k] += std::exp(lrelu(el[nbr[j] * HEADS + k] + er[c * HEADS + k]) - m[k]);
    T inv[HEADS];
    for (int k = 0; k < HEADS; ++k) inv[k] = T(1) / z[k];
    for (int64_t j = beg; j < end; ++j) {
      const int64_t n = nbr[j];
      const T* row = h + n * FW;
      for (int k = 0; k < HEADS; ++k) {
        const T a = std::exp(lrelu(el[n * HEADS + k] + er[c * HEADS + k]) - m[k]) * inv[k];
        #pragma omp simd
        for (int64_t q = 0; q < C; ++q) acc[k * C + q] += a * row[k * C + q];
      }
    }
    if (end == beg) for (int k = 0; k < HEADS; ++k) m[k] = 0;
    std::copy(acc, acc + FW, out + c * FW);
    std::copy(m, m + HEADS, M + c * HEADS);
    std::copy(z, z + HEADS, Z + c * HEADS);
  });
}

// One traversal with an online softmax (running max, rescaled sum and accumulator), per head:
// what the docs call "single-pass (online) softmax". exp once per edge and head (+ rescales).
extern "C" void gat_online(const int64_t* sizes, void* const* G, void* const* B) {
  const int64_t N = sizes[0];
  const I* ptr = (const I*)G[0]; const I* nbr = (const I*)G[1]; const I* order = (const I*)G[3];
  const T* el = (const T*)B[0]; const T* er = (const T*)B[1]; const T* h = (const T*)B[2];
  T* out = (T*)B[3]; T* M = (T*)B[4]; T* Z = (T*)B[5];
  for_vertices(N, order, [&](const int64_t c) {
    const int64_t beg = ptr[c], end = ptr[c + 1];
    T m[HEADS], z[HEADS], acc[FW] = {};
    for (int k = 0; k < HEADS; ++k) { m[k] = -INFINITY; z[k] = 0; }
    for (int64_t j = beg; j < end; ++j) {
      const int64_t n = nbr[j];
      const T* row = h + n * FW;
      for (int k = 0; k < HEADS; ++k) {
        const T s = lrelu(el[n * HEADS + k] + er[c * HEADS + k]);
        if (s > m[k]) {
          const T r = std::exp(m[k] - s);  // 0 on the first edge (m = -inf)
          z[k] *= r;
          #pragma omp simd
          for (int64_t q = 0; q < C; ++q) acc[k * C + q] *= r;
          m[k] = s;
        }
        const T p = std::exp(s - m[k]);
        z[k] += p;
        #pragma omp simd
        for (int64_t q = 0; q < C; ++q) acc[k * C + q] += p * row[k * C + q];
      }
    }
    for (int k = 0; k < HEADS; ++k) {
      const T inv = z[k] > 0 ? T(1) / z[k] : T(0);
      for (int64_t q = 0; q < C; ++q) out[c * FW + k * C + q] = acc[k * C + q] * inv;
      M[c * HEADS + k] = end == beg ? T(0) : m[k];
      Z[c * HEADS + k] = z[k];
    }
  });
}
