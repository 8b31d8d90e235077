/** \file Neighbour sampling: per-destination counts and draws in parallel, then one relabelling pass. */
#include "core/sampling/neighbor_sampler.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/util/errors.h"
#include "core/util/random.h"

namespace seastar::sampling {
namespace {

using util::mix64;

/// The counter-based stream of one (seed, hop, vertex): draw i is mix64(key + i), independent of
/// which thread samples the vertex or in which order.
struct Stream {
  uint64_t key;
  uint64_t i = 0;
  Stream(uint64_t seed, int64_t hop, int64_t vertex)
      : key(mix64(mix64(seed ^ 0x5ea57a2ull) ^ mix64(static_cast<uint64_t>(hop) * 0x100000001b3ull)) ^
            mix64(static_cast<uint64_t>(vertex))) {}
  uint64_t next() { return mix64(key + 0x632be59bd9b4e019ull * ++i); }
  /// Uniform in [0, n): Lemire's multiply-shift with rejection, unbiased.
  uint64_t below(uint64_t n) {
    for (;;) {
      const unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
      const uint64_t low = static_cast<uint64_t>(m);
      if (low >= n || low >= (-n) % n) return static_cast<uint64_t>(m >> 64);
    }
  }
  /// Uniform in (0, 1].
  double unit() { return (static_cast<double>(next() >> 11) + 1.0) * (1.0 / 9007199254740992.0); }
};

/// Positions (0 .. deg-1) of the neighbours taken from one run of `deg` slots.
template <class Idx>
void choose(int64_t deg, int64_t fanout, const SamplerOptions& o, const Idx* eids, Stream& rng,
            std::vector<int64_t>& out) {
  out.clear();
  if (deg == 0 || fanout == 0) return;
  const bool weighted = !o.weights.empty();
  if (fanout < 0 || (!o.replace && fanout >= deg)) {
    if (!weighted) {
      for (int64_t j = 0; j < deg; ++j) out.push_back(j);
      return;
    }
    for (int64_t j = 0; j < deg; ++j)  // every neighbour with a positive weight
      if (o.weights[eids[j]] > 0) out.push_back(j);
    if (fanout < 0 || static_cast<int64_t>(out.size()) <= fanout) return;
    out.clear();
  }
  if (o.replace) {
    if (!weighted) {
      for (int64_t i = 0; i < fanout; ++i) out.push_back(static_cast<int64_t>(rng.below(deg)));
    } else {
      std::vector<double> cdf(deg);
      double total = 0;
      for (int64_t j = 0; j < deg; ++j) cdf[j] = total += o.weights[eids[j]];
      if (total <= 0) return;
      for (int64_t i = 0; i < fanout; ++i) {
        const double u = rng.unit() * total;
        out.push_back(std::min<int64_t>(deg - 1, std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin()));
      }
    }
  } else if (!weighted && deg <= 64) {
    // Floyd's algorithm (below) with the taken positions as bits: no search, and reading the
    // bits back gives them in increasing order, the sort's order, so the draws are the same
    uint64_t taken = 0;
    for (int64_t j = deg - fanout; j < deg; ++j) {
      const int64_t t = static_cast<int64_t>(rng.below(static_cast<uint64_t>(j + 1)));
      taken |= uint64_t(1) << ((taken >> t) & 1 ? j : t);
    }
    for (; taken; taken &= taken - 1) out.push_back(__builtin_ctzll(taken));
    return;
  } else if (!weighted) {
    // Floyd's algorithm: fanout distinct positions, each subset equally likely
    for (int64_t j = deg - fanout; j < deg; ++j) {
      const int64_t t = static_cast<int64_t>(rng.below(static_cast<uint64_t>(j + 1)));
      out.push_back(std::find(out.begin(), out.end(), t) == out.end() ? t : j);
    }
  } else {
    // Efraimidis-Spirakis: the fanout largest keys log(u) / w are a weighted sample without
    // replacement (zero weights are never taken)
    std::vector<std::pair<double, int64_t>> keys;
    for (int64_t j = 0; j < deg; ++j) {
      const double w = o.weights[eids[j]];
      if (w > 0) keys.emplace_back(std::log(rng.unit()) / w, j);
    }
    const int64_t k = std::min<int64_t>(fanout, keys.size());
    std::partial_sort(keys.begin(), keys.begin() + k, keys.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    for (int64_t i = 0; i < k; ++i) out.push_back(keys[i].second);
  }
  // keep the parent's slot order (type-sorted within a destination) inside the block
  std::sort(out.begin(), out.end());
}

void check(const GraphData& g, const std::vector<int64_t>& seeds, const Fanouts& fanouts, const SamplerOptions& o) {
  if (g.is_bipartite()) SEASTAR_THROW(ValueError, "neighbour sampling needs a square graph, got a bipartite one");
  if (fanouts.empty()) SEASTAR_THROW(ValueError, "fanouts must name at least one hop");
  const int64_t R = std::max<int64_t>(1, g.types().num_edge_types);
  for (size_t h = 0; h < fanouts.size(); ++h) {
    const auto& f = fanouts[h];
    if (f.size() != 1 && static_cast<int64_t>(f.size()) != R)
      SEASTAR_THROW(ValueError, "hop ", h, " has ", f.size(), " fanouts; give one, or one per relation (", R, ")");
    for (int64_t x : f)
      if (x < -1) SEASTAR_THROW(ValueError, "fanout ", x, " at hop ", h, " must be >= 0, or -1 for every neighbour");
  }
  if (!o.weights.empty()) {
    if (static_cast<int64_t>(o.weights.size()) != g.num_edges())
      SEASTAR_THROW(ValueError, "weights has ", o.weights.size(), " entries but the graph has ", g.num_edges(),
                    " edges");
    for (size_t e = 0; e < o.weights.size(); ++e)
      if (!(o.weights[e] >= 0) || !std::isfinite(o.weights[e]))
        SEASTAR_THROW(ValueError, "weights[", e, "] = ", o.weights[e], " must be finite and >= 0");
  }
  for (size_t i = 0; i < seeds.size(); ++i)
    if (seeds[i] < 0 || seeds[i] >= g.num_nodes())
      SEASTAR_THROW(ValueError, "seed[", i, "] = ", seeds[i], " is out of range: expected 0 <= id < num_nodes = ",
                    g.num_nodes());
  // O(B log B) in the batch, not O(N) in the graph: this runs for every mini-batch
  std::vector<int64_t> sorted = seeds;
  std::sort(sorted.begin(), sorted.end());
  auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) SEASTAR_THROW(ValueError, "seed ", *dup, " appears twice in the batch");
}

/// How many neighbours `choose` takes from a run of `deg` slots when that follows from the
/// sizes alone (unweighted draws); -1 when only the draws themselves tell (weights).
int64_t count_without_drawing(int64_t deg, int64_t fanout, const SamplerOptions& o) {
  if (!o.weights.empty()) return -1;
  if (deg == 0 || fanout == 0) return 0;
  if (fanout < 0) return deg;
  return o.replace ? fanout : std::min(fanout, deg);
}

/// The relabelling of step 3 over the team: each new source's first slot by an atomic minimum,
/// then the new sources ranked by that slot (a prefix sum), so the ids are the sequential loop's.
/// `local` holds the destinations' ids and -1 elsewhere; on return it holds every source's id.
template <class Local>
void relabel_in_parallel(SampledBlock& blk, std::vector<Local>& local, int64_t num_nodes) {
  static thread_local std::vector<int64_t> first;  // the first slot of each vertex, INT64_MAX when unseen
  if (static_cast<int64_t>(first.size()) < num_nodes)
    first.assign(static_cast<size_t>(num_nodes), std::numeric_limits<int64_t>::max());
  const int64_t E = static_cast<int64_t>(blk.src.size()), D = blk.num_dst;
  int64_t* first_slot = first.data();
  const Local* ids = local.data();
  // every allocation before `first` is written: nothing below throws with it half set
  std::vector<int64_t> rank(E + 1, 0);  // rank[k]: new sources whose first slot is before k
  blk.src_nodes.reserve(static_cast<size_t>(D + E));
#pragma omp parallel for schedule(dynamic, 4096)  // dynamic: a busy core takes fewer chunks
  for (int64_t k = 0; k < E; ++k) {
    const int64_t u = blk.src[k];
    if (ids[u] >= 0) continue;  // a destination: already numbered
    int64_t seen = __atomic_load_n(&first_slot[u], __ATOMIC_RELAXED);
    while (k < seen && !__atomic_compare_exchange_n(&first_slot[u], &seen, k, true, __ATOMIC_RELAXED,
                                                    __ATOMIC_RELAXED)) {
    }
  }
#pragma omp parallel for schedule(dynamic, 4096)
  for (int64_t k = 0; k < E; ++k) {
    const int64_t u = blk.src[k];
    rank[k + 1] = ids[u] < 0 && first_slot[u] == k;
  }
  std::partial_sum(rank.begin(), rank.end(), rank.begin());
  blk.src_nodes.resize(static_cast<size_t>(D + rank[E]));
#pragma omp parallel for schedule(dynamic, 4096)
  for (int64_t k = 0; k < E; ++k) {
    if (rank[k + 1] == rank[k]) continue;
    const int64_t u = blk.src[k];
    blk.src_nodes[D + rank[k]] = u;
    local[u] = static_cast<Local>(D + rank[k]);
    first_slot[u] = std::numeric_limits<int64_t>::max();  // reset for the next hop (only this slot wrote it)
  }
#pragma omp parallel for schedule(dynamic, 4096)
  for (int64_t k = 0; k < E; ++k) blk.src[k] = local[blk.src[k]];
}

/// Step 3 with `local` (global -> local ids) in `Local` ints: destinations first, then each new
/// source in the order of its first slot.
template <class Local>
void relabel_with(SampledBlock& blk, const std::vector<int64_t>& frontier, std::vector<Local>& local,
                  int64_t num_nodes, bool parallel) {
  if (static_cast<int64_t>(local.size()) < num_nodes) local.assign(static_cast<size_t>(num_nodes), Local(-1));
  const int64_t D = blk.num_dst, E = static_cast<int64_t>(blk.src.size());
  blk.src_nodes = frontier;
  for (int64_t i = 0; i < D; ++i) local[frontier[i]] = static_cast<Local>(i);
  // the team's relabelling makes four passes over the edges to the sequential loop's one: it
  // pays from four threads on (on two it was slower, 5.0 vs 4.4 ms for a 165k-edge hop)
  if (parallel && E >= (1 << 16) && omp_get_max_threads() >= 4) {
    relabel_in_parallel(blk, local, num_nodes);
  } else {
    constexpr int64_t kAhead = 16;  // the reads of `local` are random: prefetched a few edges ahead
    for (int64_t k = 0; k < E; ++k) {
      if (k + kAhead < E) __builtin_prefetch(&local[blk.src[k + kAhead]]);
      const int64_t u = blk.src[k];
      if (local[u] < 0) {
        local[u] = static_cast<Local>(blk.src_nodes.size());
        blk.src_nodes.push_back(u);
      }
      blk.src[k] = local[u];
    }
  }
  for (int64_t u : blk.src_nodes) local[u] = Local(-1);
}

/// Step 3: ids do not depend on the thread count. global -> local ids live in a per-thread array
/// over the graph's vertices, reset after use (only the touched entries), cheaper than a hash
/// map; in int32 when the graph's vertex ids fit (a local id is at most a global one's count),
/// which halves the array the random reads land in.
void relabel(SampledBlock& blk, const std::vector<int64_t>& frontier, int64_t num_nodes, bool parallel) {
  if (num_nodes <= std::numeric_limits<int32_t>::max()) {
    static thread_local std::vector<int32_t> local;
    relabel_with(blk, frontier, local, num_nodes, parallel);
  } else {
    static thread_local std::vector<int64_t> local;
    relabel_with(blk, frontier, local, num_nodes, parallel);
  }
}

/// One hop: the draws of every destination of `frontier`, in two parallel passes (count, then
/// draw again into the block's flat arrays: the draws are a pure function of (seed, hop, vertex),
/// so both passes take the same neighbours), then the relabelling.
/// `nbr` and `eid` are the in-adjacency's arrays at the graph's width. The first `skip`
/// destinations take no neighbours (`SamplerOptions::expand_once`: an earlier hop sampled them).
template <class Idx>
SampledBlock sample_hop(const GraphData& g, const Idx* nbr, const Idx* eid, const std::vector<int64_t>& frontier,
                        int64_t hop, const std::vector<int64_t>& f, const SamplerOptions& o, int64_t skip) {
  const Adjacency& in = g.in();
  const int64_t R = std::max<int64_t>(1, g.types().num_edge_types);
  const bool per_relation = g.has_edge_types() && f.size() > 1;
  const int64_t D = static_cast<int64_t>(frontier.size());
  // emit(slot) for every neighbour taken from destination i (slots in increasing order)
  auto draw = [&](int64_t i, std::vector<int64_t>& run, auto&& emit) {
    const int64_t v = frontier[i];
    Stream rng(o.seed, hop, v);
    const int64_t beg = in.ptr[v], end = in.ptr[v + 1];
    if (!per_relation) {
      choose(end - beg, f[0], o, eid + beg, rng, run);
      for (int64_t j : run) emit(beg + j);
      return;
    }
    // the CSC is sorted by relation within a destination: one run per relation
    for (int64_t a = beg; a < end;) {
      const int64_t r = g.types().edge_type[eid[a]];
      int64_t b = a;
      while (b < end && g.types().edge_type[eid[b]] == r) ++b;
      choose(b - a, f[std::min<int64_t>(r, R - 1)], o, eid + a, rng, run);
      for (int64_t j : run) emit(a + j);
      a = b;
    }
  };
  SampledBlock blk;
  blk.num_dst = D;
  blk.ptr.assign(D + 1, 0);
  const bool parallel = D >= 256;  // a small frontier is cheaper than waking a thread team
  // 1. how many neighbours each destination takes
#pragma omp parallel if (parallel)
  {
    std::vector<int64_t> run;
#pragma omp for schedule(dynamic, 256)
    for (int64_t i = 0; i < D; ++i) {
      if (i < skip) continue;  // blk.ptr[i + 1] stays 0
      if (i + 16 < D) __builtin_prefetch(&in.ptr[frontier[i + 16]]);
      const int64_t v = frontier[i];
      const int64_t known = per_relation ? -1 : count_without_drawing(in.degree(v), f[0], o);
      if (known >= 0) {
        blk.ptr[i + 1] = known;
        continue;
      }
      int64_t c = 0;
      draw(i, run, [&](int64_t) { ++c; });
      blk.ptr[i + 1] = c;
    }
  }
  std::partial_sum(blk.ptr.begin(), blk.ptr.end(), blk.ptr.begin());
  const int64_t E = blk.ptr[D];
  // 2. the draws, written where they belong: global source ids (relabelled below) and edge ids
  blk.src.resize(E);
  blk.eid.resize(E);
#pragma omp parallel if (parallel)
  {
    std::vector<int64_t> run;
#pragma omp for schedule(dynamic, 64)
    for (int64_t i = 0; i < D; ++i) {
      // each destination's first reads (its offsets, then its slots: two lines of each array,
      // a typical run) miss the cache: ask for them destinations ahead, so that the misses of
      // neighbouring iterations overlap. Written out here, not in a lambda: GCC dropped a
      // lambda's prefetches from this outlined parallel region (none in its machine code).
      if (i + 32 < D) __builtin_prefetch(&in.ptr[frontier[i + 32]]);
      if (i + 16 < D) {
        const int64_t at = in.ptr[frontier[i + 16]];
        for (const char* slots : {reinterpret_cast<const char*>(nbr + at), reinterpret_cast<const char*>(eid + at)}) {
          __builtin_prefetch(slots);
          __builtin_prefetch(slots + 64);
        }
      }
      if (i < skip) continue;
      int64_t k = blk.ptr[i];
      draw(i, run, [&](int64_t slot) {
        blk.src[k] = nbr[slot];
        blk.eid[k] = eid[slot];
        ++k;
      });
    }
  }
  // 3. relabel to block-local ids
  relabel(blk, frontier, g.num_nodes(), parallel);
  return blk;
}

}  // namespace

std::vector<SampledBlock> sample_neighbors(const GraphData& g, const std::vector<int64_t>& seeds,
                                           const Fanouts& fanouts, const SamplerOptions& o) {
  check(g, seeds, fanouts, o);
  std::vector<SampledBlock> blocks;
  blocks.reserve(fanouts.size());  // `frontier` points into the last block
  const std::vector<int64_t>* frontier = &seeds;
  const Adjacency& in = g.in();
  for (size_t hop = 0; hop < fanouts.size(); ++hop) {
    const int64_t skip = o.expand_once && hop > 0 ? blocks.back().num_dst : 0;
    blocks.push_back(in.nbr.visit([&](const auto* nbr) {  // a graph's nbr and eid have one width
      return sample_hop(g, nbr, static_cast<decltype(nbr)>(in.eid.data()), *frontier, static_cast<int64_t>(hop),
                        fanouts[hop], o, skip);
    }));
    frontier = &blocks.back().src_nodes;
  }
  return blocks;
}

}  // namespace seastar::sampling
