// How a returned envelope is counted (issue 10, finding 5; the soak's ledger, decisions.md).
//
// `return_kind` names the failure for a summary: the transport reason ("ack timed out",
// "channel closed", "dial failed", ...), the invalid-reference reason ("actor does not exist",
// ...), "port gone" or "expired" — the root failure's (R-FAIL-5).
//
// `possibly_delivered` says whether the envelope may have reached its destination although it
// came back (R-CHAN-2): the failure's typed `maybe_delivered`, which the channel client sets on
// what it wrote and never saw acked (AckTimedOut, ChannelClosed), never on what it never wrote,
// and never after a server's final ACK (GOODBYE `server_stopping` or `protocol_error`,
// wire.md §11). It travels in the failure entry's `flags` (§6.5). Everything else is exact: not
// delivered.
#pragma once

#include <string>

#include "postal/runtime/delivery_failure.h"

namespace postal::routing {

std::string return_kind(const runtime::DeliveryFailure& root);
bool possibly_delivered(const runtime::DeliveryFailure& root);

}  // namespace postal::routing
