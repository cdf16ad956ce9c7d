// inbox.h — `Inbox`: durable acceptance of messages, deduplicated by identity and fingerprint
// (M-INBOX-1, M-INBOX-2), in one SQLite file. Processing is `InboxWorker` (inbox_worker.h), the
// outbox `Outbox` (outbox.h).
//
//   auto inbox = Inbox::open(dir / "inbox.db", {.durability = Durability::kDisk});
//   absl::StatusOr<AcceptReceipt> r = (*inbox)->accept({
//       .scope = InboxScope::tenant(verified_tenant), .source = "orders-service",
//       .consumer = "orders.projection.v1", .message_id = event_id,
//       .event_type = "order.created", .schema_version = 1, .payload = R"({"orderId":7})"});
//   // r.ok(): the transport may acknowledge its delivery now.
//
// What accept promises (M-INBOX-1): it returns after its own transaction committed, at the
// inbox's durability tier (`os`: survives a crash of the process; `disk`: survives power loss —
// sqlite_mail_store.h). `accepted`: a new record exists, PENDING. `duplicate`: the identity
// (scope, source, consumer, message id) was already retained; nothing changed — not its status,
// not its retry budget — and the receipt carries its current status (any of the five). Two
// processes accepting one identity on one file at the same time get one `accepted` between them.
// An error means nothing was stored by this call: do not acknowledge; redeliver the same identity.
//
// M-INBOX-2: the fingerprint covers event type, schema version and the canonical payload
// (canonical_json.h); metadata is not part of it. The same identity with another fingerprint
// fails with IdentityConflict and the retained record is unchanged. A payload that is not
// canonicalizable JSON fails with InvalidPayload; nothing is truncated.
//
// The file: WAL mode, a versioned schema (`PRAGMA user_version`, with `application_id`
// 0x50494E42 "PINB" marking an inbox so a mail store file is never mistaken for one), the store
// file checks of M-STORE-1 (symlinks, FIFOs, non-regular files refused without blocking).
// Handlers' tables and the outbox live in the same file, so they commit with the inbox's writes.
//
// Thread-safety: every method may be called from any thread; accepts in one process take turns
// on one connection; other processes on the same file wait for SQLite's write lock (up to
// `busy_timeout`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "postal/mail/canonical_json.h"
#include "postal/mail/clock.h"
#include "postal/mail/sqlite_mail_store.h"

namespace postal::mail {

namespace store {
class Db;
}

// Whose message this is: a tenant (its id derived from authenticated context) or, on purpose,
// nobody in particular.
struct InboxScope {
  enum class Kind : uint8_t { kGlobal, kTenant };
  Kind kind = Kind::kGlobal;
  std::string id{};  // the tenant id; empty for kGlobal

  static InboxScope global() { return {}; }
  static InboxScope tenant(std::string id) { return {Kind::kTenant, std::move(id)}; }
  bool operator==(const InboxScope&) const = default;
};
std::string to_string(const InboxScope& scope);  // "global" | "tenant:<id>"

enum class InboxStatus : uint8_t { kPending, kProcessing, kCompleted, kRetryable, kDead };
std::string_view to_string(InboxStatus status);  // "PENDING", … as stored
std::optional<InboxStatus> parse_inbox_status(std::string_view name);

struct InboxMessage {
  InboxScope scope{};
  std::string source{};      // the producer's stable identity
  std::string consumer{};    // the logical effect, e.g. "orders.projection.v1"
  std::string message_id{};  // the producer's event id, the same on every redelivery
  std::string event_type{};
  int64_t schema_version = 1;
  std::string payload = "{}";                     // JSON text; stored in canonical form
  std::map<std::string, std::string> metadata{};  // trace/correlation/causation: not fingerprinted
};

struct AcceptReceipt {
  enum class Kind : uint8_t { kAccepted, kDuplicate };
  Kind kind = Kind::kAccepted;
  int64_t id = 0;  // the record's id in this inbox
  InboxStatus status = InboxStatus::kPending;
};

// One retained record, as stored.
struct InboxRecord {
  int64_t id = 0;
  InboxMessage message{};  // payload canonical
  std::string fingerprint{};
  InboxStatus status = InboxStatus::kPending;
  int64_t attempts = 0;
  absl::Time accepted_at{};
  absl::Time next_attempt_at{};  // RETRYABLE: not before; PROCESSING: the lease's end
  std::string last_error{};
};

struct InboxOptions {
  Durability durability = Durability::kOs;
  std::shared_ptr<Clock> clock{};  // null: a SystemClock
  JsonLimits limits{};
  // Declared consumers: when non-empty, accept refuses any other (an ingress-only deployment
  // declares them without handlers). Empty: any consumer.
  std::vector<std::string> consumers{};
  absl::Duration busy_timeout = absl::Seconds(5);
  std::string vfs{};  // empty: SQLite's default (tests pass a crash simulator)
};

// `postal inbox status`: counts by consumer and status, and the oldest PENDING/RETRYABLE record.
struct InboxStatusReport {
  std::map<std::string, std::map<InboxStatus, int64_t>> counts{};  // consumer → status → count
  std::optional<absl::Time> oldest_pending{};  // accepted_at of the oldest record not yet done
};

class Inbox {
 public:
  static absl::StatusOr<std::unique_ptr<Inbox>> open(const std::filesystem::path& path,
                                                     InboxOptions options = {});
  static int schema_version();
  ~Inbox();
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  // M-INBOX-1, M-INBOX-2; see the contract above.
  absl::StatusOr<AcceptReceipt> accept(const InboxMessage& message);

  absl::StatusOr<std::optional<InboxRecord>> record(int64_t id);
  absl::StatusOr<InboxStatusReport> status();
  // Operator recovery: DEAD records (of `consumer`, or all when empty) back to PENDING with a
  // fresh attempt budget. Returns how many moved.
  absl::StatusOr<int64_t> retry_dead(std::string_view consumer = {});

  const std::filesystem::path& path() const { return path_; }
  const InboxOptions& options() const { return options_; }
  Clock& clock() const { return *clock_; }
  bool declares(std::string_view consumer) const;

  // Another connection to the file with the inbox's pragmas (workers and publishers use one
  // each). Internal: store::Db is not part of the public API.
  absl::StatusOr<std::unique_ptr<store::Db>> connect() const;

 private:
  Inbox(std::filesystem::path path, InboxOptions options);

  const std::filesystem::path path_;
  const InboxOptions options_;
  const std::shared_ptr<Clock> clock_;
  absl::Mutex mu_;
  std::unique_ptr<store::Db> db_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace postal::mail
