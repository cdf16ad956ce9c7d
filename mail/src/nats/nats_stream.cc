#include "nats_stream.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nats_ack_inbox.h"
#include "nats_records.h"
#include "nlohmann/json.hpp"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::nats {
namespace {

// A count in a server's answer; 0 when it is missing or not a count (never throws).
uint64_t count_of(const nlohmann::json& j) { return j.is_number_unsigned() ? j.get<uint64_t>() : 0; }

std::optional<Priority> priority_of_letter(char c) {
  switch (c) {
    case 'c': return Priority::kCritical;
    case 'u': return Priority::kUrgent;
    case 'n': return Priority::kNormal;
    default: return std::nullopt;
  }
}

}  // namespace

MailStream::MailStream(const NatsLink& link, const std::string& prefix, int replicas)
    : link_(link),
      name_(absl::StrCat(prefix, "_MAIL")),
      subjects_(absl::StrCat(absl::AsciiStrToLower(prefix), ".mail.")),
      replicas_(replicas) {}

absl::Status MailStream::ensure() {
  int jerr = 0;
  absl::StatusOr<nlohmann::json> info =
      link_.api(api("STREAM.INFO."), nlohmann::json::object(), &jerr);
  if (!info.ok() && jerr == JSStreamNotFoundErr) {
    info = link_.api(api("STREAM.CREATE."),
                     nlohmann::json{{"name", name_},
                                    {"subjects", {absl::StrCat(subjects_, ">")}},
                                    {"storage", "file"},
                                    {"retention", "limits"},
                                    {"discard", "old"},
                                    {"num_replicas", replicas_},
                                    {"allow_direct", true}});
  }
  if (!info.ok()) return info.status();
  const nlohmann::json::json_pointer last("/state/last_seq");
  saw(info->contains(last) ? count_of(info->at(last)) : 0);
  return absl::OkStatus();
}

std::string MailStream::api(std::string_view verb) const { return absl::StrCat(sv(verb), name_); }

std::string MailStream::mailbox_prefix(std::string_view id) const {
  return absl::StrCat(subjects_, hex(id), ".");
}

std::string MailStream::lane_subject(std::string_view id, Priority priority) const {
  return absl::StrCat(mailbox_prefix(id), std::string(1, lane_letter(priority)));
}

void MailStream::saw(uint64_t seq) {
  uint64_t last = last_seq_.load(std::memory_order_relaxed);
  while (seq > last && !last_seq_.compare_exchange_weak(last, seq, std::memory_order_acq_rel)) {
  }
}

absl::Status MailStream::fits_payload(size_t bytes) const { return link_.fits_payload(bytes); }

absl::StatusOr<uint64_t> MailStream::publish(const std::string& subject, std::string_view body) {
  natsMsg* reply = nullptr;
  const natsStatus s = natsConnection_Request(&reply, link_.nc(), subject.c_str(), body.data(),
                                              static_cast<int>(body.size()), link_.timeout_ms());
  if (s != NATS_OK) return link_.error("storing a message", s);
  absl::StatusOr<uint64_t> seq = parse_pub_ack(
      link_, std::string_view(natsMsg_GetData(reply),
                              static_cast<size_t>(natsMsg_GetDataLength(reply))));
  natsMsg_Destroy(reply);
  if (seq.ok()) saw(*seq);
  return seq;
}

absl::StatusOr<std::optional<StoredMessage>> MailStream::get(uint64_t seq,
                                                             const std::string& prefix) {
  const bool lane = !absl::EndsWith(prefix, ".");
  const std::string filter = lane ? prefix : absl::StrCat(prefix, "*");
  jsDirectGetMsgOptions options;
  jsDirectGetMsgOptions_Init(&options);
  options.Sequence = seq;
  options.NextBySubject = filter.c_str();
  natsMsg* msg = nullptr;
  const natsStatus s = js_DirectGetMsg(&msg, link_.js(), name_.c_str(), nullptr, &options);
  if (s == NATS_NOT_FOUND) return std::nullopt;
  if (s != NATS_OK) return link_.error("reading a message", s);
  const std::string_view subject = natsMsg_GetSubject(msg);
  std::optional<Priority> priority =
      subject.empty() ? std::nullopt : priority_of_letter(subject.back());
  StoredMessage m{.seq = natsMsg_GetSequence(msg),
                  .priority = priority.value_or(Priority::kNormal),
                  .stored_at = absl::FromUnixNanos(natsMsg_GetTime(msg)),
                  .body = std::string(natsMsg_GetData(msg),
                                      static_cast<size_t>(natsMsg_GetDataLength(msg)))};
  natsMsg_Destroy(msg);
  if (!priority) return link_.error("reading a message (a subject without a lane)", NATS_ERR);
  return m;
}

bool MailStream::erase(uint64_t seq) {
  jsErrCode jerr = jsErrCode(0);
  return js_EraseMsg(link_.js(), name_.c_str(), seq, nullptr, &jerr) == NATS_OK;
}

absl::StatusOr<uint64_t> MailStream::count(std::string_view id) {
  absl::StatusOr<nlohmann::json> info =
      link_.api(api("STREAM.INFO."),
                nlohmann::json{{"subjects_filter", absl::StrCat(mailbox_prefix(id), "*")}});
  if (!info.ok()) return info.status();
  uint64_t n = 0;
  if (auto st = info->find("state"); st != info->end()) {
    if (auto it = st->find("subjects"); it != st->end() && it->is_object()) {
      for (const auto& [subject, msgs] : it->items()) n += count_of(msgs);
    }
  }
  return n;
}

absl::StatusOr<uint64_t> MailStream::purge(const std::string& filter, uint64_t through) {
  nlohmann::json request{{"filter", filter}};
  // JetStream purges below "seq": keep everything from through + 1.
  if (through < std::numeric_limits<uint64_t>::max()) request["seq"] = through + 1;
  absl::StatusOr<nlohmann::json> purged = link_.api(api("STREAM.PURGE."), request);
  if (!purged.ok()) return purged.status();
  const auto n = purged->find("purged");
  return n != purged->end() ? count_of(*n) : 0;
}

absl::Status MailStream::keep_high_water() {
  const std::string subject = absl::StrCat(subjects_, "_hw");
  if (absl::StatusOr<uint64_t> seq = publish(subject, ""); !seq.ok()) return seq.status();
  return link_.api(api("STREAM.PURGE."), nlohmann::json{{"filter", subject}, {"keep", 1}})
      .status();
}

}  // namespace postal::mail::nats
