// mq9_subject.h — NATS subjects (validity, wildcard matching) and the mq9 v1 subject space
// (docs/mq9.md): which verb and mailbox a subject names.
//
//   $mq9.AI.MAILBOX.CREATE                          request: create a mailbox
//   $mq9.AI.MAILBOX.MSG.{mail_id}[.critical|.urgent] publish: store, then push
//   $mq9.AI.MAILBOX.MSG.{mail_id}[.*|.>]            subscribe: replay, then live (all priorities)
//   $mq9.AI.MAILBOX.MSG.{mail_id}.critical|.urgent   subscribe: one priority only
//   $mq9.AI.MAILBOX.DELETE.{mail_id}.{msg_id}       erase one stored message
//   $mq9.AI.PUBLIC.LIST                             request: the listing; subscribe: its events
//
// A mail_id may hold dots (`task.queue`), so a trailing `critical`/`urgent` token is always a
// priority: public names may not end in one (`valid_mailbox_name`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "postal/mail/priority.h"

namespace postal::mail::mq9 {

inline constexpr std::string_view kCreateSubject = "$mq9.AI.MAILBOX.CREATE";
inline constexpr std::string_view kListSubject = "$mq9.AI.PUBLIC.LIST";
inline constexpr std::string_view kMsgPrefix = "$mq9.AI.MAILBOX.MSG.";
inline constexpr std::string_view kDeletePrefix = "$mq9.AI.MAILBOX.DELETE.";
inline constexpr std::string_view kSpacePrefix = "$mq9.";

// Tokens separated by '.', none empty, no whitespace or control bytes; with `wildcards`, a
// token may be `*`, and the last may be `>`.
bool valid_subject(std::string_view subject, bool wildcards);
// Whether `subject` (no wildcards) matches `pattern` (NATS rules).
bool subject_matches(std::string_view pattern, std::string_view subject);

enum class Mq9Verb { kNotMq9, kCreate, kMsg, kDelete, kList, kUnknown };

struct Mq9Subject {
  Mq9Verb verb = Mq9Verb::kNotMq9;
  std::string_view mailbox{};
  std::optional<Priority> priority{};  // MSG: named by the subject (publish: none = normal)
  bool wildcard = false;               // MSG: ended in `.*` or `.>` (subscribe only)
  uint64_t msg_id = 0;                 // DELETE
};

// What `subject` names in the mq9 space (kNotMq9 outside `$mq9.`, kUnknown for a `$mq9.`
// subject that is none of the verbs or is malformed).
Mq9Subject parse_mq9_subject(std::string_view subject);

// A public mailbox name: 1–255 bytes, a valid subject without wildcards, not ending in a
// priority token. InvalidArgument saying why.
absl::Status valid_mailbox_name(std::string_view name);

// The subject a stored message is pushed on: its mailbox and priority, as it was published.
std::string message_subject(std::string_view mailbox, Priority priority);
// The reply subject pushed with it: answering it deletes the message.
std::string delete_subject(std::string_view mailbox, uint64_t msg_id);

}  // namespace postal::mail::mq9
