/** \file File names made from user-chosen names (program names): the kernel cache and the
 * SEASTAR_DUMP_DIR dumps both use them, so a name with '/', '..', spaces, quotes, ';' or
 * non-ASCII never leaves its folder or reaches a shell. */
#pragma once

#include <string>

namespace seastar::util {

/// `name` with every byte outside [A-Za-z0-9_.-] replaced by '_', at most 64 characters,
/// never empty and never starting with '.' or '-'.
std::string file_stem(const std::string& name);

}  // namespace seastar::util
