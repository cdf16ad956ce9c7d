#include "nats_link.h"

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::nats {
namespace {

std::string last_error() {
  const char* last = nats_GetLastError(nullptr);
  return last != nullptr && *last != '\0' ? last : "no detail";
}

// TLS options before connecting; InvalidArgument naming the file that does not load.
absl::Status use_tls(natsOptions* opts, const NatsLink::Options& options) {
  if (options.tls_ca_file.empty()) {
    return options.tls_cert_file.empty() && options.tls_key_file.empty()
               ? absl::OkStatus()
               : absl::InvalidArgumentError(
                     "the NATS store's TLS client certificate needs a CA file (tls_ca_file)");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "the NATS store's TLS client certificate needs both its cert file and its key file");
  }
  if (natsOptions_SetSecure(opts, true) != NATS_OK ||
      natsOptions_LoadCATrustedCertificates(opts, options.tls_ca_file.c_str()) != NATS_OK) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the NATS store's TLS CA file ", options.tls_ca_file, " does not load: ", last_error()));
  }
  if (!options.tls_cert_file.empty() &&
      natsOptions_LoadCertificatesChain(opts, options.tls_cert_file.c_str(),
                                        options.tls_key_file.c_str()) != NATS_OK) {
    return absl::InvalidArgumentError(
        absl::StrCat("the NATS store's TLS client certificate ", options.tls_cert_file, " and key ",
                     options.tls_key_file, " do not load: ", last_error()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<NatsLink>> NatsLink::connect(const Options& options) {
  std::unique_ptr<NatsLink> link(new NatsLink());
  link->url_ = options.url;
  link->timeout_ms_ = absl::ToInt64Milliseconds(options.timeout);
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetURL(opts, options.url.c_str());
  if (s == NATS_OK) s = natsOptions_SetName(opts, options.name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, link->timeout_ms_);
  // Keep trying a lost server for ever: requests fail with a timeout meanwhile, and the store
  // works again once a server of the cluster is back.
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, 250);
  // Nothing is held back for a reconnect: a publish, request or ack while the server is away
  // fails at once instead of waiting in libnats' buffer to be sent later — after the caller was
  // told it failed (an ack reported false that then took effect, a post refused that was then
  // stored). 0 would mean libnats' 8 MB default; no message fits in 1 byte.
  if (s == NATS_OK) s = natsOptions_SetReconnectBufSize(opts, 1);
  // An append that does not wait (AckInbox) would otherwise sit in libnats' buffer until its
  // flusher runs — about a millisecond on every such append's ack.
  if (s == NATS_OK) s = natsOptions_SetSendAsap(opts, options.send_asap);
  if (s == NATS_OK && !options.token.empty()) s = natsOptions_SetToken(opts, options.token.c_str());
  if (s == NATS_OK) {
    if (absl::Status tls = use_tls(opts, options); !tls.ok()) {
      natsOptions_Destroy(opts);
      return tls;
    }
  }
  if (s == NATS_OK) s = natsConnection_Connect(&link->nc_, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    return link->error(options.tls_ca_file.empty() ? "connecting" : "connecting with TLS", s);
  }
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = link->timeout_ms_;
  s = natsConnection_JetStream(&link->js_, link->nc_, &jo);
  if (s != NATS_OK) return link->error("opening the JetStream context", s);
  return link;
}

NatsLink::~NatsLink() {
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (nc_ != nullptr) {
    natsConnection_Close(nc_);
    natsConnection_Destroy(nc_);
  }
}

absl::Status NatsLink::error(std::string_view what, natsStatus status, jsErrCode jerr) const {
  const char* last = nats_GetLastError(nullptr);
  return IoFailedError(absl::StrCat(
      "the NATS store at ", url_, ": ", sv(what), " failed: ", natsStatus_GetText(status),
      last != nullptr && *last != '\0' ? absl::StrCat(" (", last, ")") : std::string(),
      jerr != 0 ? absl::StrCat(" [JetStream error ", static_cast<int>(jerr), "]") : std::string(),
      "; check that nats-server runs there with JetStream enabled (-js) and is reachable"));
}

absl::StatusOr<nlohmann::json> NatsLink::api(std::string_view api, const nlohmann::json& request,
                                             int* jerr) const {
  const std::string subject = absl::StrCat("$JS.API.", sv(api));
  const std::string body = request.dump();
  natsMsg* reply = nullptr;
  natsStatus s = natsConnection_Request(&reply, nc_, subject.c_str(), body.data(),
                                        static_cast<int>(body.size()), timeout_ms_);
  if (s != NATS_OK) return error(absl::StrCat("the request ", subject), s);
  nlohmann::json answer = nlohmann::json::parse(
      std::string_view(natsMsg_GetData(reply), static_cast<size_t>(natsMsg_GetDataLength(reply))),
      nullptr, /*allow_exceptions=*/false);
  natsMsg_Destroy(reply);
  if (answer.is_discarded() || !answer.is_object()) {
    return IoFailedError(absl::StrCat("the NATS store at ", url_, ": ", subject,
                                      " answered with something that is not a JSON object"));
  }
  if (auto e = answer.find("error"); e != answer.end() && e->is_object()) {
    const auto code_it = e->find("err_code");
    const auto text_it = e->find("description");
    const int code = code_it != e->end() && code_it->is_number_integer() ? code_it->get<int>() : 0;
    if (jerr != nullptr) *jerr = code;
    return IoFailedError(absl::StrCat(
        "the NATS store at ", url_, ": ", subject, " failed: ",
        text_it != e->end() && text_it->is_string() ? text_it->get<std::string>() : "?",
        " [JetStream error ", code, "]"));
  }
  return answer;
}

absl::Status NatsLink::fits_payload(size_t bytes) const {
  const int64_t max = natsConnection_GetMaxPayload(nc_);
  if (max > 0 && bytes > static_cast<size_t>(max)) {
    return BudgetExhaustedError(absl::StrCat(
        "a message of ", bytes, " bytes is over the NATS server's max_payload of ", max,
        " bytes; send smaller messages or raise max_payload in nats-server's configuration"));
  }
  return absl::OkStatus();
}

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

}  // namespace postal::mail::nats
