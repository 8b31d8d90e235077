/** \file save_edge_values: the edge values stored once and read back; see save_edge_values.h. */
#include "codegen/save_edge_values.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "codegen/cost_model.h"

namespace seastar::codegen {
using namespace ir;
using namespace cost;

namespace {

/// Where an edge value is computed: a kernel and one of its passes over the centre's edges.
using Site = std::pair<int, int>;

/// A random write costs a read and a write of the line (it is fetched before it is written).
constexpr double kWrite = 2.0;

/// A stored row, written or read at the edge's id (in no order the traversal predicts), costs
/// its bytes at the price of a random line: a row of H attention weights is an eighth of a
/// line, a [H, C] message a whole one.
double stored_row(const Value& v) {
  return kRandomLine * static_cast<double>(numel(v.shape) * kElemBytes) / static_cast<double>(kLineBytes);
}

/// An edge value an edge loop computes (not a bound tensor it reads, a gather or a view).
bool computed_edge_value(const Value& v) {
  if (v.space != Space::Edge || v.dtype != DType::Float) return false;
  switch (op_info(v.op).kind) {
    case OpKind::Unary: case OpKind::Binary: return true;
    case OpKind::Other:  // reductions along the features and products; not views (expand, unsqueeze)
      return v.op == Op::fsum || v.op == Op::fmean || v.op == Op::fmax || v.op == Op::sum_to ||
             v.op == Op::matvec || v.op == Op::matvec_t || v.op == Op::outer;
    default: return false;
  }
}

bool is_candidate(const Value& v, const std::set<int>& outputs) {
  return computed_edge_value(v) && !outputs.count(v.id);
}

/// Per site, what its edge loop computes from: the inputs of a traversal pass's reductions, or
/// a per-edge map's outputs.
std::map<Site, std::vector<int>> site_roots(const Module& m, const std::vector<Kernel>& kernels) {
  std::map<Site, std::vector<int>> out;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const Kernel& kn = kernels[k];
    if (kn.kind == Kernel::Kind::EdgeMap) {
      out[{static_cast<int>(k), 0}] = kn.values;
    } else if (kn.kind == Kernel::Kind::Traverse) {
      for (size_t i = 0; i < kn.values.size(); ++i) {
        const Value& r = m.at(kn.values[i]);
        std::vector<int>& roots = out[{static_cast<int>(k), kn.pass[i]}];
        roots.insert(roots.end(), r.inputs.begin(), r.inputs.end());
      }
    }
  }
  return out;
}

/// Whether an edge loop computing `roots` computes `x`: walks from the roots through edge
/// values, never past a reduction (read from its buffer), a gather (a vertex row) or a value
/// `read_back` says the loop reads from a buffer.
template <class ReadBack>
bool computes(const Module& m, const std::vector<int>& roots, int x, ReadBack read_back) {
  bool found = false;
  visit_inputs(m, roots, [&](const Value& v) {
    if (found) return false;
    if (v.id == x) return !(found = true);
    return !is_reduction(v) && v.op != Op::gather && !read_back(v.id);
  });
  return found;
}

/// The edge outputs of the per-edge map that a traversal pass computes anyway (a gradient per
/// edge that is also summed onto the sources): the first such pass stores them, and the map,
/// left with nothing, is dropped.
void fold_edge_outputs(const Module& m, std::vector<Kernel>& kernels) {
  const std::map<Site, std::vector<int>> roots = site_roots(m, kernels);
  for (Kernel& map : kernels) {
    if (map.kind != Kernel::Kind::EdgeMap) continue;
    std::vector<int> rest;
    for (int o : map.values) {
      auto site = std::find_if(roots.begin(), roots.end(), [&](const auto& r) {
        return kernels[r.first.first].kind == Kernel::Kind::Traverse && computed_edge_value(m.at(o)) &&
               computes(m, r.second, o, [](int) { return false; });
      });
      if (site == roots.end()) {
        rest.push_back(o);
      } else {
        kernels[site->first.first].saves.push_back({o, site->first.second, false});
      }
    }
    map.values = rest;
  }
  kernels.erase(std::remove_if(kernels.begin(), kernels.end(),
                               [](const Kernel& k) { return k.kind == Kernel::Kind::EdgeMap && k.values.empty(); }),
                kernels.end());
}

class EdgeSaver {
 public:
  EdgeSaver(const Module& m, std::vector<Kernel>& kernels)
      : m_(m), kernels_(kernels), outputs_(m.outputs.begin(), m.outputs.end()), roots_(site_roots(m, kernels)) {}

