// TlsFilter and TlsContext (R-SEC-1): TLS 1.3 with an external PSK over a BIO of our own, libssl.
#include "tls_filter.h"

#include <algorithm>
#include <cstring>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>

#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"

namespace postal::routing::internal {
namespace {

constexpr std::string_view kPskInfo = "postal tls psk v1";
constexpr std::string_view kPskIdentity = "postal-v2";
constexpr std::string_view kExporterLabel = "EXPORTER-postal-channel-v2";
// TLS_AES_128_GCM_SHA256 (RFC 8446 B.4): the one suite, and the PSK's hash (SHA-256).
constexpr unsigned char kAes128GcmSha256[] = {0x13, 0x01};
// Plaintext gathered into one SSL_write: four full records.
constexpr size_t kStagingBytes = 64 << 10;
// The most plaintext one TLS record carries (RFC 8446 §5.1).
constexpr size_t kRecordBytes = 16 << 10;

// The OpenSSL error queue of this thread, as text (and cleared).
std::string ssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no OpenSSL reason" : out;
}

// The PSK as a TLS 1.3 resumption-style session: OpenSSL's way to offer and accept an
// external PSK (s_client/s_server build the same). Ownership goes to the caller (OpenSSL).
SSL_SESSION* psk_session(SSL* ssl, const std::array<uint8_t, 32>& psk) {
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kAes128GcmSha256);
  if (cipher == nullptr) return nullptr;
  SSL_SESSION* s = SSL_SESSION_new();
  if (s == nullptr || SSL_SESSION_set1_master_key(s, psk.data(), psk.size()) != 1 ||
      SSL_SESSION_set_cipher(s, cipher) != 1 ||
      SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(s);
    return nullptr;
  }
  return s;
}

const TlsContext& context_of(SSL* ssl) {
  return *static_cast<const TlsContext*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
}

int use_psk(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* id_len,
            SSL_SESSION** sess) {
  *sess = nullptr;
  SSL_SESSION* s = psk_session(ssl, context_of(ssl).psk());
  if (s == nullptr) return 0;  // fails the handshake: nothing else may be offered
  if (md != nullptr && SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(s)) != md) {
    SSL_SESSION_free(s);  // after a HelloRetryRequest for another hash: not usable
    return 1;
  }
  *sess = s;
  *id = reinterpret_cast<const unsigned char*>(kPskIdentity.data());
  *id_len = kPskIdentity.size();
  return 1;
}

int find_psk(SSL* ssl, const unsigned char* id, size_t id_len, SSL_SESSION** sess) {
  *sess = nullptr;
  // Another identity: no PSK, and with no certificate the handshake then fails.
  if (std::string_view(reinterpret_cast<const char*>(id), id_len) != kPskIdentity) return 1;
  *sess = psk_session(ssl, context_of(ssl).psk());
  return *sess == nullptr ? 0 : 1;
}

