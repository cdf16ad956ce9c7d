// The mem provider's give-ups: dead-letter records (M-DLQ-1), the nesting cap and parking
// (M-DLQ-2), and where a give-up lands (M-DLQ-3).
#include "absl/strings/str_cat.h"
#include "mem_state.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::mem_internal {

size_t dead_letter_depth(const MailAddress& address, std::string_view suffix) {
  if (suffix.empty()) return 0;
  std::string_view path = address.path();
  size_t depth = 0;
  while (path.ends_with(suffix)) {
    ++depth;
    path.remove_suffix(suffix.size());
  }
  return depth;
}

absl::StatusOr<MailAddress> dead_letter_topic_of(const DeadLetterOptions& options,
                                                 const MailAddress& address) {
  // At the cap a give-up is parked in the mailbox itself: say so, rather than name a deeper
  // mailbox that is never written. So too when the suffix would take the address past
  // MailAddress::kMaxLength (give_up_locked parks there then).
  if (dead_letter_depth(address, options.suffix) + 1 > options.max_nesting) return address;
  absl::StatusOr<MailAddress> topic = address.with_path_suffix(options.suffix);
  return topic.ok() ? topic : absl::StatusOr<MailAddress>(address);
}

void give_up_locked(BusState& bus, const std::shared_ptr<const Config>& config, Topic& from,
                    Letter letter, DeadLetterReason reason, uint32_t attempts,
                    std::string_view error) {
  absl::Time now = bus.clock->now();
  from.last_activity = now;
  // M-RETRY-6: the mailbox's choice, else the provider's.
  const std::optional<DeadLetterOptions> dead_letter = dead_letter_locked(bus, *config, from);
  if (!dead_letter.has_value()) {
    ++from.dropped;  // dead-lettering is opt-in; counted, so nothing vanishes unseen
    return;
  }
  const DeadLetterOptions& options = *dead_letter;
  uint64_t depth = dead_letter_depth(from.address, options.suffix) + 1;
  uint64_t round = round_of(letter);
  // M-DLQ-1: one give-up, one record: a new copy with its own send id, the original `to`.
  Letter record = std::move(letter);
  const std::string original_send_id = record.headers.get(kSendId).value_or("");
  strip_system_headers(record.headers);
  record.headers.set(kSendId, mint_send_id());
  record.headers.set(kSentAt, format_iso8601(now));
  record.headers.set(kDeadLetterReason, std::string(to_string(reason)));
  record.headers.set(kDeadLetterAttempts, uint64_t{attempts});
  record.headers.set(kDeadLetterRound, round);
  record.headers.set(kDeadLetterError, std::string(error));
  record.headers.set(kDeadLetterTopic, from.address.canonical());
  record.headers.set(kDeadLetterDepth, depth);
  record.headers.set(kDeadLetterSendId, original_send_id);
  ++from.dead_lettered;
  // create() checked that the suffix is valid, so the target fails only when the suffix takes
  // the address past MailAddress::kMaxLength.
  absl::StatusOr<MailAddress> target = from.address.with_path_suffix(options.suffix);
  if (depth > options.max_nesting || !target.ok()) {
    // M-DLQ-2: parked, never handed to anyone again; only peek_parked / purge_parked see it.
    // M-DLQ-1 still holds where no dead-letter topic can be named: exactly one record, parked.
    record.headers.set(kDeadLetterTerminal, true);
    report(MemEvent::kParked,
           depth > options.max_nesting
               ? absl::StrCat("mem: letter '", record.id, "' given up again at dead-letter depth ",
                              depth - 1, " on ", from.address.canonical(), " (max_nesting ",
                              options.max_nesting, "); parked there: read it with peek_parked, ",
                              "remove it with purge_parked")
               : absl::StrCat("mem: letter '", record.id, "' given up on a mailbox whose ",
                              "dead-letter topic would be longer than ", MailAddress::kMaxLength,
                              " bytes; parked there: read it with peek_parked"));
    from.parked.push_back(std::move(record));
    return;
  }
  post_locked(bus, config, bus.topic_locked(*target), std::move(record));
}

}  // namespace postal::mail::mem_internal
