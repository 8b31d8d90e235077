/** \file Writing the dumps of core/util/dumps.h. */
#include "core/util/dumps.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/util/file_names.h"
#include "core/util/log.h"

namespace seastar::dumps {

namespace {

/// SEASTAR_DUMP_DIR, or nullptr when it is unset or empty.
const char* dump_dir() {
  const char* dir = std::getenv("SEASTAR_DUMP_DIR");
  return dir && *dir ? dir : nullptr;
}

}  // namespace

bool enabled() { return dump_dir() != nullptr; }

void write(const std::string& program, const std::string& file, const std::string& text) {
  const char* dir = dump_dir();
  if (!dir) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // the program name is the user's: made a file name, it stays inside the folder
  const std::string path = std::string(dir) + "/" + util::file_stem(program) + "." + file;
  std::ofstream out(path);
  out << text;
  if (!out) {
    log::warn("SEASTAR_DUMP_DIR: could not write " + path + (ec ? " (" + ec.message() + ")" : ""));
    return;
  }
  log::debug("dumped " + path);
}

}  // namespace seastar::dumps
