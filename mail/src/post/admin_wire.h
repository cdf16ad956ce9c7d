// admin_wire: the admin verbs (mail_admin.h) across the post wire, generically — one
// MailAdminCall per verb, whatever the verb (internal).
//
// A verb's fields are cereal-encoded by its own `serialize`; results and the vocabulary they
// hold (letters as WireLetter, statuses as WireMailboxStatus, copies, create results, policies,
// addresses as canonical text) by the functions in admin_wire.cc. Decoding is bounded like every
// decode from a socket (wire/codec.h), and what does not decode is refused with InvalidArgument
// naming the verb, before anything runs.
//
// Addresses: the caller sends post:// addresses; the host maps a verb's target to mem:// before
// it runs (an address that does not parse fails the verb with InvalidMailboxAddress) and every
// address of the result back to post:// (mail_admin.h lists where results hold addresses).
#pragma once

#include "absl/status/statusor.h"
#include "postal/mail/mail_admin.h"
#include "postal/mail/post_messages.h"

namespace postal::mail::post_internal {

// The caller's side: `request` as a call (its reply_to unset), and the typed result of the
// answer to it.
absl::StatusOr<MailAdminCall> admin_call(const AdminRequest& request);
absl::StatusOr<AdminResult> admin_result_of(const AdminRequest& request,
                                            const MailAdminReply& reply);

// The host's side: decodes `call`, maps its target onto the mem scheme, runs it on `admin`, and
// answers with the result mapped back to the post scheme.
MailAdminReply serve_admin(MailAdmin& admin, const MailAdminCall& call);

}  // namespace postal::mail::post_internal
