// mailbox_export.h — a retained mailbox's stored messages as a JSON artifact, and back
// (`postal mail export` / `postal mail import`).
//
// The export is one JSON object:
//
//   {"format": "postal.mailbox-export", "version": 1,
//    "mailbox": {"id": "tasks@agents.example/queue", "max_messages": 0, "max_message_bytes": 0,
//                "durable_all": false, "expires_at_ms": null},
//    "messages": [{"seq": 7, "priority": "urgent", "stored_at_ms": 1764700000000,
//                  "body_base64": "…"}, …]}
//
// Messages are listed in replay order (critical, urgent, normal, FIFO within each: M-PRIO-1);
// `body_base64` is the stored body byte for byte (for a letter posted through a provider, its
// wire form), so a round trip is exact. `seq` and `stored_at_ms` say where a message came from;
// an import stores each message anew (new sequence numbers, stored now) in file order, which
// keeps the order within each priority. Private mailboxes are not exported: their id is their
// only secret (M-BOX-4).
//
// Import (M-STORE-1, M-STORE-2) reads the file through `read_artifact_file` (no symlinks, FIFOs
// or other non-regular files; at most 64 MiB), parses and checks all of it — format, version,
// every field, every priority and every body's base64 — and only then changes the store:
// it creates the mailbox with the exported bounds and what is left of its TTL (an existing one
// must have the same bounds, else `MailboxConflict`), then stores every message with one
// `MailStore::append_all`. Any failure leaves the store as it was: nothing stored, and a mailbox
// the import created is removed again.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/mail_store.h"

namespace postal::mail {

inline constexpr std::string_view kMailboxExportFormat = "postal.mailbox-export";
inline constexpr int kMailboxExportVersion = 1;

// The export of mailbox `id` as JSON text. MailboxNotFound, or InvalidArgument for a private one.
absl::StatusOr<std::string> export_mailbox(MailStore& store, std::string_view id);

struct ImportResult {
  std::string mailbox;    // the store's id
  bool created = false;   // the import created the mailbox (false: it existed)
  uint64_t messages = 0;  // messages stored
};

// Imports the export in `file` (all or nothing, see above); `now` measures the TTL left.
absl::StatusOr<ImportResult> import_mailbox(MailStore& store, const std::filesystem::path& file,
                                            absl::Time now);
// The same, from JSON text already in memory (`file` names it in errors).
absl::StatusOr<ImportResult> import_mailbox_json(MailStore& store, std::string_view json,
                                                 std::string_view file, absl::Time now);

}  // namespace postal::mail
