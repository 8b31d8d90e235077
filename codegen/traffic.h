/** \file
 * The static traffic model of a generated kernel: which buffers and graph arrays it reads and
 * writes, how many bytes of each per edge, per vertex (per centre of a traversal) and per
 * launch, recorded by the emitter as it emits the reads (emitter_base.h), so the model follows
 * what the kernel does (recomputed vertex expressions read their operands, stored ones their
 * buffer; a traversal's later passes read their neighbours' rows again).
 *
 * The bytes are unique bytes of one item, as if nothing were cached across items: a row read at
 * the neighbour counts once per edge and pass, a centre row once per centre, a parameter once
 * per launch. A warp's lanes reading the same row count it once. `gathered` marks rows the
 * loop's order does not predict (at the neighbour, through an edge id, an edge map's
 * endpoints): on a GPU those are the scattered reads a cache may or may not absorb.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace seastar::codegen {

struct TrafficTerm {
  enum class Per { Edge, Vertex, Launch };
  std::string what;       ///< `input "h"`, `output 0`, `intermediate %12`, `graph in_nbr`, `scratch`
  int buffer = -1;        ///< FusedPlan::buffers index; -1 for a graph array or scratch
  Per per = Per::Edge;
  bool write = false;
  bool gathered = false;
  int64_t bytes = 0;      ///< per item of `per`
  int pass = 0;           ///< a traversal's pass over the centre's edges (0 elsewhere)
};

inline const char* to_string(TrafficTerm::Per p) {
  return p == TrafficTerm::Per::Edge ? "edge" : p == TrafficTerm::Per::Vertex ? "vertex" : "launch";
}

}  // namespace seastar::codegen
