/** \file
 * Public include of the installed C++ API: `#include <seastar/program.h>`.
 * Vertex programs: seastar::Program, Vertex, Edge, Var and the aggregations.
 * The implementation headers keep their source-tree paths ("api/program.h"); an installed Seastar puts
 * that tree under include/seastar/, which seastar::runtime adds to the include path.
 */
#pragma once

#include "api/program.h"
