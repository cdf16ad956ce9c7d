// must(): unwraps a test fixture's StatusOr that must hold a value.
//
// A fixture that fails to build (an address that does not parse, a client that cannot attach) is
// a bug in the test itself, not an outcome under test: must() prints the status and aborts.
#pragma once

#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/status/statusor.h"

namespace postal::test_support {

template <class T>
T must(absl::StatusOr<T> value) {
  if (!value.ok()) {
    std::cerr << "test fixture failed: " << value.status() << "\n";
    std::abort();
  }
  return *std::move(value);
}

}  // namespace postal::test_support
