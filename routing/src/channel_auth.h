// The handshake's proofs (R-SEC-1, docs/wire.md §4.5; routing internal). With K the channel key,
// H the HELLO body exactly as sent (72 bytes) and X the TLS exporter of the connection when it
// runs over TLS (tls_filter.h), else empty:
//
//   server_mac = HMAC-SHA256(K, "postal-v2 server\0" || H || server_nonce || X)
//   client_mac = HMAC-SHA256(K, "postal-v2 client\0" || H || server_nonce || server_mac || X)
//
// Both cover the whole HELLO (session id, flags, limits, the client's nonce) and the server's
// fresh nonce, so neither a HELLO nor a proof recorded on one connection verifies on another;
// X binds them to the TLS session, so a proof cannot be relayed from one TLS session to another.
// MACs compare in constant time (CRYPTO_memcmp).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "postal/routing/channel_key.h"

namespace postal::routing::internal::auth {

using Nonce = std::array<uint8_t, 32>;
using Mac = std::array<uint8_t, 32>;

// 32 bytes from OpenSSL's CSPRNG (aborts the process if it cannot be seeded: a handshake
// without a fresh nonce would be replayable).
Nonce random_nonce();
Mac server_mac(const ChannelKey& key, std::string_view hello_body, const Nonce& server_nonce,
               std::string_view tls_exporter = {});
Mac client_mac(const ChannelKey& key, std::string_view hello_body, const Nonce& server_nonce,
               const Mac& server_mac, std::string_view tls_exporter = {});
// Constant time.
bool equal(const Mac& a, const Mac& b);
// Says once per process and side ("channel client", "channel server") that an end without a key
// runs unauthenticated (wire.md §4.5 rule 7).
void note_unauthenticated(std::string_view side);

}  // namespace postal::routing::internal::auth
