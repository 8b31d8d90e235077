/** \file
 * Public include of the installed C++ API: `#include <seastar/errors.h>`.
 * The exception types: seastar::ValueError, TypeError, TraceError, CompileError, ...
 * The implementation headers keep their source-tree paths ("core/util/errors.h"); an installed Seastar puts
 * that tree under include/seastar/, which seastar::runtime adds to the include path.
 */
#pragma once

#include "core/util/errors.h"
