// post_rig.h — two in-process Nodes for tests of the `post` provider: a MailboxHost on one, the
// PostProvider's Client on the other, talking over ipc abstract sockets (real channels,
// serialized envelopes).
#pragma once

#include <unistd.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "postal/actors/actor_handle.h"
#include "postal/mail/mailbox_host.h"
#include "postal/mail/post_provider.h"
#include "postal/routing/node.h"
#include "postal/runtime/client.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::testing {

inline std::unique_ptr<routing::Node> start_node(std::string_view role) {
  static std::atomic<int> next{0};
  routing::NodeOptions o;
  o.id = runtime::ProcId{runtime::Uid::random(*runtime::Label::parse(role))};
  o.listen = *runtime::ChannelAddr::ipc_abstract(
      absl::StrCat("postal-mail-test-", ::getpid(), "-", sv(role), "-", next.fetch_add(1)));
  o.scheduler.workers = 2;
  o.system_actors = false;
  // R-CHAN-2: a push to a dead proc comes back undeliverable after this (tests wait on it).
  o.channel.delivery_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<routing::Node>> node = routing::Node::start(std::move(o));
  EXPECT_TRUE(node.ok()) << node.status();
  return node.ok() ? *std::move(node) : nullptr;
}

// Two procs: the host side and the client side. Destroyed client first.
struct Rig {
  std::unique_ptr<routing::Node> host_node;
  std::unique_ptr<routing::Node> client_node;
  std::unique_ptr<runtime::Client> client;
  runtime::ActorAddr host;
};

inline std::shared_ptr<Rig> make_rig(MemOptions options) {
  auto rig = std::make_shared<Rig>();
  rig->host_node = start_node("mailhost");
  rig->client_node = start_node("mailclient");
  if (!rig->host_node || !rig->client_node) return nullptr;
  absl::StatusOr<actors::ActorHandle<MailboxHost>> host =
      actors::spawn<MailboxHost>(rig->host_node->proc(), kMailboxHostName, std::move(options));
  EXPECT_TRUE(host.ok()) << host.status();
  if (!host.ok()) return nullptr;
  rig->host = host->addr();
  rig->client = *runtime::Client::attach(rig->client_node->proc(), "mail-client");
  return rig;
}

// A provider on the rig's client, talking to `host` (default: the rig's MailboxHost; tests
// pass an actor of their own that speaks the host's side).
inline absl::StatusOr<std::unique_ptr<PostProvider>> provider_on(
    const std::shared_ptr<Rig>& rig, absl::Duration timeout = absl::Seconds(10),
    std::optional<runtime::ActorAddr> host = std::nullopt) {
  // The provider shares the rig through its context (aliasing): the procs outlive it.
  return PostProvider::create(
      PostOptions{.context = std::shared_ptr<runtime::SendContext>(rig, rig->client.get()),
                  .host = host.value_or(rig->host),
                  .timeout = timeout});
}

}  // namespace postal::mail::testing
