// The streams cereal reads and writes through, reused per thread (codec.h's encode and decode).
//
// cereal's archives need a std::ostream/std::istream. A fresh std::ostringstream or
// std::istringstream per message costs more than encoding a small message (the stream's locale
// set-up, and istringstream copies its input); these leases hand out one stream per thread,
// pointed at the caller's string or bytes, with no copy. A nested encode or decode on the same
// thread (an Any inside a message) gets a stream of its own.
#pragma once

#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace postal::wire::internal {

struct OutputSlot;
struct InputSlot;

// Writes into `target` (appending) for the lease's lifetime.
class OutputLease {
 public:
  explicit OutputLease(std::string& target);
  ~OutputLease();
  OutputLease(const OutputLease&) = delete;
  OutputLease& operator=(const OutputLease&) = delete;
  std::ostream& stream();

 private:
  OutputSlot* slot_;
  std::unique_ptr<OutputSlot> own_;  // set when the thread's slot was taken (nesting)
};

// Reads `bytes` in place for the lease's lifetime; tellg() is the offset into them.
class InputLease {
 public:
  explicit InputLease(std::string_view bytes);
  ~InputLease();
  InputLease(const InputLease&) = delete;
  InputLease& operator=(const InputLease&) = delete;
  std::istream& stream();

 private:
  InputSlot* slot_;
  std::unique_ptr<InputSlot> own_;
};

}  // namespace postal::wire::internal