bool derive_psk(const ChannelKey& key, std::array<uint8_t, 32>& out) {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  size_t len = out.size();
  const bool ok =
      ctx != nullptr && EVP_PKEY_derive_init(ctx) > 0 &&
      EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_key(ctx, key.bytes().data(), static_cast<int>(key.bytes().size())) >
          0 &&
      EVP_PKEY_CTX_add1_hkdf_info(ctx, reinterpret_cast<const unsigned char*>(kPskInfo.data()),
                                  static_cast<int>(kPskInfo.size())) > 0 &&
      EVP_PKEY_derive(ctx, out.data(), &len) > 0 && len == out.size();
  EVP_PKEY_CTX_free(ctx);
  return ok;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TlsContext>> TlsContext::make(Role role,
                                                                   const ChannelKey& key) {
  std::shared_ptr<TlsContext> c(new TlsContext());
  c->role_ = role;
  ERR_clear_error();
  if (!derive_psk(key, c->psk_)) {
    return absl::InternalError(absl::StrCat("HKDF of the TLS PSK failed: ", ssl_errors()));
  }
  c->ctx_ = SSL_CTX_new(role == Role::kClient ? TLS_client_method() : TLS_server_method());
  SSL_CTX* ctx = c->ctx_;
  const bool ok = ctx != nullptr && SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) == 1 &&
                  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1 &&
                  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256") == 1 &&
                  SSL_CTX_set_num_tickets(ctx, 0) == 1 && SSL_CTX_set_app_data(ctx, c.get()) == 1;
  if (!ok) {
    return absl::InternalError(
        absl::StrCat("setting up TLS 1.3 (libssl) failed: ", ssl_errors(),
                     "; this OpenSSL cannot carry channels with tls on (R-SEC-1)"));
  }
  // No resumption, no tickets, no early data: every connection is a full PSK + ECDHE handshake.
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  c->bio_method_ = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "postal channel");
  if (c->bio_method_ == nullptr || BIO_meth_set_read_ex(c->bio_method_, TlsFilter::bio_read) != 1 ||
      BIO_meth_set_write_ex(c->bio_method_, TlsFilter::bio_write) != 1 ||
      BIO_meth_set_ctrl(c->bio_method_, TlsFilter::bio_ctrl) != 1 ||
      BIO_meth_set_create(c->bio_method_, TlsFilter::bio_create) != 1) {
    return absl::InternalError(absl::StrCat("a BIO method (libcrypto): ", ssl_errors()));
  }
  if (role == Role::kClient) {
    SSL_CTX_set_psk_use_session_callback(ctx, use_psk);
  } else {
    SSL_CTX_set_psk_find_session_callback(ctx, find_psk);
  }
  return std::shared_ptr<const TlsContext>(std::move(c));
}

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);
  BIO_meth_free(bio_method_);
  OPENSSL_cleanse(psk_.data(), psk_.size());
}

absl::StatusOr<std::unique_ptr<TlsFilter>> TlsFilter::make(std::shared_ptr<const TlsContext> ctx) {
  std::unique_ptr<TlsFilter> f(new TlsFilter());
  ERR_clear_error();
  f->ssl_ = SSL_new(ctx->ctx_);
  BIO* bio = BIO_new(ctx->bio_method_);
  if (f->ssl_ == nullptr || bio == nullptr) {
    BIO_free(bio);
    return absl::InternalError(absl::StrCat("a TLS connection (SSL_new): ", ssl_errors()));
  }
  BIO_set_data(bio, f.get());
  SSL_set_bio(f->ssl_, bio, bio);  // one BIO both ways: ssl_ owns its one reference
  const bool client = ctx->role() == TlsContext::Role::kClient;
  f->ctx_ = std::move(ctx);
  if (client) {
    SSL_set_connect_state(f->ssl_);
    if (absl::Status s = f->handshake(); !s.ok()) return s;  // the ClientHello, into out()
  } else {
    SSL_set_accept_state(f->ssl_);
  }
  return f;
}

TlsFilter::~TlsFilter() { SSL_free(ssl_); }

void TlsFilter::feed(std::string_view ciphertext) { in_ = ciphertext; }

int TlsFilter::bio_read(BIO* bio, char* dst, size_t len, size_t* got) {
  TlsFilter* f = static_cast<TlsFilter*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const size_t n = std::min(len, f->in_.size());
  *got = n;
  if (n == 0) {
    BIO_set_retry_read(bio);  // "wait for more", not end of stream
    return 0;
  }
  std::memcpy(dst, f->in_.data(), n);
  f->in_.remove_prefix(n);
  return 1;
}

int TlsFilter::bio_write(BIO* bio, const char* src, size_t len, size_t* put) {
  TlsFilter* f = static_cast<TlsFilter*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (f->out_sent_ == f->out_.size()) {
    f->out_.clear();
    f->out_sent_ = 0;
  }
  f->out_.append(src, len);
  *put = len;
  return 1;
}

long TlsFilter::bio_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int TlsFilter::bio_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

