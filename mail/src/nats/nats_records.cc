#include "nats_records.h"

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

absl::StatusOr<MailboxInfo> decode_mailbox(std::string_view key, std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  std::optional<std::string> id = unhex(key);
  if (!id || !j.is_object() || j.value("v", 0) != 1) return bad_record("mailbox");
  try {
    MailboxInfo info;
    info.id = *std::move(id);
    info.is_public = j.at("public").get<bool>();
    info.created_at = absl::FromUnixNanos(j.at("created_ns").get<int64_t>());
    const int64_t expires = j.at("expires_ns").get<int64_t>();
    info.expires_at = expires == kNever ? absl::InfiniteFuture() : absl::FromUnixNanos(expires);
    info.max_messages = j.at("max_messages").get<uint64_t>();
    info.max_message_bytes = j.at("max_message_bytes").get<uint64_t>();
    info.durable_all = j.at("durable_all").get<bool>();
    return info;
  } catch (const nlohmann::json::exception&) {
    return bad_record("mailbox");
  }
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
  try {
    for (const auto& [group_hex, seqs] : j.items()) {
      std::optional<std::string> group = unhex(group_hex);
      if (!group) return bad_record("settlement");
      auto& lane_of = marks[*group];
      for (const auto& pair : seqs) {
        const std::string lane = pair.at(1).get<std::string>();
        if (lane.size() != 1) return bad_record("settlement");
        lane_of[pair.at(0).get<uint64_t>()] = lane[0];
      }
    }
  } catch (const nlohmann::json::exception&) {
    return bad_record("settlement");
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
