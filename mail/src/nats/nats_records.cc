#include "nats_records.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::nats {

absl::StatusOr<std::unique_ptr<Bucket>> Bucket::open(const NatsLink& link, std::string name,
                                                     int replicas) {
  std::unique_ptr<Bucket> bucket(new Bucket(link, std::move(name)));
  natsStatus s = js_KeyValue(&bucket->kv_, link.js(), bucket->name_.c_str());
  if (s == NATS_NOT_FOUND) {
    kvConfig config;
    kvConfig_Init(&config);
    config.Bucket = bucket->name_.c_str();
    config.History = 1;
    config.StorageType = js_FileStorage;
    config.Replicas = replicas;
    s = js_CreateKeyValue(&bucket->kv_, link.js(), &config);
    // Another process created it first: open what it made.
    if (s != NATS_OK) s = js_KeyValue(&bucket->kv_, link.js(), bucket->name_.c_str());
  }
  if (s != NATS_OK) return link.error(absl::StrCat("opening the bucket ", bucket->name_), s);
  return bucket;
}

Bucket::~Bucket() {
  if (kv_ != nullptr) kvStore_Destroy(kv_);
}

absl::StatusOr<std::optional<Bucket::Entry>> Bucket::get(const std::string& key) {
  kvEntry* e = nullptr;
  const natsStatus s = kvStore_Get(&e, kv_, key.c_str());
  if (s == NATS_NOT_FOUND) return std::nullopt;
  if (s != NATS_OK) return link_.error(absl::StrCat("reading ", name_), s);
  Entry entry{std::string(static_cast<const char*>(kvEntry_Value(e)),
                          static_cast<size_t>(kvEntry_ValueLen(e))),
              kvEntry_Revision(e)};
  kvEntry_Destroy(e);
  return entry;
}

absl::StatusOr<bool> Bucket::create(const std::string& key, std::string_view value) {
  uint64_t rev = 0;
  const natsStatus s =
      kvStore_Create(&rev, kv_, key.c_str(), value.data(), static_cast<int>(value.size()));
  if (s == NATS_OK) return true;
  absl::StatusOr<std::optional<Entry>> now = get(key);
  if (now.ok() && now->has_value()) return false;  // it exists: the race was lost
  return link_.error(absl::StrCat("writing ", name_), s);
}

absl::StatusOr<bool> Bucket::update(const std::string& key, std::string_view value,
                                    uint64_t revision) {
  uint64_t rev = 0;
  const natsStatus s = kvStore_Update(&rev, kv_, key.c_str(), value.data(),
                                      static_cast<int>(value.size()), revision);
  if (s == NATS_OK) return true;
  absl::StatusOr<std::optional<Entry>> now = get(key);
  if (now.ok() && (!now->has_value() || (*now)->revision != revision)) return false;
  return link_.error(absl::StrCat("writing ", name_), s);
}

