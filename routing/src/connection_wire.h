// ConnectionWire: the byte stream of one accepted server connection — plaintext, or TLS records
// opened into the frame splitter and frames sealed into records (R-SEC-1; routing internal; the
// mechanism is tls_filter.h, the policy tls_policy.h). Its Connection (stream_connection.h)
// keeps its framing, its handshake and its bounds unchanged; only the bytes pass through here.
//
// A tcp connection is *undecided* until its first bytes: a TLS record (0x16) or a wire-v2 HELLO
// (0x49, its length's low byte: wire.md §2.1) — which one the server's TlsUse for this peer
// allows decides whether it goes on or is refused. An ipc connection is plaintext from the start.
// I/O thread only.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "frames_v2.h"
#include "tls_filter.h"
#include "tls_policy.h"

namespace postal::routing::internal::stream_server {

class ConnectionWire {
 public:
  // `tcp`: the connection may carry TLS (decided by its first bytes under `use`); `ctx` is the
  // server's TLS context (null when it has none: `use` is then kNever).
  ConnectionWire(bool tcp, TlsUse use, std::shared_ptr<const TlsContext> ctx)
      : state_(tcp ? State::kUndecided : State::kPlain), use_(use), ctx_(std::move(ctx)) {}

  // Plaintext read straight into the splitter; otherwise reads go to `read_buffer`.
  bool reads_plain() const { return state_ == State::kPlain; }
  char* read_buffer(size_t n) {
    if (cipher_.size() < n) cipher_.resize(n);
    return cipher_.data();
  }
  bool tls() const { return tls_ != nullptr; }

  // What the first bytes, or a read, led to.
  enum class Opened {
    kOk,           // any plaintext is in the splitter
    kRefusePlain,  // a plaintext HELLO where TLS is required: REJECT it in plaintext
    kRefuseTls,    // a TLS ClientHello where TLS is off (or no key): REJECT in plaintext
    kFailed,       // TLS failed (handshake, a record's tag, an alert): `why`; close
  };
  // The `n` bytes read into read_buffer (undecided, or TLS).
  Opened open(size_t n, v2::FrameSplitter& splitter, absl::Status& why);
  // Frames in `out` become ciphertext in `out` (and the handshake's flights, when TLS is under
  // way). OK for plaintext connections (nothing to do); an error ends the connection.
  absl::Status seal(std::string& out);
  // After the TLS handshake: X of wire.md §4.5 (empty on plaintext).
  const std::string& exporter() const { return exporter_; }

 private:
  enum class State { kUndecided, kPlain, kTls };

  State state_;
  const TlsUse use_;
  std::shared_ptr<const TlsContext> ctx_;
  std::unique_ptr<TlsFilter> tls_;
  std::vector<char> cipher_;  // what a read returned (R-FLOW-4: its size is the read's)
  std::string exporter_;
};

}  // namespace postal::routing::internal::stream_server
