/** \file The degree-corrected stochastic block model; see generators.h. */
#include "core/graph/generators.h"

#include <algorithm>
#include <cmath>

#include "core/util/errors.h"
#include "core/util/random.h"

namespace seastar::generators {
namespace {

using util::mix64;

/// The key of stream `what` for this seed (computed once per stream, not per draw).
inline uint64_t stream(uint64_t seed, uint64_t what) { return mix64(seed * 0x100000001b3ull + what); }

/// The i-th uniform double in [0, 1) of a stream.
inline double uniform(uint64_t key, uint64_t i) {
  return static_cast<double>(mix64(key ^ i) >> 11) * (1.0 / 9007199254740992.0);
}

/// Vose's alias table over `w`: O(1) weighted draws.
struct Alias {
  std::vector<double> prob;
  std::vector<int64_t> alias;
  explicit Alias(const std::vector<double>& w) : prob(w.size()), alias(w.size()) {
    const size_t n = w.size();
    double total = 0;
    for (double x : w) total += x;
    std::vector<int64_t> small, large;
    std::vector<double> p(n);
    for (size_t i = 0; i < n; ++i) {
      p[i] = w[i] * n / total;
      (p[i] < 1 ? small : large).push_back(static_cast<int64_t>(i));
    }
    while (!small.empty() && !large.empty()) {
      int64_t s = small.back(), l = large.back();
      small.pop_back();
      prob[s] = p[s], alias[s] = l;
      p[l] -= 1 - p[s];
      if (p[l] < 1) {
        large.pop_back();
        small.push_back(l);
      }
    }
    for (int64_t i : large) prob[i] = 1, alias[i] = i;
    for (int64_t i : small) prob[i] = 1, alias[i] = i;
  }
  int64_t draw(double u1, double u2) const {
    const int64_t i = std::min<int64_t>(static_cast<int64_t>(u1 * prob.size()), prob.size() - 1);
    return u2 < prob[i] ? i : alias[i];
  }
};

}  // namespace

LabelledGraph sbm_node_classification(int64_t num_nodes, double avg_degree, int64_t num_classes, double homophily,
                                      uint64_t seed) {
  if (num_nodes < 1) SEASTAR_THROW(ValueError, "num_nodes must be >= 1, got ", num_nodes);
  if (!(avg_degree >= 0) || !std::isfinite(avg_degree))
    SEASTAR_THROW(ValueError, "avg_degree must be finite and >= 0, got ", avg_degree);
  if (num_classes < 1 || num_classes > num_nodes)
    SEASTAR_THROW(ValueError, "num_classes must be in [1, num_nodes], got ", num_classes);
  if (!(homophily >= 0 && homophily <= 1)) SEASTAR_THROW(ValueError, "homophily must be in [0, 1], got ", homophily);
  LabelledGraph g;
  g.label.resize(num_nodes);
  std::vector<double> theta(num_nodes);
  // classes of equal expected size; propensities Pareto(2.5) capped so no vertex takes a
  // noticeable share of all edges
  const double cap = std::max(10.0, std::sqrt(static_cast<double>(num_nodes)));
  uint64_t key[9];
  for (uint64_t w = 0; w < 9; ++w) key[w] = stream(seed, w);
#pragma omp parallel for schedule(static)
  for (int64_t v = 0; v < num_nodes; ++v) {
    g.label[v] = std::min<int64_t>(num_classes - 1, static_cast<int64_t>(uniform(key[1], v) * num_classes));
    theta[v] = std::min(cap, std::pow(1.0 - uniform(key[2], v), -1.0 / 1.5));
  }
  // per class: its members and an alias table over their propensities
  std::vector<std::vector<int64_t>> members(num_classes);
  for (int64_t v = 0; v < num_nodes; ++v) members[g.label[v]].push_back(v);
  std::vector<Alias> within;
  for (auto& m : members) {
    std::vector<double> w;
    w.reserve(m.size());
    for (int64_t v : m) w.push_back(theta[v]);
    if (w.empty()) w.push_back(1.0);  // an empty class is never drawn from (see below)
    within.emplace_back(w);
  }
  const Alias all(theta);
  const int64_t E = static_cast<int64_t>(std::llround(avg_degree * num_nodes));
  g.src.resize(E);
  g.dst.resize(E);
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < E; ++e) {
    const int64_t d = all.draw(uniform(key[3], e), uniform(key[4], e));
    int64_t c = g.label[d];
    if (num_classes > 1 && uniform(key[5], e) >= homophily) {
      const int64_t other = std::min<int64_t>(num_classes - 2, static_cast<int64_t>(uniform(key[6], e) * (num_classes - 1)));
      c = other >= c ? other + 1 : other;
    }
    if (members[c].empty()) c = g.label[d];
    const int64_t k = within[c].draw(uniform(key[7], e), uniform(key[8], e));
    g.src[e] = members[c][k];
    g.dst[e] = d;
  }
  return g;
}

}  // namespace seastar::generators
