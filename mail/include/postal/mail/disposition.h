// disposition.h — how a consumer settles one copy of a letter (M-ACK-2, M-ACK-4).
//
//   disposition   this copy           handed to anyone again   provider tidies up afterwards
//   kHandled      removed             no                       no
//   kDiscard      removed             no                       yes (mem: dead-letters it when a
//                                                              dead-letter queue is enabled;
//                                                              otherwise it is dropped)
//   kUnhandled    back in the queue   yes                      no
//   kTerminate    removed             no                       no (never dead-lettered: the
//                                                              consumer says it must not be
//                                                              retried nor kept; counted)
//
// `kHandled` means "I am done with this copy", whatever was done with it — including deciding it
// is malformed and dropping it. `kDiscard` adds the provider's own give-up step; never assume it
// means a dead-letter queue — ask `MailProvider::can(Capability::kDeadLetter)`.
//
// These four are understood by every provider. Any other value is the provider's own vocabulary,
// settled by name (`Delivery::ack(std::string_view)`) and declared by
// `MailProvider::understands()`; an undeclared one fails with UnsupportedCapability before
// anything changes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace postal::mail {

enum class Disposition : uint8_t { kHandled, kDiscard, kUnhandled, kTerminate };

// "handled", "discard", "unhandled", "terminate".
std::string_view to_string(Disposition disposition);
// The core disposition named `name`; nullopt for any other name.
std::optional<Disposition> parse_disposition(std::string_view name);

}  // namespace postal::mail
