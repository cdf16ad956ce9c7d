// sqlite_mailbox_rows.h — the SQL of the `mailbox` and `message` tables, one function per
// statement, used by SqliteMailStore on whichever connection the caller owns.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/mail_store.h"
#include "sqlite_db.h"

namespace postal::mail::store {

absl::StatusOr<std::optional<MailboxInfo>> select_mailbox(Db& db, std::string_view id);
absl::Status insert_mailbox(Db& db, const MailboxInfo& info);
// Deletes the mailbox, its messages and their settlement marks; first records their highest seq as a lower bound of the
// store's next one (meta `next_seq`), so no seq is ever reused after a reopen.
absl::Status delete_mailbox(Db& db, std::string_view id);
// meta `next_seq` becomes at least `next`: every transaction that deletes messages calls it
// (appends do not: the highest stored seq is its own record, select_high_water).
absl::Status keep_high_water(Db& db, uint64_t next);
// Mailboxes whose TTL has not ended at `now`.
absl::StatusOr<uint64_t> count_live_mailboxes(Db& db, absl::Time now);
// Every mailbox (expired ones included), or only the live public ones, sorted by id.
absl::StatusOr<std::vector<MailboxInfo>> select_mailboxes(Db& db, bool live_public_only,
                                                          absl::Time now);
// Mailboxes whose TTL ended by `now`.
absl::StatusOr<std::vector<MailboxInfo>> select_expired(Db& db, absl::Time now);

absl::StatusOr<uint64_t> count_messages(Db& db, std::string_view mailbox);
absl::StatusOr<std::vector<StoredMessage>> select_lane(Db& db, std::string_view mailbox,
                                                       const LaneRange& range);
// Queue-group settlement marks (M-RECV-4), table `group_settled`.
absl::StatusOr<bool> group_has_marks(Db& db, std::string_view mailbox, std::string_view group);
absl::StatusOr<std::set<std::string, std::less<>>> select_settling_groups(Db& db,
                                                                         std::string_view mailbox);
// Marks each of `seqs` the mailbox holds on disk; how many marks are new.
absl::StatusOr<uint64_t> insert_marks(Db& db, std::string_view mailbox, std::string_view group,
                                      const std::vector<uint64_t>& seqs);
absl::StatusOr<std::vector<uint64_t>> select_marks(Db& db, std::string_view mailbox,
                                                   std::string_view group);

// The highest sequence number ever handed out, from the messages and the persisted mark.
absl::StatusOr<uint64_t> select_high_water(Db& db);

// Milliseconds since the epoch, the store's time unit.
inline int64_t to_ms(absl::Time t) { return absl::ToUnixMillis(t); }

}  // namespace postal::mail::store
