// ConnectionWire (R-SEC-1): a server connection's plaintext or TLS byte stream.
#include "connection_wire.h"

#include <cstring>

namespace postal::routing::internal::stream_server {
namespace {

// Plaintext opened per read_plain: one TLS record at most.
constexpr size_t kTlsRecord = 16 << 10;

}  // namespace

ConnectionWire::Opened ConnectionWire::open(size_t n, v2::FrameSplitter& splitter,
                                            absl::Status& why) {
  const std::string_view in(cipher_.data(), n);
  if (state_ == State::kUndecided) {
    const bool tls_hello = !in.empty() && static_cast<uint8_t>(in[0]) == kTlsHandshakeRecord;
    if (tls_hello && use_ == TlsUse::kNever) {
      state_ = State::kPlain;  // a plaintext REJECT: the client's TLS fails on it, for good
      return Opened::kRefuseTls;
    }
    if (!tls_hello && use_ == TlsUse::kMust) {
      state_ = State::kPlain;  // the REJECT goes out in plaintext, which this client reads
      return Opened::kRefusePlain;
    }
    if (!tls_hello) {
      state_ = State::kPlain;
      std::memcpy(splitter.prepare(n), in.data(), n);
      splitter.commit(n);
      return Opened::kOk;
    }
    absl::StatusOr<std::unique_ptr<TlsFilter>> tls = TlsFilter::make(ctx_);
    if (!tls.ok()) {
      why = tls.status();
      return Opened::kFailed;
    }
    tls_ = *std::move(tls);
    state_ = State::kTls;
  }
  tls_->feed(in);
  if (!tls_->done()) {
    if (why = tls_->handshake(); !why.ok()) return Opened::kFailed;
    if (!tls_->done()) return Opened::kOk;  // its flight goes out with the next seal
    exporter_ = tls_->exporter();
  }
  // R-FLOW-4: what opens here is bounded by the read and one record held in OpenSSL.
  for (;;) {
    absl::StatusOr<size_t> got = tls_->read_plain(splitter.prepare(kTlsRecord), kTlsRecord);
    if (!got.ok()) {
      splitter.commit(0);
      why = got.status();
      return Opened::kFailed;
    }
    splitter.commit(*got);
    if (*got == 0) return Opened::kOk;
  }
}

absl::Status ConnectionWire::seal(std::string& out) {
  if (tls_ == nullptr) return absl::OkStatus();
  // Before the TLS handshake ends no frame is made (nothing was read yet), so `out` is empty.
  if (tls_->done() && !out.empty()) {
    if (absl::Status s = tls_->write_plain(out); !s.ok()) return s;
  }
  out.assign(tls_->out());
  tls_->sent(out.size());
  return absl::OkStatus();
}

}  // namespace postal::routing::internal::stream_server
