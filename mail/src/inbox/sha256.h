// sha256.h — SHA-256 (FIPS 180-4), self-contained, for the inbox fingerprint (M-INBOX-2).
//
// Kept in one file rather than linking OpenSSL: the fingerprint is the only hash the mail layer
// needs, and a fixed, dependency-free implementation keeps its value stable across builds
// (docs/decisions.md, "Inbox").
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace postal::mail::inbox {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  // The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> finish();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t used_ = 0;
  uint64_t total_ = 0;
};

// The digest of `data` as 64 lowercase hex digits.
// A digest in lowercase hex (64 characters).
std::string to_hex(const std::array<uint8_t, 32>& digest);
std::string sha256_hex(std::string_view data);

}  // namespace postal::mail::inbox
