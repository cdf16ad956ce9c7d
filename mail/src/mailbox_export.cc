#include "postal/mail/mailbox_export.h"

#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "postal/mail/artifact_file.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

using nlohmann::json;

constexpr std::string_view kWhat = "mailbox export";

// What a valid export holds, parsed and checked before anything is stored.
struct Parsed {
  MailboxInfo mailbox;
  std::vector<NewMessage> messages;
};

absl::Status bad(std::string_view file, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(sv(kWhat), " '", sv(file), "': ", sv(what),
                   "; nothing was imported. Give a file written by `postal mail export` (format ",
                   sv(kMailboxExportFormat), ", version ", kMailboxExportVersion, ")"));
}

// The object's members must be exactly `allowed` (each present, nothing else).
absl::Status exact_members(const json& object, std::initializer_list<std::string_view> allowed,
                           std::string_view where, std::string_view file) {
  if (!object.is_object()) return bad(file, absl::StrCat(sv(where), " is not a JSON object"));
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || key == a;
    if (!known) return bad(file, absl::StrCat(sv(where), " has an unknown member '", key, "'"));
  }
  for (std::string_view a : allowed) {
    if (!object.contains(a)) return bad(file, absl::StrCat(sv(where), " lacks '", sv(a), "'"));
  }
  return absl::OkStatus();
}

std::optional<uint64_t> as_count(const json& v) {
  if (!v.is_number_unsigned()) return std::nullopt;
  return v.get<uint64_t>();
}

absl::StatusOr<MailboxInfo> parse_mailbox(const json& m, std::string_view file) {
  if (absl::Status s = exact_members(
          m, {"id", "max_messages", "max_message_bytes", "durable_all", "expires_at_ms"},
          "\"mailbox\"", file);
      !s.ok()) {
    return s;
  }
  MailboxInfo info;
  if (!m["id"].is_string() || m["id"].get<std::string>().empty()) {
    return bad(file, "\"mailbox\".\"id\" is not a non-empty string");
  }
  info.id = m["id"].get<std::string>();
  const std::optional<uint64_t> max_messages = as_count(m["max_messages"]);
  const std::optional<uint64_t> max_bytes = as_count(m["max_message_bytes"]);
  if (!max_messages || !max_bytes) {
    return bad(file, "\"max_messages\" and \"max_message_bytes\" must be integers >= 0");
  }
  info.max_messages = *max_messages;
  info.max_message_bytes = *max_bytes;
  if (!m["durable_all"].is_boolean()) return bad(file, "\"durable_all\" is not true or false");
  info.durable_all = m["durable_all"].get<bool>();
  const json& expires = m["expires_at_ms"];
  if (expires.is_null()) {
    info.expires_at = absl::InfiniteFuture();
  } else if (expires.is_number_integer()) {
    info.expires_at = absl::FromUnixMillis(expires.get<int64_t>());
  } else {
    return bad(file, "\"expires_at_ms\" is neither null nor an integer");
  }
  return info;
}

absl::StatusOr<Parsed> parse_export(std::string_view text, std::string_view file) {
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return bad(file, absl::StrCat("it is not valid JSON (", e.what(), ")"));
  }
  if (absl::Status s =
          exact_members(doc, {"format", "version", "mailbox", "messages"}, "the document", file);
      !s.ok()) {
    return s;
  }
  if (doc["format"] != std::string(kMailboxExportFormat)) {
    return bad(file, "\"format\" is not \"postal.mailbox-export\"");
  }
  if (!doc["version"].is_number_integer() ||
      doc["version"].get<int64_t>() != kMailboxExportVersion) {
    return bad(
        file, absl::StrCat("\"version\" is ", doc["version"].dump(), ", not one this build reads"));
  }
  Parsed out;
  absl::StatusOr<MailboxInfo> info = parse_mailbox(doc["mailbox"], file);
  if (!info.ok()) return info.status();
  out.mailbox = *std::move(info);
  const json& messages = doc["messages"];
  if (!messages.is_array()) return bad(file, "\"messages\" is not an array");
  out.messages.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = absl::StrCat("message ", i);
    if (absl::Status s =
            exact_members(m, {"seq", "priority", "stored_at_ms", "body_base64"}, where, file);
        !s.ok()) {
      return s;
    }
    if (!as_count(m["seq"]) || !m["stored_at_ms"].is_number_integer()) {
      return bad(file, absl::StrCat(where, ": \"seq\" or \"stored_at_ms\" is not an integer"));
    }
    std::optional<Priority> priority =
        m["priority"].is_string() ? parse_priority(m["priority"].get<std::string>()) : std::nullopt;
    if (!priority) {
      return bad(file, absl::StrCat(where, ": \"priority\" is not critical, urgent or normal"));
    }
    std::string body;
    if (!m["body_base64"].is_string() ||
        !absl::Base64Unescape(m["body_base64"].get<std::string>(), &body)) {
      return bad(file, absl::StrCat(where, ": \"body_base64\" is not base64"));
    }
    out.messages.push_back(NewMessage{.priority = *priority, .body = std::move(body)});
  }
  return out;
}

