// ChannelKey: the key every channel of a topology authenticates with (R-SEC-1, docs/security.md).
//
// A topology has one secret (`postal up` draws 32 random bytes per run); the channel key is
// K = HKDF-SHA256(secret, salt empty, info "postal channel key v2"), 32 bytes. A client and a
// server holding the same K prove it to each other in the handshake (docs/wire.md §4.5) before
// any envelope is decoded; ends without a key behave as before (and log it once).
//
// How a secret reaches a proc without appearing in argv or in anything other users can read:
// `read_secret_fd` reads it from an inherited pipe (a launched proc's `--secret-fd N`, or
// `POSTAL_SECRET_FD=N`) and closes the fd. A program embedding a Node derives a key itself and
// sets it in ChannelOptions::key.
//
// Key material is zeroed (OPENSSL_cleanse) when a ChannelKey is destroyed; callers zero the
// secrets they hold with `wipe`. Thread safety: a ChannelKey is immutable; share it freely.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace postal::routing {

class ChannelKey {
 public:
  static constexpr size_t kSecretBytes = 32;
  static constexpr size_t kKeyBytes = 32;

  // K from a secret of at least 16 bytes (InvalidArgument otherwise, or when HKDF fails).
  static absl::StatusOr<std::shared_ptr<const ChannelKey>> derive(std::string_view secret);
  // kSecretBytes random bytes from the kernel (getrandom); Internal when it fails.
  static absl::StatusOr<std::string> random_secret();
  // Reads a secret from `fd` (to end of file, at most 4096 bytes) and closes `fd`.
  static absl::StatusOr<std::string> read_secret_fd(int fd);
  // Zeroes and clears a secret held in a string.
  static void wipe(std::string& secret);

  ChannelKey(const ChannelKey&) = delete;
  ChannelKey& operator=(const ChannelKey&) = delete;
  ~ChannelKey();

  const std::array<uint8_t, kKeyBytes>& bytes() const { return key_; }

 private:
  ChannelKey() = default;
  std::array<uint8_t, kKeyBytes> key_{};
};

}  // namespace postal::routing
