// StreamClientCore's TLS (R-SEC-1; tls_filter.h is the mechanism, tls_policy.h the policy):
// after connect, a connection the policy puts under TLS runs the TLS handshake before HELLO;
// then every byte written is sealed into records and every byte read is opened before the frame
// splitter. The wire-v2 handshake inside is unchanged but for X, the TLS exporter its MACs
// cover (wire.md §4.5). Every function here runs holding io_mu_.
#include <sys/socket.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"
#include "stream_client.h"
#include "tls_policy.h"

namespace postal::routing::internal {
namespace {

// Plaintext sealed per write round: ciphertext waiting for the socket stays under this plus
// the records' overhead (R-FLOW-4), as the plaintext path keeps at most a round in flight.
constexpr size_t kTlsRound = 256 << 10;
// Plaintext opened per read_plain: one TLS record at most.
constexpr size_t kTlsRecord = 16 << 10;

}  // namespace

void StreamClientCore::begin_handshake() {
  tls_.reset();
  tls_exporter_.clear();
  if (tls_ctx_ == nullptr) return send_hello();
  boost::system::error_code ec;
  const Endpoint peer = socket_.remote_endpoint(ec);
  if (ec) return link_failed(gen_, absl::StrCat("getpeername: ", os_error(ec)));
  if (!client_uses_tls(options_, peer)) return send_hello();  // auto, on loopback
  absl::StatusOr<std::unique_ptr<TlsFilter>> tls = TlsFilter::make(tls_ctx_);
  if (!tls.ok()) return tls_failed(gen_, tls.status());
  tls_ = *std::move(tls);
  // The dial timer bounds the TLS handshake with the rest (dial_timeout, R-FLOW-3); the
  // splitter stays at the handshake limit until WELCOME.
  splitter_ = v2::FrameSplitter(v2::kHandshakeFrameLimit);
  flush_writes();  // the ClientHello
}

bool StreamClientCore::on_tls_read(uint64_t gen, std::string_view ciphertext) {
  tls_->feed(ciphertext);
  if (!tls_->done()) {
    if (absl::Status s = tls_->handshake(); !s.ok()) {
      tls_failed(gen, s);
      return false;
    }
    if (!tls_->done()) {
      flush_writes();  // the handshake's next flight, if any
      return gen == gen_ && !closed();
    }
    tls_exporter_ = tls_->exporter();
    send_hello();  // writes the client's Finished, then HELLO (sealed)
    if (gen != gen_ || closed()) return false;
  }
  // R-FLOW-4: what opens here is bounded by what was fed (one read) and one record in OpenSSL.
  for (;;) {
    absl::StatusOr<size_t> n = tls_->read_plain(splitter_.prepare(kTlsRecord), kTlsRecord);
    if (!n.ok()) {
      splitter_.commit(0);
      tls_failed(gen, n.status());
      return false;
    }
    splitter_.commit(*n);
    if (*n == 0) break;
  }
  if (!tls_->out().empty()) flush_writes();  // a KeyUpdate's answer
  return gen == gen_ && !closed();
}

void StreamClientCore::tls_failed(uint64_t gen, const absl::Status& why) {
  if (gen != gen_ || closed()) return;
  if (tls_ != nullptr && !tls_->done() && absl::IsDataLoss(why)) {
    // The peer refused the PSK, or answered with something that is not TLS: retrying cannot
    // help, as for a server_mac that does not verify (wire.md §4.5 rule 7).
    return close_channel(
        runtime::TransportReason::kChannelClosed,
        absl::FailedPreconditionError(absl::StrCat(
            "channel ", addr_text_, ": the TLS handshake failed (R-SEC-1): ", why.message(),
            "; the server does not hold this topology's secret, or does not speak TLS (its tls "
            "mode is off, or it is not a postal channel server)")),
        /*rejected=*/true);
  }
  link_failed(gen, absl::StrCat("TLS: ", why.message(),
                                tls_ != nullptr && tls_->done()
                                    ? " (a record failed its integrity check or the peer ended "
                                      "the TLS session: the connection is dropped, R-SEC-1)"
                                    : ""));
}

StreamClientCore::Written StreamClientCore::send_tls(int& err) {
  for (;;) {
    const std::string_view out = tls_->out();
    if (out.empty()) return Written::kAll;
    const ssize_t n =
        ::send(socket_.native_handle(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Written::kFull;
      err = errno;
      return Written::kFailed;
    }
    wrote_since_tick_ = true;
    tls_->sent(static_cast<size_t>(n));
    if (static_cast<size_t>(n) < out.size()) return Written::kFull;
  }
}

StreamClientCore::Written StreamClientCore::seal(const iovec* iov, size_t count) {
  absl::StatusOr<size_t> taken = tls_->write_plain(iov, count, kTlsRound);
  if (!taken.ok()) {
    tls_error_ = absl::StrCat("TLS: ", taken.status().message());
    return Written::kFailed;
  }
  // Sealed counts as written (the server may have it once the records leave): conservative for
  // DeliveryFailure::maybe_delivered, and a lost connection resends from the server's WELCOME.
  if (advance(*taken)) release_held();
  return Written::kAll;
}

void StreamClientCore::send_now(std::string_view frame) {
  if (tls_ != nullptr) {
    if (!tls_->done() || !tls_->write_plain(frame).ok()) return;
    const std::string_view out = tls_->out();
    [[maybe_unused]] const ssize_t n =
        ::send(socket_.native_handle(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return;
  }
  if (sink_ != nullptr) {
    const iovec iov{const_cast<char*>(frame.data()), frame.size()};
    [[maybe_unused]] const ssize_t n = sink_->writev(&iov, 1);
    return;
  }
  [[maybe_unused]] const ssize_t n =
      ::send(socket_.native_handle(), frame.data(), frame.size(), MSG_NOSIGNAL);
}

}  // namespace postal::routing::internal
