/** \file
 * Public include of the installed C++ API: `#include <seastar/graph.h>`.
 * seastar::Graph built from torch tensors (from_edge_index, typed graphs).
 * The implementation headers keep their source-tree paths ("core/graph/graph.h"); an installed Seastar puts
 * that tree under include/seastar/, which seastar::runtime adds to the include path.
 */
#pragma once

#include "core/graph/graph.h"
