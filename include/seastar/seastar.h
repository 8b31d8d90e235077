/** \file
 * Everything of the installed C++ API in one include: `#include <seastar/seastar.h>`.
 */
#pragma once

#include <seastar/errors.h>
#include <seastar/graph.h>
#include <seastar/nn.h>
#include <seastar/program.h>
#include <seastar/version.h>
