// mail_store.h — `MailStore`: where retained mailboxes and their messages are kept.
//
// A store holds mailboxes (created with bounds and a TTL) and, per mailbox, three append-ordered
// lanes, one per priority. Two implementations share this contract and one test suite
// (tests/mail/mail_store_test.cc): `MemMailStore` (mem_mail_store.h, everything in memory) and
// `SqliteMailStore` (sqlite_mail_store.h, one SQLite file per store).
//
// Contract
//   * Mailboxes (M-BOX). `create` is idempotent on the id: an existing mailbox succeeds with
//     `created = false` and keeps its first TTL; its bounds (`max_messages`,
//     `max_message_bytes`) must equal the request's or the call fails with `MailboxConflict`
//     (M-BOX-1). Of concurrent creates of one id exactly one reports `created` (M-BOX-2). A
//     private mailbox (`is_public = false`) gets a store-generated id of 128 random bits from the
//     OS CSPRNG (32 hex digits) and never appears in `list_public` (M-BOX-4). At most
//     `StoreLimits::max_mailboxes` mailboxes exist at once; one more fails with
//     `BudgetExhausted` and creates nothing (M-BOX-5).
//   * Messages. `append` returns once the message is stored — for a durable message in
//     `SqliteMailStore`, after the transaction holding it committed at the store's
//     `Durability` — with the message's sequence number. Sequence numbers grow across the
//     whole store and are never reused, also across restarts. A body over `max_message_bytes`,
//     or an append to a mailbox holding `max_messages`, fails with `BudgetExhausted`; exactly the
//     limit is accepted (M-BOX-6). A failed append stores nothing (M-STORE-2).
//   * Order (M-PRIO-1). `read` returns one lane in append order; `read_all` returns a mailbox in
//     the order a replay delivers it: critical, then urgent, then normal, FIFO within each.
//   * Durability (M-PRIO-2). `critical` and `urgent` are durable; `normal` is durable only in a
//     mailbox created with `durable_all`. In `MemMailStore` nothing outlives the object.
//   * Removal. `erase` removes one message (M-RECV-5); `consume_through` removes a lane's prefix
//     (a range delete, the cheap way to consume in order); `remove` deletes a mailbox and its
//     messages; `expire(now)` removes every mailbox whose TTL ended by `now` and returns them
//     (M-BOX-3) so the caller can tell subscribers. A mailbox whose TTL ended is gone for
//     every verb even before `expire` sweeps it.
//   * Queue-group settlement (M-RECV-4). `settle` marks messages as settled by one queue group of
//     a mailbox; `settled` lists the marks and `read_unsettled` replays a mailbox without them.
//     A mark lives exactly as long as its message: `erase`, `consume_through`, `remove` and
//     `expire` drop the marks of what they remove, so marks never outgrow messages × groups, and
//     at most `StoreLimits::max_settling_groups` groups of one mailbox hold marks at once (one
//     more fails with `BudgetExhausted` and marks nothing). A mark for a message the mailbox
//     does not hold is ignored. In `SqliteMailStore` marks of durable messages are durable.
//   * Errors are statuses from mail_errors.h: `MailboxNotFound`, `MailboxConflict`,
//     `BudgetExhausted`, `IoFailed`, or `InvalidArgument` for a malformed request.
//
// Thread-safety: every method may be called from any thread, concurrently.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/priority.h"

namespace postal::mail {

// What a `create` asks for.
struct MailboxSpec {
  std::string name{};     // a public mailbox's id: 1–255 bytes, no NUL; empty for private
  bool is_public = true;  // false: the store generates the id (M-BOX-4)
  absl::Duration ttl = absl::ZeroDuration();  // from creation; zero = never expires
  uint64_t max_messages = 0;                  // 0 = unbounded
  uint64_t max_message_bytes = 0;             // 0 = unbounded
  bool durable_all = false;                   // normal-priority messages are durable too (M-PRIO-2)
};

// A mailbox as stored.
struct MailboxInfo {
  std::string id{};
  bool is_public = true;
  absl::Time created_at{};
  absl::Time expires_at = absl::InfiniteFuture();
  uint64_t max_messages = 0;
  uint64_t max_message_bytes = 0;
  bool durable_all = false;

  bool expired(absl::Time now) const { return now >= expires_at; }
};

struct CreateResult {
  MailboxInfo mailbox{};  // the stored mailbox: on `created = false`, the first create's TTL
  bool created = false;   // false: it existed already (M-BOX-1)
  std::string address{};  // through a provider: the mailbox's address (a private one's only name)
};

struct StoredMessage {
  uint64_t seq = 0;  // the store's id for the message (M-RECV-5)
  Priority priority = Priority::kNormal;
  absl::Time stored_at{};
  std::string body{};
};

// One message of an `append_all`.
struct NewMessage {
  Priority priority = Priority::kNormal;
  std::string body{};
};

// Which part of one lane `read` returns: sequence numbers in (after, through], oldest first.
struct LaneRange {
  Priority priority = Priority::kNormal;
  uint64_t after = 0;
  uint64_t through = std::numeric_limits<uint64_t>::max();
  size_t limit = 1024;
};

// Bounds of a whole store.
struct StoreLimits {
  size_t max_mailboxes = 1024;  // M-BOX-5
  // Queue groups of one mailbox that may hold settlement marks at once (M-RECV-4).
  size_t max_settling_groups = 64;
};

// The longest queue group name (bytes); a name is 1…kMaxQueueGroupBytes bytes without NUL.
inline constexpr size_t kMaxQueueGroupBytes = 255;
// InvalidArgument (saying what to change) unless `group` is a valid queue group name.
absl::Status check_queue_group(std::string_view group);

class MailStore {
 public:
  virtual ~MailStore() = default;

