// nats_link.h — `NatsLink`: one libnats connection and its JetStream context, and the errors the
// NATS store reports (internal).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nats/nats.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace postal::mail::nats {

class NatsLink {
 public:
  struct Options {
    std::string url;
    std::string token;
    absl::Duration timeout;
    std::string name;         // shown by the server (connz)
    std::string tls_ca_file;  // empty: plain TCP
    std::string tls_cert_file;
    std::string tls_key_file;
    // Every publish written at once (the default: a single request must not wait for libnats'
    // flusher). False: publishes gather in libnats' buffer until a flush, for bulk senders.
    bool send_asap = true;
  };
  // IoFailed, naming the server, when none answers.
  static absl::StatusOr<std::unique_ptr<NatsLink>> connect(const Options& options);
  ~NatsLink();
  NatsLink(const NatsLink&) = delete;
  NatsLink& operator=(const NatsLink&) = delete;

  natsConnection* nc() const { return nc_; }
  jsCtx* js() const { return js_; }
  int64_t timeout_ms() const { return timeout_ms_; }

  // IoFailed for a failed call: `what` failed at the server with libnats' text and the
  // JetStream error code, and what to check.
  absl::Status error(std::string_view what, natsStatus status, jsErrCode jerr = jsErrCode(0)) const;
  // BudgetExhausted, saying what to do, for a message body over the server's max_payload.
  absl::Status fits_payload(size_t bytes) const;
  // A JetStream API request (`$JS.API.<api>`) with a JSON body; the JSON reply, or IoFailed when
  // there is none or it carries an error (whose `err_code` lands in `*jerr` when given).
  absl::StatusOr<nlohmann::json> api(std::string_view api, const nlohmann::json& request,
                                     int* jerr = nullptr) const;

 private:
  NatsLink() = default;
  std::string url_;
  int64_t timeout_ms_ = 0;
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
};

// Lowercase hex of `bytes`: a mailbox id as one NATS subject token or KV key.
std::string hex(std::string_view bytes);

}  // namespace postal::mail::nats
