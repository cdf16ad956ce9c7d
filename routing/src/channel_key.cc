// ChannelKey (R-SEC-1): HKDF-SHA256 with OpenSSL's libcrypto, secrets from getrandom.
#include "postal/routing/channel_key.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include "absl/strings/str_cat.h"

namespace postal::routing {
namespace {

constexpr std::string_view kInfo = "postal channel key v2";
constexpr size_t kMinSecretBytes = 16;
constexpr size_t kMaxSecretBytes = 4096;

}  // namespace

absl::StatusOr<std::shared_ptr<const ChannelKey>> ChannelKey::derive(std::string_view secret) {
  if (secret.size() < kMinSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a topology secret needs at least ",
                                                   kMinSecretBytes, " bytes; got ", secret.size()));
  }
  std::shared_ptr<ChannelKey> key(new ChannelKey());
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  size_t len = key->key_.size();
  const bool ok =
      ctx != nullptr && EVP_PKEY_derive_init(ctx) > 0 &&
      EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_key(ctx, reinterpret_cast<const unsigned char*>(secret.data()),
                                 static_cast<int>(secret.size())) > 0 &&
      EVP_PKEY_CTX_add1_hkdf_info(ctx, reinterpret_cast<const unsigned char*>(kInfo.data()),
                                  static_cast<int>(kInfo.size())) > 0 &&
      EVP_PKEY_derive(ctx, key->key_.data(), &len) > 0 && len == key->key_.size();
  EVP_PKEY_CTX_free(ctx);  // frees (and cleanses) its copy of the secret
  if (!ok) return absl::InternalError("HKDF-SHA256 of the topology secret failed (libcrypto)");
  return std::shared_ptr<const ChannelKey>(std::move(key));
}

absl::StatusOr<std::string> ChannelKey::random_secret() {
  std::string secret(kSecretBytes, '\0');
  size_t got = 0;
  while (got < secret.size()) {
    const ssize_t n = ::getrandom(secret.data() + got, secret.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  return secret;
}

absl::StatusOr<std::string> ChannelKey::read_secret_fd(int fd) {
  std::string secret(kMaxSecretBytes, '\0');
  size_t got = 0;
  int err = 0;
  while (got < secret.size()) {
    const ssize_t n = ::read(fd, secret.data() + got, secret.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (err != 0) {
    wipe(secret);
    return absl::InvalidArgumentError(
        absl::StrCat("reading the topology secret from fd ", fd, ": ", std::strerror(err)));
  }
  OPENSSL_cleanse(secret.data() + got, secret.size() - got);
  secret.resize(got);
  return secret;
}

void ChannelKey::wipe(std::string& secret) {
  OPENSSL_cleanse(secret.data(), secret.size());
  secret.clear();
}

ChannelKey::~ChannelKey() { OPENSSL_cleanse(key_.data(), key_.size()); }

}  // namespace postal::routing
