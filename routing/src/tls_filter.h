// TlsFilter: TLS 1.3 over a tcp channel's byte stream (R-SEC-1; routing internal; docs/wire.md
// §2.1, docs/security.md, docs/decisions.md "TLS on tcp channels").
//
// What it promises: off loopback, what a channel carries is encrypted and integrity-protected.
// The keying is an external PSK derived from the topology's channel key,
//   PSK = HKDF-SHA256(K, salt empty, info "postal tls psk v1"), identity "postal-v2",
// with psk_dhe_ke (an ECDHE share per connection: forward secrecy), TLS_AES_128_GCM_SHA256, TLS
// 1.3 only, no certificates, no session tickets, no early data. A peer without the key fails
// the TLS handshake (its binder or Finished does not verify); a changed, dropped or injected
// record fails its AEAD tag and ends the connection. The wire-v2 handshake (HELLO, CHALLENGE,
// AUTH, wire.md §4.5) runs unchanged inside, its MACs bound to this TLS session by the exporter.
//
// How: an SSL object over a BIO of our own (no socket), so the channel's own non-blocking
// socket code stays as it is — ciphertext read from the socket is `feed`-ed in (read in place,
// not copied), plaintext comes out of `read_plain`; plaintext given to `write_plain` becomes
// ciphertext appended to `out()`, which the caller writes to the socket and marks `sent`.
// Nothing here touches a socket or blocks.
//
// Bounds (R-FLOW-4): `feed` takes what one socket read returned; OpenSSL holds at most one
// record (16 KiB + overhead) beyond it. `out()` grows only by what the caller encrypts: the
// callers encrypt a bounded round and only once the previous one is sent.
//
// Thread safety: none; a TlsFilter belongs to one connection, used under its owner's lock. A
// TlsContext is immutable after `make` and shared by a client's or a server's connections.
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "postal/routing/channel_key.h"

struct ssl_st;
struct ssl_ctx_st;
struct bio_st;
struct bio_method_st;

namespace postal::routing::internal {

// The TLS configuration of one side of a channel (a client's or a server's), with the PSK.
class TlsContext {
 public:
  enum class Role { kClient, kServer };
  // Internal when libssl cannot set itself up (an error that names the OpenSSL reason).
  static absl::StatusOr<std::shared_ptr<const TlsContext>> make(Role role, const ChannelKey& key);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  Role role() const { return role_; }
  const std::array<uint8_t, 32>& psk() const { return psk_; }

 private:
  friend class TlsFilter;
  TlsContext() = default;
  Role role_ = Role::kClient;
  ssl_ctx_st* ctx_ = nullptr;
  bio_method_st* bio_method_ = nullptr;  // TlsFilter's BIO (its callbacks below)
  std::array<uint8_t, 32> psk_{};
};

class TlsFilter {
 public:
  // One connection's TLS state; the client's first flight (ClientHello) is in out() at once.
  static absl::StatusOr<std::unique_ptr<TlsFilter>> make(std::shared_ptr<const TlsContext> ctx);
  ~TlsFilter();
  TlsFilter(const TlsFilter&) = delete;
  TlsFilter& operator=(const TlsFilter&) = delete;

  // Ciphertext the peer sent, read in place: the bytes must stay valid until read_plain returns
  // 0 or an error, or handshake returns without done() — by then all of them were consumed.
  void feed(std::string_view ciphertext);
  // Advances the handshake with what was fed (its answer goes to out()). OK while it goes on and
  // once done(); an error (an alert, a peer without the key, bytes that are not TLS) means the
  // connection must end: the message says why and what to check.
  absl::Status handshake();
  bool done() const { return done_; }
  // Plaintext into [dst, dst + cap): how many bytes (0: more ciphertext is needed). An error —
  // a record that fails its tag (changed on the way), an alert, the peer's close_notify — ends
  // the connection.
  absl::StatusOr<size_t> read_plain(char* dst, size_t cap);
  // Encrypts `plain` (after done()) into out().
  absl::Status write_plain(std::string_view plain);
  // Encrypts the first `budget` bytes (at most) of the gathered buffers as one write, coalescing
  // small frames into full records; how many plaintext bytes it took (all of them, up to budget).
  absl::StatusOr<size_t> write_plain(const iovec* iov, size_t count, size_t budget);
  // Ciphertext waiting for the socket, and how much of it the socket took.
  std::string_view out() const { return std::string_view(out_).substr(out_sent_); }
  void sent(size_t n);
  // R-SEC-1, wire.md §4.5: X, the TLS exporter (RFC 8446 §7.5, label
  // "EXPORTER-postal-channel-v2", empty context, 32 bytes) the handshake's MACs cover. After
  // done().
  std::string exporter() const;

 private:
  friend class TlsContext;
  TlsFilter() = default;
  // The error of an SSL call that returned `ret`, or OK when it only wants more input.
  absl::Status check(int ret, std::string_view what);
  // The BIO's callbacks: reads take from in_, writes append to out_ (OpenSSL's record buffers
  // are the only copy between the socket and the cipher).
  static int bio_read(bio_st* bio, char* dst, size_t len, size_t* got);
  static int bio_write(bio_st* bio, const char* src, size_t len, size_t* put);
  static long bio_ctrl(bio_st* bio, int cmd, long num, void* ptr);
  static int bio_create(bio_st* bio);

  std::shared_ptr<const TlsContext> ctx_;
  ssl_st* ssl_ = nullptr;
  std::string_view in_;  // fed and not yet read by OpenSSL
  std::string out_;
  size_t out_sent_ = 0;
  std::string staging_;  // write_plain(iovec): small frames gathered into records
  bool done_ = false;
};

// The first byte of a TLS record carrying a handshake (a ClientHello): a server in mode auto on
// loopback tells TLS from a wire-v2 HELLO by it (wire.md §2.1: a HELLO's first byte is 0x49).
inline constexpr uint8_t kTlsHandshakeRecord = 0x16;

}  // namespace postal::routing::internal
