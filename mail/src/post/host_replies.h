// What every MailboxHost handler shares: the error reply, the mem address of a wire address, the
// sending proc (internal).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "postal/actors/context.h"
#include "postal/mail/mail_address.h"
#include "postal/mail/post_messages.h"

namespace postal::mail::post_internal {

inline MailReply failed(const absl::Status& status) {
  MailReply r;
  r.status = WireStatus::of(status);
  return r;
}

// The mem address for a post address on the wire (any scheme: M-ADDR-3 keys by identity).
inline absl::StatusOr<MailAddress> mem_address(std::string_view text) {
  absl::StatusOr<MailAddress> a = MailAddress::parse(text);
  if (!a.ok()) return a.status();
  return MailAddress::parse(post_to_mem(*a));
}

inline std::string sender_proc(actors::Context& cx) {
  const runtime::MessageEnvelope* env = cx.envelope();
  return env ? env->sender().id.proc.to_string() : std::string();
}

}  // namespace postal::mail::post_internal
