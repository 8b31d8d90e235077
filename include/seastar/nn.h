/** \file
 * Public include of the installed C++ API: `#include <seastar/nn.h>`.
 * The layers (seastar::nn::GCNConv, GATConv, ...) as torch::nn modules; brings program.h.
 * The implementation headers keep their source-tree paths ("api/nn.h"); an installed Seastar puts
 * that tree under include/seastar/, which seastar::runtime adds to the include path.
 */
#pragma once

#include "api/nn.h"
