// The umbrella header: everything a program needs to write actors and run them on a proc.
#pragma once

#include "postal/actors/actor.h"
#include "postal/actors/actor_handle.h"
#include "postal/actors/actor_ref.h"
#include "postal/actors/context.h"
#include "postal/actors/down.h"
#include "postal/actors/supervision.h"
#include "postal/runtime/client.h"
#include "postal/runtime/port.h"
#include "postal/runtime/proc.h"
#include "postal/wire/any.h"
#include "postal/wire/headers.h"
#include "postal/wire/type_registry.h"

namespace postal {
using actors::Actor;
using actors::ActorHandle;
using actors::ActorRef;
using actors::ActorState;
using actors::ActorStatus;
using actors::Context;
using actors::Down;
using actors::Handler;
using actors::Handles;
using actors::RestartPolicy;
using actors::spawn;
using actors::SpawnOptions;
using actors::Supervision;
using actors::SupervisionEvent;
using runtime::Client;
using runtime::OncePortRef;
using runtime::PortRef;
using runtime::Proc;
using runtime::ProcOptions;
using runtime::SchedulerOptions;
}  // namespace postal
