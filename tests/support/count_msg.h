// CountMsg: a registered message that carries one number, for tests that only need to send
// something countable through ports and channels. One definition, registered once per binary.
#pragma once

#include <cstdint>

#include "postal/wire/type_registry.h"

namespace postal::test_support {

struct CountMsg {
  int64_t n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

}  // namespace postal::test_support

POSTAL_MESSAGE(postal::test_support::CountMsg, "test.support.CountMsg");
