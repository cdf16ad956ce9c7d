// Conversions between the mail vocabulary and the post wire messages.
#include "postal/mail/post_messages.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "postal/mail/system_headers.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

constexpr std::string_view kMemPrefix = "mem://";
constexpr std::string_view kPostPrefix = "post://";

// The one header the host itself writes with an address of its mem store — the dead-letter
// topic (M-DLQ-1) — is shown in the post scheme. Every other header is the sender's data and
// arrives as it was sent, even a string that happens to start with "mem://".
wire::Headers headers_to_post(const wire::Headers& in) {
  wire::Headers out = in;
  if (std::optional<std::string> topic = in.get(kDeadLetterTopic);
      topic.has_value() && topic->starts_with(kMemPrefix)) {
    out.set(kDeadLetterTopic, mem_to_post(*topic));
  }
  return out;
}

}  // namespace

std::string post_to_mem(const MailAddress& post_address) {
  return absl::StrCat(sv(kMemPrefix), post_address.identity());
}

std::string mem_to_post(std::string_view mem_canonical) {
  if (!mem_canonical.starts_with(kMemPrefix)) return std::string(mem_canonical);
  return absl::StrCat(sv(kPostPrefix), sv(mem_canonical.substr(kMemPrefix.size())));
}

WireStatus WireStatus::of(const absl::Status& status) {
  WireStatus w;
  w.code = static_cast<int32_t>(status.code());
  w.message = std::string(status.message());
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    w.payloads.emplace_back(std::string(url), std::string(payload));
  });
  return w;
}

absl::Status WireStatus::to_status() const {
  absl::Status s(static_cast<absl::StatusCode>(code), sv(message));
  for (const auto& [url, payload] : payloads) s.SetPayload(sv(url), absl::Cord(sv(payload)));
  return s;
}

WirePostReceipt WirePostReceipt::of(const absl::StatusOr<PostReceipt>& receipt) {
  WirePostReceipt w;
  if (!receipt.ok()) {
    w.status = WireStatus::of(receipt.status());
    return w;
  }
  w.address = receipt->address;
  w.message_id = receipt->message_id;
  w.send_id = receipt->send_id;
  w.pushed = receipt->path == PostPath::kPushed;
  w.deliveries = receipt->deliveries;
  return w;
}

absl::StatusOr<PostReceipt> WirePostReceipt::to_receipt() const {
  if (status.code != 0) return status.to_status();
  return PostReceipt{mem_to_post(address), message_id, send_id,
                     pushed ? PostPath::kPushed : PostPath::kQueued, deliveries};
}

absl::StatusOr<WireLetter> WireLetter::of(const Letter& letter) {
  WireLetter w;
  w.id = letter.id;
  w.from = letter.from;
  w.to = letter.to;
  w.headers = letter.headers;
  if (!letter.body.empty()) {
    absl::StatusOr<std::string> bytes = letter.body.bytes();
    if (!bytes.ok()) return bytes.status();
    w.type_hash = letter.body.type_hash();
    w.bytes = *std::move(bytes);
  }
  return w;
}

Letter WireLetter::to_letter() const {
  Letter l;
  l.id = id;
  l.from = from;
  l.to = mem_to_post(to);
  l.headers = headers_to_post(headers);
  if (type_hash != 0) l.body = Body::from_bytes(type_hash, bytes);
  return l;
}

WireMailboxStatus WireMailboxStatus::of(const MailboxStatus& s) {
  WireMailboxStatus w;
  w.address = s.address;
  w.state = static_cast<uint8_t>(s.state);
  w.exists = s.exists.has_value() ? (*s.exists ? 1 : 0) : -1;
  w.unread = s.unread_count;
  w.in_flight = s.in_flight_count;
  if (s.last_activity_time) w.last_activity_ns = absl::ToUnixNanos(*s.last_activity_time);
  for (const auto& [k, v] : s.extensions) {
    std::variant<bool, int64_t, double, std::string> value;
    std::visit([&](const auto& x) { value = x; }, v);
    w.extensions.emplace_back(k, std::move(value));
  }
  return w;
}

MailboxStatus WireMailboxStatus::to_status() const {
  MailboxStatus s;
  s.address = mem_to_post(address);
  s.state = static_cast<MailboxState>(state);
  if (exists >= 0) s.exists = exists == 1;
  s.unread_count = unread;
  s.in_flight_count = in_flight;
  if (last_activity_ns) s.last_activity_time = absl::FromUnixNanos(*last_activity_ns);
  for (const auto& [k, v] : extensions) {
    // M-STAT-1: extension keys carry the scheme they are read through (mem.x → post.x).
    std::string key = absl::StartsWith(sv(k), "mem.") ? absl::StrCat("post.", sv(k).substr(4)) : k;
    std::visit([&](const auto& x) { s.extensions[key] = x; }, v);
  }
  return s;
}

}  // namespace postal::mail
