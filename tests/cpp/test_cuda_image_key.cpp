// The key a CUDA image carries (runtime/cuda/cuda_image_key.h), read from a cubin and a PTX module
// NVRTC built from `extern "C" __global__ void k(float* p) { p[threadIdx.x] *= 2; }` through
// compile_cuda (tests/cpp/data; the key is the one in the cache entry's file name). The mangled
// images run under the sanitizer build too (scripts/sanitize.sh): no read may leave the image.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "runtime/cuda/cuda_image_key.h"

namespace {

using seastar::runtime::image_key;

std::string read(const std::string& name) {
  std::ifstream in(std::string(SEASTAR_TEST_DATA_DIR) + "/" + name, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const char* const kCubinKey = "83b201bc3c0eb0f0";
const char* const kPtxKey = "bb2ea4f1be0caf34";

TEST(CudaImageKey, ReadsTheKeyOfACubinAndOfPtx) {
  const std::string cubin = read("image_key.cubin"), ptx = read("image_key.ptx");
  ASSERT_GT(cubin.size(), 1000u);
  EXPECT_EQ(image_key(cubin, false), kCubinKey);
  EXPECT_EQ(image_key(ptx, true), kPtxKey);
}

TEST(CudaImageKey, AnImageWithoutTheSymbolHasNoKey) {
  std::string cubin = read("image_key.cubin"), ptx = read("image_key.ptx");
  for (std::string* image : {&cubin, &ptx}) {
    const size_t at = image->find(seastar::runtime::cache::kKeySymbol);
    ASSERT_NE(at, std::string::npos);
    (*image)[at + 3] = 'X';  // seaXtar_kernel_key
  }
  EXPECT_EQ(image_key(cubin, false), "");
  EXPECT_EQ(image_key(ptx, true), "");
  EXPECT_EQ(image_key("", false), "");
  EXPECT_EQ(image_key("", true), "");
  EXPECT_EQ(image_key(read("image_key.ptx"), false), "");  // PTX is not ELF
}

TEST(CudaImageKey, PtxBytesOutOfRangeAreNoKey) {
  std::string ptx = read("image_key.ptx");
  const size_t list = ptx.find('{', ptx.find(seastar::runtime::cache::kKeySymbol));
  ptx.insert(list + 1, "300, ");
  EXPECT_EQ(image_key(ptx, true), "");
}

TEST(CudaImageKey, EveryTruncatedCubinReadsAsNoKeyOrItsKey) {
  const std::string cubin = read("image_key.cubin");
  for (size_t n = 0; n < cubin.size(); ++n) {
    const std::string key = image_key(cubin.substr(0, n), false);
    ASSERT_TRUE(key.empty() || key == kCubinKey) << n;
    if (n < 0x40) ASSERT_TRUE(key.empty()) << n;
  }
}

TEST(CudaImageKey, MangledCubinsNeverReadOutside) {
  const std::string cubin = read("image_key.cubin");
  const uint64_t shoff = *reinterpret_cast<const uint64_t*>(cubin.data() + 0x28);
  std::mt19937_64 rng(11);
  int keys = 0, other = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string image = cubin;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < edits; ++i) {
      // the header, the section table (offsets, sizes, links) or anywhere
      const uint64_t pick = rng() % 3;
      const size_t at = pick == 0 ? rng() % 0x40 : pick == 1 ? shoff + rng() % (cubin.size() - shoff) : rng() % cubin.size();
      const uint64_t kind = rng() % 4;
      image[at] = static_cast<char>(kind == 0 ? 0 : kind == 1 ? 0xff : kind == 2 ? 0x7f : rng());
    }
    const std::string key = image_key(image, false);
    ASSERT_LE(key.size(), image.size());
    (key == kCubinKey ? keys : other) += 1;
  }
  // most edits miss the fields that lead to the key; enough hit them to exercise every check
  EXPECT_GT(keys, 1000);
  EXPECT_GT(other, 1000);
}

}  // namespace
