// SavinaRandom: the pseudo-random generator the Savina suite adopted so that every runtime's
// port draws the same numbers (a 16-bit linear congruential generator; the CAF port's
// `pseudo_random`). Used where the port uses it: Concurrent Dictionary and Banking.
#pragma once

#include <cstdint>

namespace postal::savina {

class SavinaRandom {
 public:
  explicit SavinaRandom(int64_t seed = 74755) : value_(seed) {}

  int64_t next_long() {
    value_ = ((value_ * 1309) + 13849) & 65535;
    return value_;
  }
  int next_int() { return static_cast<int>(next_long()); }
  // In [0, exclusive_max).
  int next_int(int exclusive_max) { return static_cast<int>(next_long() % exclusive_max); }
  // In (0, 1].
  double next_double() { return 1.0 / static_cast<double>(next_long() + 1); }

 private:
  int64_t value_;
};

}  // namespace postal::savina
