// nats_records_fuzzer: the NATS store's KV records (mail/src/nats/nats_records.h) as a stranger
// with access to the buckets could write them. Decoding never crashes or throws; whatever
// decodes re-encodes to a record that decodes to the same value.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "nats/nats_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace postal::mail;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  // The first byte says how long the key is; the rest is the value.
  if (size == 0) return 0;
  const size_t key_length = std::min<size_t>(data[0], size - 1);
  const std::string_view key = input.substr(1, key_length);
  const std::string_view value = input.substr(1 + key_length);
  if (absl::StatusOr<MailboxInfo> info = nats::decode_mailbox(key, value); info.ok()) {
    absl::StatusOr<MailboxInfo> again =
        nats::decode_mailbox(nats::hex(info->id), nats::encode_mailbox(*info));
    if (!again.ok() || again->id != info->id || again->max_messages != info->max_messages ||
        again->expires_at != info->expires_at || again->is_public != info->is_public) {
      __builtin_trap();
    }
  }
  if (absl::StatusOr<nats::Marks> marks = nats::decode_marks(value); marks.ok()) {
    absl::StatusOr<nats::Marks> again = nats::decode_marks(nats::encode_marks(*marks));
    std::erase_if(*marks, [](const auto& g) { return g.second.empty(); });
    if (!again.ok()) __builtin_trap();
    std::erase_if(*again, [](const auto& g) { return g.second.empty(); });
    if (*again != *marks) __builtin_trap();
  }
  if (std::optional<std::string> bytes = nats::unhex(input); bytes && nats::hex(*bytes) != input) {
    __builtin_trap();
  }
  return 0;
}
