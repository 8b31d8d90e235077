/** \file
 * The counter-based mixing shared by the sampler and the graph generators: a draw is a pure
 * function of (seed, what is drawn, index), so results never depend on thread count or order.
 */
#pragma once

#include <cstdint>

namespace seastar::util {

/// splitmix64's finaliser: a bijective mix, so distinct counters give independent-looking words.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace seastar::util
