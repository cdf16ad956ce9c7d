// mq9_json.cc — see mq9_json.h.
#include "mq9_json.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "mq9_subject.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::mq9 {
namespace {

using nlohmann::json;

absl::Status field_error(std::string_view field, std::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("mq9 CREATE: \"", sv(field), "\" must be ",
                                                 sv(want), R"( (e.g. {"ttl":3600,"public":false}))"));
}

absl::Status get_bool(const json& j, const char* field, bool& out) {
  auto it = j.find(field);
  if (it == j.end()) return absl::OkStatus();
  if (!it->is_boolean()) return field_error(field, "true or false");
  out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status get_count(const json& j, const char* field, uint64_t& out, bool& present) {
  auto it = j.find(field);
  present = it != j.end();
  if (!present) return absl::OkStatus();
  if (!it->is_number_unsigned()) return field_error(field, "a whole number >= 0");
  out = it->get<uint64_t>();
  return absl::OkStatus();
}

json unix_seconds(absl::Time t) {
  if (t == absl::InfiniteFuture()) return nullptr;
  return absl::ToUnixSeconds(t);
}

json mailbox_object(const MailboxInfo& info) {
  json j = {{"mail_id", info.id},
            {"public", info.is_public},
            {"created_at", unix_seconds(info.created_at)},
            {"expires_at", unix_seconds(info.expires_at)},
            {"ttl", info.expires_at == absl::InfiniteFuture()
                        ? 0
                        : absl::ToInt64Seconds(info.expires_at - info.created_at)}};
  if (info.max_messages) j["max_messages"] = info.max_messages;
  if (info.max_message_bytes) j["max_message_bytes"] = info.max_message_bytes;
  if (info.durable_all) j["durable_all"] = true;
  return j;
}

}  // namespace

absl::StatusOr<MailboxSpec> parse_create(std::string_view body, absl::Duration default_ttl) {
  json j = body.empty() ? json::object() : json::parse(body.begin(), body.end(), nullptr, false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        R"(mq9 CREATE: the body must be a JSON object, e.g. {"ttl":3600,"public":false} or {"ttl":3600,"public":true,"name":"task.queue"})");
  }
  MailboxSpec spec;
  spec.is_public = false;
  if (absl::Status s = get_bool(j, "public", spec.is_public); !s.ok()) return s;
  if (absl::Status s = get_bool(j, "durable_all", spec.durable_all); !s.ok()) return s;
  uint64_t ttl = 0;
  bool has_ttl = false, unused = false;
  if (absl::Status s = get_count(j, "ttl", ttl, has_ttl); !s.ok()) return s;
  if (ttl > 100ull * 365 * 24 * 3600) return field_error("ttl", "at most 100 years in seconds");
  spec.ttl = has_ttl ? absl::Seconds(static_cast<int64_t>(ttl)) : default_ttl;
  if (absl::Status s = get_count(j, "max_messages", spec.max_messages, unused); !s.ok()) return s;
  if (absl::Status s = get_count(j, "max_message_bytes", spec.max_message_bytes, unused); !s.ok()) {
    return s;
  }
  auto name = j.find("name");
  if (name != j.end() && !name->is_string()) return field_error("name", "a string");
  if (spec.is_public) {
    if (name == j.end()) return field_error("name", "given for a public mailbox");
    spec.name = name->get<std::string>();
    if (absl::Status s = valid_mailbox_name(spec.name); !s.ok()) return s;
  } else if (name != j.end() && !name->get<std::string>().empty()) {
    return field_error("name", "absent for a private mailbox (the server draws its id)");
  }
  return spec;
}

std::string mailbox_json(const MailboxInfo& info, const bool* created) {
  json j = mailbox_object(info);
  if (created) j["created"] = *created;
  return j.dump();
}

std::string listing_json(const std::vector<MailboxInfo>& mailboxes) {
  json list = json::array();
  for (const MailboxInfo& m : mailboxes) list.push_back(mailbox_object(m));
  return json{{"mailboxes", std::move(list)}}.dump();
}

std::string event_json(std::string_view event, const MailboxInfo& info) {
  return json{{"event", event}, {"mailbox", mailbox_object(info)}}.dump();
}

std::string error_code(const absl::Status& status) {
  if (IsMailboxNotFound(status)) return "MailboxNotFound";
  if (IsMailboxConflict(status)) return "MailboxConflict";
  if (IsBudgetExhausted(status)) return "BudgetExhausted";
  if (IsIoFailed(status)) return "IoFailed";
  return absl::StatusCodeToString(status.code());
}

std::string error_json(const absl::Status& status) {
  return json{{"error", {{"code", error_code(status)}, {"message", std::string(status.message())}}}}
      .dump();
}

std::string message_headers(const RetainedMessage& m) {
  return absl::StrCat("NATS/1.0\r\nMq9-Msg-Id: ", m.seq, "\r\nMq9-Priority: ",
                      sv(to_string(m.priority)), "\r\nMq9-Stored-At: ",
                      absl::ToUnixMillis(m.stored_at), "\r\n\r\n");
}

}  // namespace postal::mail::mq9
