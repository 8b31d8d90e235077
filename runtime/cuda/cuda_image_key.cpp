/** \file Reading the key a CUDA image carries; see cuda_image_key.h. */
#include "runtime/cuda/cuda_image_key.h"

#include <cstdint>
#include <cstring>
#include <regex>

namespace seastar::runtime {
namespace {

/// A bounds-checked little-endian view of the cubin: every read past the end yields nullopt
/// semantics through `ok`, so a malformed file reads as "no key", never out of bounds.
struct Bytes {
  const std::string& data;
  bool ok = true;
  uint64_t u(uint64_t at, int width) {
    if (!ok || at > data.size() || data.size() - at < static_cast<uint64_t>(width)) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(data[at + i]);
    return v;
  }
  bool fits(uint64_t at, uint64_t size) const { return at <= data.size() && size <= data.size() - at; }
};

// ELF64 field offsets (the System V gABI): the cubins NVRTC writes are 64-bit little-endian
constexpr int kShoff = 0x28, kShentsize = 0x3a, kShnum = 0x3c;
constexpr int kShType = 0x04, kShOffset = 0x18, kShSize = 0x20, kShLink = 0x28, kShEntsize = 0x38;
constexpr int kStName = 0x00, kStShndx = 0x06, kStValue = 0x08, kStSize = 0x10, kSymSize = 0x18;
constexpr uint32_t kSymtab = 2, kNobits = 8;

std::string cubin_key(const std::string& image) {
  Bytes b{image};
  if (image.size() < 0x40 || std::memcmp(image.data(), "\x7f" "ELF", 4) != 0 || image[4] != 2 || image[5] != 1)
    return "";
  const uint64_t shoff = b.u(kShoff, 8), shentsize = b.u(kShentsize, 2), shnum = b.u(kShnum, 2);
  if (!b.ok || shentsize < 0x40 || !b.fits(shoff, shnum * shentsize)) return "";
  auto section = [&](uint64_t i) { return shoff + i * shentsize; };
  for (uint64_t s = 0; s < shnum; ++s) {
    if (b.u(section(s) + kShType, 4) != kSymtab) continue;
    const uint64_t sym_off = b.u(section(s) + kShOffset, 8), sym_size = b.u(section(s) + kShSize, 8);
    const uint64_t entsize = std::max<uint64_t>(b.u(section(s) + kShEntsize, 8), kSymSize);
    const uint64_t strtab = b.u(section(s) + kShLink, 4);
    if (!b.ok || strtab >= shnum || !b.fits(sym_off, sym_size)) return "";
    const uint64_t str_off = b.u(section(strtab) + kShOffset, 8), str_size = b.u(section(strtab) + kShSize, 8);
    if (!b.ok || !b.fits(str_off, str_size)) return "";
    const size_t name_len = std::strlen(cache::kKeySymbol);
    for (uint64_t at = sym_off; at + kSymSize <= sym_off + sym_size; at += entsize) {
      const uint64_t name = b.u(at + kStName, 4);
      if (!b.ok || name >= str_size || str_size - name <= name_len ||
          image.compare(str_off + name, name_len + 1, std::string(cache::kKeySymbol) + '\0') != 0)
        continue;
      const uint64_t shndx = b.u(at + kStShndx, 2), value = b.u(at + kStValue, 8), size = b.u(at + kStSize, 8);
      if (!b.ok || shndx == 0 || shndx >= shnum || b.u(section(shndx) + kShType, 4) == kNobits) return "";
      const uint64_t data_off = b.u(section(shndx) + kShOffset, 8), data_size = b.u(section(shndx) + kShSize, 8);
      if (!b.ok || !b.fits(data_off, data_size) || value > data_size || size > data_size - value) return "";
      std::string key = image.substr(data_off + value, size);
      return key.substr(0, key.find('\0'));
    }
  }
  return "";
}

std::string ptx_key(const std::string& ptx) {
  // .global .align 1 .b8 seastar_kernel_key[17] = {48, 49, ...};  (the trailing NUL left out)
  static const std::regex def(std::string(R"(\.b8\s+)") + cache::kKeySymbol + R"(\[\d+\]\s*=\s*\{([0-9,\s]*)\})");
  std::smatch m;
  if (!std::regex_search(ptx, m, def)) return "";
  std::string key;
  static const std::regex byte(R"(\d+)");
  const std::string list = m[1].str();
  for (auto it = std::sregex_iterator(list.begin(), list.end(), byte); it != std::sregex_iterator(); ++it) {
    const int c = std::stoi(it->str().substr(0, 4));
    if (c == 0) break;
    if (c > 255) return "";
    key += static_cast<char>(c);
  }
  return key;
}

}  // namespace

std::string image_key_definition(const std::string& key) {
  return std::string("\n// the cache key this image was built for (read back before the driver loads it)\n"
                     "extern \"C\" __device__ char ") + cache::kKeySymbol + "[] = \"" + key + "\";\n";
}

std::string image_key(const std::string& image, bool is_ptx) {
  return is_ptx ? ptx_key(image) : cubin_key(image);
}

}  // namespace seastar::runtime