  // "mem", "sqlite" or "nats".
  virtual std::string_view kind() const = 0;
  // Whether durable messages outlive this object (a reopened store sees them).
  virtual bool persistent() const = 0;
  // Whether normal messages of a mailbox not created `durable_all` are kept in memory only
  // (M-PRIO-2): so in the SQLite store. The NATS store keeps them in its file stream too
  // (nats_mail_store.h says why); a store that keeps nothing keeps them in memory as well.
  virtual bool volatile_normal() const { return true; }

  virtual absl::StatusOr<CreateResult> create(const MailboxSpec& spec) = 0;
  virtual absl::StatusOr<MailboxInfo> mailbox(std::string_view id) = 0;
  // Public mailboxes whose TTL has not ended, sorted by id (M-BOX-4).
  virtual absl::StatusOr<std::vector<MailboxInfo>> list_public() = 0;
  virtual absl::Status remove(std::string_view id) = 0;
  // Removes every mailbox whose TTL ended by `now`; the mailboxes it removed.
  virtual absl::StatusOr<std::vector<MailboxInfo>> expire(absl::Time now) = 0;

  // The new message's sequence number.
  virtual absl::StatusOr<uint64_t> append(std::string_view id, Priority priority,
                                          std::string body) = 0;
  // `append` without waiting for the commit: `done` gets what `append` would return, once the
  // message is stored — a durable one after its commit, on the store's writer thread (so `done`
  // must be short and must not call back into the store's writes); otherwise at once, on the
  // calling thread. Concurrent callers share commits (group commit), which a caller that waits in
  // `append` cannot do for others while it waits. The default calls `append`.
  //
  // `commit_here_if_idle`: a store that group-commits on a writer thread may instead commit on the
  // calling thread when nothing else is queued or committing (and its tier's commit is short:
  // `os`); `done` then runs here too, before append_async returns. For a caller with nothing
  // else to do meanwhile (a handler with no message behind it), it saves two thread wake-ups.
  using AppendDone = absl::AnyInvocable<void(absl::StatusOr<uint64_t>) &&>;
  struct AppendAsync {
    bool commit_here_if_idle = false;
  };
  virtual void append_async(std::string_view id, Priority priority, std::string body,
                            AppendDone done, AppendAsync how);
  // Stores every message of `batch`, in order, or none of them (M-STORE-2): the bounds are
  // checked for the whole batch first (M-BOX-6), and the durable ones commit in one transaction.
  // Their sequence numbers, in batch order. For bulk loads (an import), not the publish path.
  virtual absl::StatusOr<std::vector<uint64_t>> append_all(std::string_view id,
                                                           std::vector<NewMessage> batch) = 0;
  virtual absl::StatusOr<std::vector<StoredMessage>> read(std::string_view id,
                                                          const LaneRange& range) = 0;
  // False when the mailbox has no message `seq`.
  virtual absl::StatusOr<bool> erase(std::string_view id, uint64_t seq) = 0;
  // Removes every message of one lane with a sequence number up to `seq`; how many.
  virtual absl::StatusOr<uint64_t> consume_through(std::string_view id, Priority priority,
                                                   uint64_t seq) = 0;
  virtual absl::StatusOr<uint64_t> count(std::string_view id) = 0;
  // The highest sequence number handed out so far (0: none).
  virtual uint64_t last_seq() const = 0;

  // M-RECV-4: records that queue group `group` of mailbox `id` settled `seqs` (one transaction;
  // sequence numbers the mailbox does not hold are skipped). A group that holds no mark yet,
  // when `StoreLimits::max_settling_groups` groups of the mailbox already do, fails with
  // `BudgetExhausted`; an invalid name with `InvalidArgument`. Both mark nothing. An empty
  // `seqs` only checks that the group may settle.
  virtual absl::Status settle(std::string_view id, std::string_view group,
                              const std::vector<uint64_t>& seqs) = 0;
  // The sequence numbers `group` settled in mailbox `id`, ascending.
  virtual absl::StatusOr<std::vector<uint64_t>> settled(std::string_view id,
                                                        std::string_view group) = 0;

  // Every stored message of a mailbox with a sequence number up to `through`, in replay order
  // (M-PRIO-1): critical, urgent, normal, FIFO within each.
  absl::StatusOr<std::vector<StoredMessage>> read_all(
      std::string_view id, uint64_t through = std::numeric_limits<uint64_t>::max());
  // `read_all` without the messages `group` settled (M-RECV-4): what a queue group replays.
  absl::StatusOr<std::vector<StoredMessage>> read_unsettled(
      std::string_view id, std::string_view group,
      uint64_t through = std::numeric_limits<uint64_t>::max());
};

}  // namespace postal::mail