void TlsFilter::sent(size_t n) {
  out_sent_ = std::min(out_.size(), out_sent_ + n);
  if (out_sent_ == out_.size()) {
    out_.clear();
    out_sent_ = 0;
  }
}

absl::Status TlsFilter::check(int ret, std::string_view what) {
  const int err = SSL_get_error(ssl_, ret);
  switch (err) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      return absl::OkStatus();
    case SSL_ERROR_ZERO_RETURN:
      return absl::UnavailableError(
          absl::StrCat("TLS ", sv(what), ": the peer closed the TLS session"));
    default:
      return absl::DataLossError(absl::StrCat("TLS ", sv(what), ": ", ssl_errors()));
  }
}

absl::Status TlsFilter::handshake() {
  if (done_) return absl::OkStatus();
  ERR_clear_error();
  const int ret = SSL_do_handshake(ssl_);
  if (ret == 1) {
    done_ = true;
    return absl::OkStatus();
  }
  return check(ret, "handshake");
}

absl::StatusOr<size_t> TlsFilter::read_plain(char* dst, size_t cap) {
  if (cap == 0) return 0;
  ERR_clear_error();
  size_t n = 0;
  const int ret = SSL_read_ex(ssl_, dst, cap, &n);
  if (ret == 1) return n;  // a KeyUpdate's answer, if the record asked for one, is in out_
  if (absl::Status s = check(ret, "record"); !s.ok()) return s;
  return 0;
}

absl::Status TlsFilter::write_plain(std::string_view plain) {
  if (plain.empty()) return absl::OkStatus();
  ERR_clear_error();
  size_t n = 0;
  // Our BIO takes everything: the write is whole or an error.
  const int ret = SSL_write_ex(ssl_, plain.data(), plain.size(), &n);
  if (ret != 1) {
    absl::Status s = check(ret, "write");
    return s.ok() ? absl::InternalError("TLS write: wanted I/O on a BIO that never blocks") : s;
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> TlsFilter::write_plain(const iovec* iov, size_t count, size_t budget) {
  // Small frames are staged together so that records are full (16 KiB); a large piece (a
  // payload slice) tops the staged bytes up to a record boundary and is then sealed in place,
  // whole records at a time, without a copy.
  size_t taken = 0;
  staging_.clear();
  auto seal_staged = [&]() -> absl::Status {
    absl::Status s = write_plain(staging_);
    staging_.clear();
    return s;
  };
  for (size_t i = 0; i < count && taken < budget; ++i) {
    const char* base = static_cast<const char*>(iov[i].iov_base);
    size_t len = std::min(iov[i].iov_len, budget - taken);
    taken += len;
    while (len > 0) {
      if (len >= kRecordBytes) {
        const size_t fill = (kRecordBytes - staging_.size() % kRecordBytes) % kRecordBytes;
        staging_.append(base, fill);
        base += fill;
        len -= fill;
        if (absl::Status s = seal_staged(); !s.ok()) return s;
        const size_t whole = len - len % kRecordBytes;
        if (absl::Status s = write_plain(std::string_view(base, whole)); !s.ok()) return s;
        base += whole;
        len -= whole;
        continue;
      }
      const size_t take = std::min(len, kStagingBytes - staging_.size());
      staging_.append(base, take);
      base += take;
      len -= take;
      if (staging_.size() == kStagingBytes) {
        if (absl::Status s = seal_staged(); !s.ok()) return s;
      }
    }
  }
  if (absl::Status s = seal_staged(); !s.ok()) return s;
  return taken;
}

std::string TlsFilter::exporter() const {
  std::string x(32, '\0');
  if (SSL_export_keying_material(ssl_, reinterpret_cast<unsigned char*>(x.data()), x.size(),
                                 kExporterLabel.data(), kExporterLabel.size(), nullptr, 0,
                                 /*use_context=*/1) != 1) {
    return {};  // not after a handshake: the MACs then differ and the handshake fails
  }
  return x;
}

}  // namespace postal::routing::internal
