/** \file See file_names.h. */
#include "core/util/file_names.h"

namespace seastar::util {

std::string file_stem(const std::string& name) {
  std::string s;
  for (unsigned char c : name) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                c == '-';
    s += keep ? static_cast<char>(c) : '_';
  }
  if (s.empty() || s[0] == '.' || s[0] == '-') s = "k" + s;  // no hidden files, no options
  return s.substr(0, 64);
}

}  // namespace seastar::util