  std::vector<int> run() {
    // latest first (among rows of one width): a stored consumer spares the sites after its own
    // the values it was made of
    std::vector<int> candidates;
    for (int id = m_.size() - 1; id >= 0; --id)
      if (is_candidate(m_.at(id), outputs_)) candidates.push_back(id);
    // narrow rows first: a wide value is priced knowing which narrow ones (an attention weight,
    // its gradient) are stored, so it is not chosen for the work those already spare
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](int a, int b) { return numel(m_.at(a).shape) < numel(m_.at(b).shape); });
    // a value chosen early was priced with everything under it recomputed: priced again with the
    // values chosen after it stored, it may no longer pay (a wide gradient term whose narrow
    // inputs are now stored), and a value it hid may (those narrow inputs), so every candidate
    // is priced again until the choice settles
    for (int round = 0; round < kRounds; ++round) {
      bool changed = false;
      for (int id : candidates) {
        const bool was = home_.count(id) > 0;
        changed |= decide(id) != was;
      }
      if (!changed) break;
    }
    // each value at the first site that computes it, consumers first: whether a walk reaches a
    // value depends only on the values above it
    std::vector<int> stored = chosen();
    std::map<int, bool> by_slot;
    for (int id : stored) {
      const std::vector<Site> sites = sites_of(id);
      home_[id] = sites.front();
      // read only by the traversal that stores it: rows in its edge order, not at the edge ids
      by_slot[id] = kernels_[sites.front().first].kind == Kernel::Kind::Traverse &&
                    std::all_of(sites.begin(), sites.end(), [&](const Site& s) { return s.first == sites.front().first; });
    }
    std::sort(stored.begin(), stored.end());
    for (int id : stored) kernels_[home_[id].first].saves.push_back({id, home_[id].second, by_slot[id]});
    return stored;
  }

 private:
  static constexpr int kRounds = 4;

  /// The values chosen so far, latest first.
  std::vector<int> chosen() const {
    std::vector<int> ids;
    for (auto it = home_.rbegin(); it != home_.rend(); ++it) ids.push_back(it->first);
    return ids;
  }

  /// Prices `id` against the values stored now (itself aside) and stores it or not; whether it is.
  bool decide(int id) {
    home_.erase(id);
    const std::vector<Site> sites = sites_of(id);
    if (sites.size() < 2) return false;
    double recompute = 0;
    for (size_t s = 1; s < sites.size(); ++s) recompute += cost_at(id, sites[s]);
    const double price = stored_row(m_.at(id)) * (kWrite + static_cast<double>(sites.size() - 1));
    if (recompute <= price) return false;
    home_[id] = sites.front();
    return true;
  }

  /// Whether a walk at `site` stops at `id` (a stored value computed at another site).
  bool read_back(int id, const Site& site) const {
    auto it = home_.find(id);
    return it != home_.end() && it->second != site;
  }

  /// The sites whose edge loops compute `x`, in kernel and pass order.
  std::vector<Site> sites_of(int x) const {
    std::vector<Site> out;
    for (const auto& [site, roots] : roots_)
      if (computes(m_, roots, x, [&](int id) { return read_back(id, site); })) out.push_back(site);
    return out;
  }

  /// What computing `x` costs per edge at `site`, given the values stored so far.
  double cost_at(int x, const Site& site) const {
    const Kernel& k = kernels_[site.first];
    double total = 0;
    visit_inputs(m_, {x}, [&](const Value& v) {
      if (v.id != x && read_back(v.id, site)) {
        total += stored_row(v);
        return false;
      }
      switch (v.op) {
        case Op::gather: {  // the centre's row is read once per centre, the neighbour's per edge
          const bool centre = k.kind == Kernel::Kind::Traverse && v.group == k.group;
          if (!centre) total += kRandomLine * lines(m_.at(v.inputs[0]));
          return false;
        }
        case Op::input_edge: total += stored_row(v); return false;
        case Op::fsum: case Op::fmean: case Op::fmax: case Op::sum_to:
          total += kFlop * static_cast<double>(numel(m_.at(v.inputs[0]).shape));
          return true;
        case Op::matvec: case Op::matvec_t: case Op::outer:
          total += kFlop * static_cast<double>(numel(m_.at(v.inputs[0]).shape) * numel(v.shape));
          return true;
        default: break;
      }
      const OpKind kind = op_info(v.op).kind;
      if (kind == OpKind::Unary || kind == OpKind::Binary) {
        const bool calls = std::strstr(op_info(v.op).c_expr, "std::") != nullptr;
        total += kFlop * static_cast<double>(numel(v.shape)) * (calls ? kTranscendental : 1.0);
      }
      return true;
    });
    return total;
  }

  const Module& m_;
  std::vector<Kernel>& kernels_;
  std::set<int> outputs_;
  std::map<Site, std::vector<int>> roots_;  ///< per site: what its reductions (or edge outputs) read
  std::map<int, Site> home_;                ///< stored value -> the site that computes and stores it
};

}  // namespace

std::vector<int> save_edge_values(const Module& m, std::vector<Kernel>& kernels) {
  fold_edge_outputs(m, kernels);
  return EdgeSaver(m, kernels).run();
}

}  // namespace seastar::codegen
