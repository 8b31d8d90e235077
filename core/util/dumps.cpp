/** \file Writing the dumps of core/util/dumps.h. */
#include "core/util/dumps.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/util/file_names.h"
#include "core/util/log.h"

namespace seastar::dumps {

bool enabled() {
  const char* dir = std::getenv("SEASTAR_DUMP_DIR");
  return dir && *dir;
}

void write(const std::string& program, const std::string& file, const std::string& text) {
  const char* dir = std::getenv("SEASTAR_DUMP_DIR");
  if (!dir || !*dir) return;
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
