// What crashed in the extension: an unsigned long written to an ostream.
#include <sstream>
#include <string>

extern "C" int seastar_test_format(unsigned long n) {
  std::ostringstream s;
  s << n;
  return static_cast<int>(s.str().size());
}
