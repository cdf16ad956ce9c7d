#include "nats_conn.h"

#include <arpa/inet.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "postal/routing/channel_key.h"
#include "socket_util.h"

namespace postal::routing::internal {

namespace {

std::string mac_hex(const routing::ChannelKey& key, std::string_view text) {
  unsigned char mac[32];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.bytes().data(), static_cast<int>(key.bytes().size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac, &length);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(mac), static_cast<size_t>(length)));
}

// The host of a one-server `nats://host:port` URL when it is a DNS name; "" for an IP address or a
// list of servers. Debian's libnats checks the certificate against the host dialed by itself (an
// IP address too); naming the host keeps that so on a build that does not.
std::string dns_name_of(const std::string& url) {
  std::string_view rest = url;
  if (const size_t scheme = rest.find("://"); scheme != std::string_view::npos) {
    rest.remove_prefix(scheme + 3);
  }
  if (rest.find(',') != std::string_view::npos || rest.starts_with('[')) return "";
  const std::string host(rest.substr(0, rest.rfind(':')));
  unsigned char buf[sizeof(in6_addr)];
  if (host.empty() || ::inet_pton(AF_INET, host.c_str(), buf) == 1) return "";
  return host;
}

// What libnats said last on this thread, for an error message.
std::string last_error() {
  const char* text = nats_GetLastError(nullptr);
  return text != nullptr && *text != '\0' ? text : "no detail";
}

