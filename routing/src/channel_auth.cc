// The handshake's HMAC-SHA256 proofs (R-SEC-1, docs/wire.md §4.5), with OpenSSL's libcrypto.
#include "channel_auth.h"

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "absl/strings/str_cat.h"
#include "postal/runtime/logger.h"
#include "postal/wire/absl_compat.h"

namespace postal::routing::internal::auth {
namespace {

// The labels include their terminating NUL (wire.md §4.5: "postal-v2 server\0").
constexpr std::string_view kServerLabel{"postal-v2 server\0", 17};
constexpr std::string_view kClientLabel{"postal-v2 client\0", 17};

Mac hmac(const ChannelKey& key, std::initializer_list<std::string_view> parts) {
  std::string input;  // under 200 bytes: one-shot HMAC (HMAC_CTX is deprecated in OpenSSL 3)
  for (std::string_view p : parts) input.append(p);
  Mac out{};
  unsigned int len = 0;
  const bool ok = HMAC(EVP_sha256(), key.bytes().data(), static_cast<int>(key.bytes().size()),
                       reinterpret_cast<const unsigned char*>(input.data()), input.size(),
                       out.data(), &len) != nullptr &&
                  len == out.size();
  if (!ok) {  // only when libcrypto cannot allocate: no proof can be made or checked
    runtime::Logger::routing().error("HMAC-SHA256 failed in libcrypto; aborting");
    std::abort();
  }
  return out;
}

std::string_view view(const std::array<uint8_t, 32>& a) {
  return {reinterpret_cast<const char*>(a.data()), a.size()};
}

}  // namespace

Nonce random_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    runtime::Logger::routing().error("RAND_bytes failed: no fresh nonce for a handshake; aborting");
    std::abort();
  }
  return n;
}

Mac server_mac(const ChannelKey& key, std::string_view hello_body, const Nonce& server_nonce,
               std::string_view tls_exporter) {
  return hmac(key, {kServerLabel, hello_body, view(server_nonce), tls_exporter});
}

Mac client_mac(const ChannelKey& key, std::string_view hello_body, const Nonce& server_nonce,
               const Mac& server_mac, std::string_view tls_exporter) {
  return hmac(key, {kClientLabel, hello_body, view(server_nonce), view(server_mac), tls_exporter});
}

void note_unauthenticated(std::string_view side) {
  static std::atomic<bool> client_said{false};
  static std::atomic<bool> server_said{false};
  std::atomic<bool>& said = side == "channel server" ? server_said : client_said;
  if (said.exchange(true)) return;
  runtime::Logger::routing().info(absl::StrCat(
      sv(side),
      ": no topology secret (ChannelOptions::key): channels of this process are "
      "unauthenticated; anyone who can connect may post and spawn (docs/security.md)"));
}

bool equal(const Mac& a, const Mac& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

}  // namespace postal::routing::internal::auth
