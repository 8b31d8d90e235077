/** \file
 * Synthetic graphs generated in C++ (large graphs for mini-batch and scaling work build in
 * seconds), deterministic for a seed at any thread count: every draw comes from a counter-based
 * generator keyed by (seed, what is drawn, index).
 */
#pragma once

#include <cstdint>
#include <vector>

namespace seastar::generators {

struct LabelledGraph {
  std::vector<int64_t> src, dst;  ///< the edges
  std::vector<int64_t> label;     ///< the class of every vertex
};

/// A degree-corrected stochastic block model: vertex v gets a uniform class and a heavy-tailed
/// degree propensity (Pareto, exponent 2.5, capped); each of num_nodes * avg_degree edges picks
/// its destination by propensity and its source by propensity within the destination's class
/// with probability `homophily`, else within a uniformly chosen other class. Throws ValueError
/// for out-of-range arguments.
LabelledGraph sbm_node_classification(int64_t num_nodes, double avg_degree, int64_t num_classes, double homophily,
                                      uint64_t seed);

}  // namespace seastar::generators
