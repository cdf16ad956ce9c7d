// How a returned envelope is counted (issue 10, finding 5; the soak's ledger, decisions.md).
//
// `return_kind` names the failure for a summary: the transport reason ("ack timed out",
// "channel closed", "dial failed", ...), the invalid-reference reason ("actor does not exist",
// ...), "port gone" or "expired" — the root failure's (R-FAIL-5).
//
// `possibly_delivered` says whether the envelope may have reached its destination although it
// came back (R-CHAN-2: written and never acked): AckTimedOut (the client cannot tell a written
// frame from an unwritten one when the delivery timeout closes the channel, so all of them), and
// ChannelClosed except after a server's GOODBYE `server_stopping`, which promises that nothing
// past its ACK was processed (wire.md §11). Everything else is exact: not delivered.
#pragma once

#include <string>

#include "postal/runtime/delivery_failure.h"

namespace postal::routing {

std::string return_kind(const runtime::DeliveryFailure& root);
bool possibly_delivered(const runtime::DeliveryFailure& root);

}  // namespace postal::routing