// `status` with its message in the import's words; its code and payloads (so IsX() still
// answers) kept.
absl::Status in_import(const absl::Status& status, std::string_view file) {
  absl::Status out(status.code(), absl::StrCat("import '", sv(file), "': ", status.message(),
                                               "; nothing was imported"));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace

absl::StatusOr<std::string> export_mailbox(MailStore& store, std::string_view id) {
  absl::StatusOr<MailboxInfo> info = store.mailbox(id);
  if (!info.ok()) return info.status();
  if (!info->is_public) {
    return absl::InvalidArgumentError(
        absl::StrCat("export ", sv(id),
                     ": a private mailbox is not exported, its id is its only secret (M-BOX-4)"));
  }
  absl::StatusOr<std::vector<StoredMessage>> stored = store.read_all(id);
  if (!stored.ok()) return stored.status();
  json messages = json::array();
  for (const StoredMessage& m : *stored) {
    messages.push_back({{"seq", m.seq},
                        {"priority", std::string(to_string(m.priority))},
                        {"stored_at_ms", absl::ToUnixMillis(m.stored_at)},
                        {"body_base64", absl::Base64Escape(m.body)}});
  }
  json mailbox = {{"id", info->id},
                  {"max_messages", info->max_messages},
                  {"max_message_bytes", info->max_message_bytes},
                  {"durable_all", info->durable_all},
                  {"expires_at_ms", nullptr}};
  if (info->expires_at != absl::InfiniteFuture()) {
    mailbox["expires_at_ms"] = absl::ToUnixMillis(info->expires_at);
  }
  json doc = {{"format", std::string(kMailboxExportFormat)},
              {"version", kMailboxExportVersion},
              {"mailbox", std::move(mailbox)},
              {"messages", std::move(messages)}};
  return doc.dump(1);
}

absl::StatusOr<ImportResult> import_mailbox_json(MailStore& store, std::string_view json_text,
                                                 std::string_view file, absl::Time now) {
  absl::StatusOr<Parsed> parsed = parse_export(json_text, file);
  if (!parsed.ok()) return parsed.status();
  const MailboxInfo& exported = parsed->mailbox;
  MailboxSpec spec{.name = exported.id,
                   .max_messages = exported.max_messages,
                   .max_message_bytes = exported.max_message_bytes,
                   .durable_all = exported.durable_all};
  if (exported.expires_at != absl::InfiniteFuture()) {
    spec.ttl = exported.expires_at - now;
    if (spec.ttl <= absl::ZeroDuration()) {
      return bad(file, absl::StrCat("mailbox '", exported.id, "' expired at ",
                                    absl::FormatTime(exported.expires_at),
                                    "; there is nothing left to import"));
    }
  }
  absl::StatusOr<CreateResult> created = store.create(spec);
  if (!created.ok()) return in_import(created.status(), file);
  if (!created->created && created->mailbox.durable_all != exported.durable_all) {
    return MailboxConflictError(absl::StrCat("import '", sv(file), "': mailbox '", exported.id,
                                             "' exists with durable_all ",
                                             created->mailbox.durable_all ? "true" : "false",
                                             ", the export says otherwise; nothing was imported"));
  }
  const uint64_t n = parsed->messages.size();
  absl::StatusOr<std::vector<uint64_t>> stored =
      store.append_all(exported.id, std::move(parsed->messages));
  if (!stored.ok()) {
    if (created->created) (void)store.remove(exported.id);  // all or nothing (M-STORE-2)
    return in_import(stored.status(), file);
  }
  return ImportResult{.mailbox = exported.id, .created = created->created, .messages = n};
}

absl::StatusOr<ImportResult> import_mailbox(MailStore& store, const std::filesystem::path& file,
                                            absl::Time now) {
  absl::StatusOr<std::string> text = read_artifact_file(file, kWhat);
  if (!text.ok()) return text.status();
  return import_mailbox_json(store, *text, file.string(), now);
}

}  // namespace postal::mail
