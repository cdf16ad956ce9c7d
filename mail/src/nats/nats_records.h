// nats_records.h — the NATS store's KV buckets and what it keeps in them: mailbox records and
// queue-group settlement marks (internal).
#pragma once

#include <nats/nats.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nats_link.h"
#include "postal/mail/mail_store.h"

namespace postal::mail::nats {

// One KV bucket (history 1, file storage). Keys are hex, so any id is a valid key.
class Bucket {
 public:
  static absl::StatusOr<std::unique_ptr<Bucket>> open(const NatsLink& link, std::string name,
                                                      int replicas);
  ~Bucket();
  Bucket(const Bucket&) = delete;
  Bucket& operator=(const Bucket&) = delete;

  struct Entry {
    std::string value;
    uint64_t revision = 0;
  };
  absl::StatusOr<std::optional<Entry>> get(const std::string& key);
  // False when the key exists already (create) or moved past `revision` (update): the caller
  // lost a race and reads again.
  absl::StatusOr<bool> create(const std::string& key, std::string_view value);
  absl::StatusOr<bool> update(const std::string& key, std::string_view value, uint64_t revision);
  // Removes the key and leaves no delete marker behind (a purge of its subject).
  absl::Status erase(const std::string& key);
  // Every key with its value.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> all();

 private:
  Bucket(const NatsLink& link, std::string name) : link_(link), name_(std::move(name)) {}
  const NatsLink& link_;
  const std::string name_;
  kvStore* kv_ = nullptr;
};

std::string encode_mailbox(const MailboxInfo& info);
// `key` is the record's key (the hex id). InvalidArgument-free: a record that does not decode
// is IoFailed (someone else wrote the bucket).
absl::StatusOr<MailboxInfo> decode_mailbox(std::string_view key, std::string_view json);
std::optional<std::string> unhex(std::string_view hex);

// Marks of one mailbox: group → (seq → lane letter 'c' | 'u' | 'n').
using Marks = std::map<std::string, std::map<uint64_t, char>, std::less<>>;
std::string encode_marks(const Marks& marks);
absl::StatusOr<Marks> decode_marks(std::string_view json);

char lane_letter(Priority priority);

}  // namespace postal::mail::nats