absl::Status Bucket::erase(const std::string& key) {
  return link_
      .api(absl::StrCat("STREAM.PURGE.KV_", name_),
           nlohmann::json{{"filter", absl::StrCat("$KV.", name_, ".", key)}})
      .status();
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Bucket::all() {
  kvWatchOptions options;
  kvWatchOptions_Init(&options);
  options.IgnoreDeletes = true;
  kvWatcher* w = nullptr;
  natsStatus s = kvStore_WatchAll(&w, kv_, &options);
  if (s != NATS_OK) return link_.error(absl::StrCat("listing ", name_), s);
  std::vector<std::pair<std::string, std::string>> out;
  for (;;) {
    kvEntry* e = nullptr;
    s = kvWatcher_Next(&e, w, link_.timeout_ms());
    if (s != NATS_OK || e == nullptr) break;  // null: every current value was seen
    out.emplace_back(kvEntry_Key(e), std::string(static_cast<const char*>(kvEntry_Value(e)),
                                                 static_cast<size_t>(kvEntry_ValueLen(e))));
    kvEntry_Destroy(e);
  }
  kvWatcher_Destroy(w);
  if (s != NATS_OK) return link_.error(absl::StrCat("listing ", name_), s);
  return out;
}

namespace {

constexpr int64_t kNever = -1;  // expires_ns of a mailbox without a TTL

absl::Status bad_record(std::string_view what) {
  return IoFailedError(absl::StrCat("the NATS store: a ", sv(what),
                                    " record does not decode; was the bucket written by "
                                    "something other than postal?"));
}

}  // namespace

std::string encode_mailbox(const MailboxInfo& info) {
  return nlohmann::json{
      {"v", 1},
      {"public", info.is_public},
      {"created_ns", absl::ToUnixNanos(info.created_at)},
      {"expires_ns",
       info.expires_at == absl::InfiniteFuture() ? kNever : absl::ToUnixNanos(info.expires_at)},
      {"max_messages", info.max_messages},
      {"max_message_bytes", info.max_message_bytes},
      {"durable_all", info.durable_all}}
      .dump();
}

namespace {

// Typed reads of a decoded record that never throw and never convert out of range: nullopt when
// the member is missing or of another type.
std::optional<uint64_t> u64_at(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint64_t>();
}
std::optional<int64_t> i64_at(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX}) return std::nullopt;
  return it->get<int64_t>();
}
std::optional<bool> bool_at(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

}  // namespace

absl::StatusOr<MailboxInfo> decode_mailbox(std::string_view key, std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  std::optional<std::string> id = unhex(key);
  if (!id || !j.is_object() || i64_at(j, "v") != 1) return bad_record("mailbox");
  const std::optional<bool> is_public = bool_at(j, "public");
  const std::optional<bool> durable_all = bool_at(j, "durable_all");
  const std::optional<int64_t> created = i64_at(j, "created_ns");
  const std::optional<int64_t> expires = i64_at(j, "expires_ns");
  const std::optional<uint64_t> max_messages = u64_at(j, "max_messages");
  const std::optional<uint64_t> max_bytes = u64_at(j, "max_message_bytes");
  if (!is_public || !durable_all || !created || !expires || !max_messages || !max_bytes) {
    return bad_record("mailbox");
  }
  MailboxInfo info;
  info.id = *std::move(id);
  info.is_public = *is_public;
  info.created_at = absl::FromUnixNanos(*created);
  info.expires_at = *expires == kNever ? absl::InfiniteFuture() : absl::FromUnixNanos(*expires);
  info.max_messages = *max_messages;
  info.max_message_bytes = *max_bytes;
  info.durable_all = *durable_all;
  return info;
}

std::optional<std::string> unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]);
    const int lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::string encode_marks(const Marks& marks) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [group, seqs] : marks) {
    nlohmann::json lanes = nlohmann::json::array();
    for (const auto& [seq, lane] : seqs) lanes.push_back({seq, std::string(1, lane)});
    j[hex(group)] = std::move(lanes);
  }
  return j.dump();
}

absl::StatusOr<Marks> decode_marks(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return bad_record("settlement");
  Marks marks;
  for (const auto& [group_hex, seqs] : j.items()) {
    std::optional<std::string> group = unhex(group_hex);
    if (!group || !seqs.is_array()) return bad_record("settlement");
    auto& lane_of = marks[*group];
    for (const auto& pair : seqs) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_unsigned() ||
          !pair[1].is_string() || pair[1].get_ref<const std::string&>().size() != 1) {
        return bad_record("settlement");
      }
      lane_of[pair[0].get<uint64_t>()] = pair[1].get_ref<const std::string&>()[0];
    }
  }
  return marks;
}

char lane_letter(Priority priority) {
  switch (priority) {
    case Priority::kCritical: return 'c';
    case Priority::kUrgent: return 'u';
    case Priority::kNormal: return 'n';
  }
  return 'n';
}

}  // namespace postal::mail::nats