// `host`: the name the server's certificate must carry; empty: libnats' own check of the host
// dialed.
absl::Status use_tls(natsOptions* o, const routing::NatsTls& tls, const std::string& host) {
  if (!tls.enabled()) return absl::OkStatus();
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "NATS TLS: a client certificate needs both its cert file and its key file");
  }
  if (natsOptions_SetSecure(o, true) != NATS_OK ||
      natsOptions_LoadCATrustedCertificates(o, tls.ca_file.c_str()) != NATS_OK ||
      (!host.empty() && natsOptions_SetExpectedHostname(o, host.c_str()) != NATS_OK)) {
    return absl::InvalidArgumentError(
        absl::StrCat("NATS TLS: cannot load the CA file ", tls.ca_file, ": ", last_error()));
  }
  if (!tls.cert_file.empty() && natsOptions_LoadCertificatesChain(
                                    o, tls.cert_file.c_str(), tls.key_file.c_str()) != NATS_OK) {
    return absl::InvalidArgumentError(absl::StrCat("NATS TLS: cannot load the client certificate ",
                                                   tls.cert_file, " with key ", tls.key_file, ": ",
                                                   last_error()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string nats_token(const routing::ChannelKey& key) {
  return mac_hex(key, "postal nats token v1");
}

std::string nats_inbox_prefix(std::string_view user) {
  return absl::StrCat("_INBOX.",
                      absl::BytesToHexString(absl::string_view(user.data(), user.size())));
}

NatsCredentials nats_credentials(const routing::ChannelKey* key, std::string_view member) {
  NatsCredentials c;
  if (key == nullptr) return c;
  c.token = nats_token(*key);
  c.user = member.empty() ? std::string(kNatsDialOnlyUser) : std::string(member);
  // The NUL keeps a name from running into the label.
  std::string text("postal nats user v1", 19);
  text.push_back('\0');
  text += c.user;
  c.password = mac_hex(*key, text);
  c.inbox_prefix = nats_inbox_prefix(c.user);
  return c;
}

absl::StatusOr<std::unique_ptr<NatsConn>> NatsConn::connect(Options options) {
  std::unique_ptr<NatsConn> c(new NatsConn(std::move(options)));
  natsOptions* o = nullptr;
  natsStatus s = natsOptions_Create(&o);
  if (s == NATS_OK) s = natsOptions_SetURL(o, c->options_.url.c_str());
  if (s == NATS_OK) s = natsOptions_SetName(o, c->options_.name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(o, absl::ToInt64Milliseconds(c->options_.timeout));
  // Keep trying a lost server for ever (another node of a cluster, or the same one back); the
  // channels above reconnect their sessions once it is back.
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(o, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(o, 100);
  // A tunnel publishes what one read of a socket gave (frames batched already): send it now
  // rather than wait for libnats' flusher, which costs a round trip milliseconds.
  if (s == NATS_OK) s = natsOptions_SetSendAsap(o, true);
  // ...and never wait for ever when the server does not read (Options::write_deadline).
  if (s == NATS_OK) {
    s = natsOptions_SetWriteDeadline(o, absl::ToInt64Milliseconds(c->options_.write_deadline));
  }
  const NatsCredentials& creds = c->options_.credentials;
  if (s == NATS_OK && !creds.token.empty()) s = natsOptions_SetToken(o, creds.token.c_str());
  if (s == NATS_OK && !creds.user.empty()) {
    s = natsOptions_SetUserInfo(o, creds.user.c_str(), creds.password.c_str());
  }
  if (s == NATS_OK) s = natsOptions_SetCustomInboxPrefix(o, creds.inbox_prefix.c_str());
  if (s == NATS_OK) {
    if (absl::Status tls = use_tls(o, c->options_.tls, dns_name_of(c->options_.url)); !tls.ok()) {
      natsOptions_Destroy(o);
      return tls;
    }
  }
  if (s == NATS_OK) s = natsOptions_SetDisconnectedCB(o, &NatsConn::on_event, c.get());
  if (s == NATS_OK) s = natsOptions_SetReconnectedCB(o, &NatsConn::on_event, c.get());
  if (s == NATS_OK) s = natsOptions_SetClosedCB(o, &NatsConn::on_closed, c.get());
  if (s == NATS_OK) s = natsConnection_Connect(&c->nc_, o);
  natsOptions_Destroy(o);
  if (s != NATS_OK) {
    const bool tls = c->options_.tls.enabled();
    return absl::UnavailableError(absl::StrCat(
        "cannot connect to the NATS server at ", c->options_.url, tls ? " with TLS" : "", ": ",
        natsStatus_GetText(s), " (", last_error(), ")",
        tls ? "; check that it serves TLS with a certificate for that host signed by the CA file"
            : "; check that nats-server runs there and is reachable (and whether it wants TLS)"));
  }
  return c;
}

NatsConn::~NatsConn() {
  unsubscribe_all();
  closing_.store(true);
  if (nc_ != nullptr) {
    natsConnection_Close(nc_);
    // libnats runs connection callbacks on a thread of its own, in order, the closed one last:
    // once it ran, none of them can touch this object any more.
    closed_.WaitForNotificationWithTimeout(absl::Seconds(10));
    natsConnection_Destroy(nc_);
  }
}

size_t NatsConn::max_payload() const {
  const int64_t max = natsConnection_GetMaxPayload(nc_);
  return max > 64 ? static_cast<size_t>(max) : size_t{1} << 20;
}

absl::Status NatsConn::subscribe(const std::string& subject,
                                 std::function<void(natsMsg*)> handler) {
  auto sub = std::make_unique<Sub>();
  sub->owner = this;
  sub->handler = std::move(handler);
  natsStatus s =
      natsConnection_Subscribe(&sub->sub, nc_, subject.c_str(), &NatsConn::on_message, sub.get());
  // The tunnel's own window bounds what waits; the library's pending limits would drop messages.
  if (s == NATS_OK) s = natsSubscription_SetPendingLimits(sub->sub, -1, -1);
  if (s == NATS_OK)
    s = natsSubscription_SetOnCompleteCB(sub->sub, &NatsConn::on_complete, sub.get());
  // Once this returns the server has the subscription: a request right after reaches it.
  if (s == NATS_OK) {
    s = natsConnection_FlushTimeout(nc_, absl::ToInt64Milliseconds(options_.timeout));
  }
  if (s != NATS_OK) {
    if (sub->sub != nullptr) natsSubscription_Destroy(sub->sub);
    return absl::UnavailableError(absl::StrCat("cannot subscribe to ", subject, " at ",
                                               options_.url, ": ", natsStatus_GetText(s)));
  }
  absl::MutexLock lock(&mu_);
  subs_.push_back(std::move(sub));
  return absl::OkStatus();
}

void NatsConn::unsubscribe_all() {
  std::vector<std::unique_ptr<Sub>> subs;
  {
    absl::MutexLock lock(&mu_);
    subs.swap(subs_);
  }
  for (auto& sub : subs) {
    if (natsSubscription_Unsubscribe(sub->sub) == NATS_OK) {
      sub->complete.WaitForNotificationWithTimeout(absl::Seconds(10));
    }
    natsSubscription_Destroy(sub->sub);
  }
}

void NatsConn::respond(const char* reply, const std::string& body) {
  natsConnection_Publish(nc_, reply, body.data(), static_cast<int>(body.size()));
}

void NatsConn::on_message(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  static_cast<Sub*>(closure)->handler(msg);
  natsMsg_Destroy(msg);
}

void NatsConn::on_complete(void* closure) { static_cast<Sub*>(closure)->complete.Notify(); }

void NatsConn::on_closed(natsConnection*, void* closure) {
  static_cast<NatsConn*>(closure)->closed_.Notify();
}

void NatsConn::on_event(natsConnection*, void* closure) {
  auto* self = static_cast<NatsConn*>(closure);
  if (!self->closing_.load() && self->options_.on_lost) self->options_.on_lost();
}

}  // namespace postal::routing::internal
