// UntrustedScope: marks the current thread as decoding bytes from outside the process.
//
// Decoders of network input (`wire::decode_into`, the wire v2 envelope decoder) hold one while
// they run; code below them that keeps something process-wide because of what it decodes — the
// runtime's label intern table — asks `active()` and applies its bound for untrusted input
// (R-FLOW-4). Scopes nest; the state is per thread, so nothing else is affected.
#pragma once

namespace postal::wire {

class UntrustedScope {
 public:
  UntrustedScope() { ++depth_; }
  ~UntrustedScope() { --depth_; }
  UntrustedScope(const UntrustedScope&) = delete;
  UntrustedScope& operator=(const UntrustedScope&) = delete;

  static bool active() { return depth_ > 0; }

 private:
  inline static thread_local int depth_ = 0;
};

}  // namespace postal::wire
