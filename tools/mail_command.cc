// `postal mail post|fetch|peek|status|create|delete|subscribe ADDR`, `postal mail list`: one mail
// verb against a running topology. create, delete, list and subscribe (tail -f) are for retained
// mailboxes, which a MailboxHost serves when it has a store (its `store` spawn parameter).
//
// It reads the topology's state file (topology_state.h; `postal up` writes it), asks each
// recorded proc in turn for an actor named `mailbox-host` (mail::kMailboxHostName, a
// postal.MailboxHost), and runs the verb through a PostProvider from a throwaway proc on an
// abstract ipc socket. Only `post:` addresses are served by a topology.
#include <unistd.h>

#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "commands.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mailbox_host.h"
#include "postal/mail/post_office.h"
#include "postal/mail/post_provider.h"
#include "postal/mail/system_headers.h"
#include "postal/routing/node.h"
#include "postal/runtime/client.h"
#include "postal/wire/absl_compat.h"
#include "topology_state.h"

namespace postal::tools {
namespace {

int fail(const absl::Status& s) {
  std::fprintf(stderr, "postal mail: %s\n", std::string(s.message()).c_str());
  return 1;
}

// The first recorded proc whose `mailbox-host` answers.
absl::StatusOr<runtime::ActorAddr> find_mailbox_host(runtime::SendContext& cx,
                                                     const std::string& topology) {
  std::vector<TopologyState> topologies = read_topology_states(topology);
  if (topologies.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no running topology", topology.empty() ? "" : absl::StrCat(" named ", topology),
        "; start one with `postal up FILE`"));
  }
  const runtime::Uid uid =
      runtime::Uid::singleton(*runtime::Label::parse(std::string(mail::kMailboxHostName)));
  for (const TopologyState& state : topologies) {
    for (const TopologyMember& member : state.members) {
      if (member.kind != TopologyMember::Kind::kProc || member.dead) continue;
      absl::StatusOr<runtime::ProcAddr> proc = runtime::ProcAddr::parse(member.addr);
      if (!proc.ok()) continue;
      runtime::ActorAddr host = proc->actor(uid);
      absl::StatusOr<mail::MailReply> hello = actors::ActorRef<mail::MailboxHost>(host).request(
          cx, mail::MailHello{}, absl::Seconds(2));
      if (hello.ok()) return host;
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "no proc of ", topology.empty() ? std::string("the running topologies") : topology,
      " runs an actor named ", sv(mail::kMailboxHostName), " (type ", sv(mail::kMailboxHostType),
      "); add one to the topology file as [[actor]] name = \"", sv(mail::kMailboxHostName),
      "\" type = \"", sv(mail::kMailboxHostType), "\""));
}

void print_letter(const mail::Letter& l) {
  std::printf("id: %s\nto: %s\n", l.id.c_str(), l.to.c_str());
  for (const auto& header : l.headers) {
    std::visit(
        [&](const auto& v) {
          std::ostringstream os;
          os << v;
          std::printf("%s: %s\n", header.first.c_str(), os.str().c_str());
        },
        header.second);
  }
  std::optional<std::string> text = l.body.text();
  std::printf("\n%s\n", text ? text->c_str() : "<a body that is not text>");
}

// create, delete, list, subscribe; -1 for another verb.
int run_retained_verb(mail::PostOffice& office, const MailCommand& c) {
  if (c.verb == "create") {
    const mail::MailboxSpec spec{.ttl = absl::Seconds(c.ttl_s),
                                 .max_messages = c.max_messages,
                                 .max_message_bytes = c.max_message_bytes,
                                 .durable_all = c.durable_all};
    if (c.is_private) {
      // M-BOX-4: the store draws the id; the printed address is the only way to reach it.
      absl::StatusOr<mail::CreateResult> r = office.create_private_mailbox("post", spec);
      if (!r.ok()) return fail(r.status());
      std::printf("created private %s\n", r->address.c_str());
      return 0;
    }
    absl::StatusOr<mail::CreateResult> r = office.create_mailbox(c.address, spec);
    if (!r.ok()) return fail(r.status());
    std::printf("%s %s\n", r->created ? "created" : "existing", c.address.c_str());
    return 0;
  }
  if (c.verb == "delete") {
    if (absl::Status s = office.delete_mailbox(c.address); !s.ok()) return fail(s);
    std::printf("deleted %s\n", c.address.c_str());
    return 0;
  }
  if (c.verb == "list") {
    absl::StatusOr<std::vector<std::string>> listed = office.list_public("post");
    if (!listed.ok()) return fail(listed.status());
    for (const std::string& a : *listed) std::printf("%s\n", a.c_str());
    return 0;
  }
  if (c.verb != "subscribe") return -1;
  // tail -f: the stored letters (replay, as --deliver says), then each new one, until killed or
  // --count.
  std::optional<mail::DeliverPolicy> deliver = mail::parse_deliver_policy(c.deliver);
  if (!deliver.has_value()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--deliver '", c.deliver, "' is unknown; write all, new or last")));
  }
  absl::Mutex mu;
  uint64_t seen = 0;
  absl::StatusOr<mail::Subscription> sub = office.subscribe(
      c.address,
      [&](const mail::Letter& l) -> absl::Status {
        absl::MutexLock lock(&mu);
        if (seen > 0) std::printf("----\n");
        print_letter(l);
        std::fflush(stdout);
        ++seen;
        return absl::OkStatus();
      },
      {.deliver = *deliver});
  if (!sub.ok()) return fail(sub.status());
  absl::MutexLock lock(&mu);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return c.count > 0 && seen >= c.count; };
  mu.Await(absl::Condition(&done));
  return 0;
}

int run_verb(mail::PostOffice& office, const MailCommand& c) {
  if (int rc = run_retained_verb(office, c); rc >= 0) return rc;
  if (c.verb == "post") {
    mail::Letter letter = mail::Letter::text(c.data);
    if (!c.priority.empty()) letter.headers.set(mail::kPriority, c.priority);
    absl::StatusOr<mail::PostReceipt> r = office.post(c.address, std::move(letter));
    if (!r.ok()) return fail(r.status());
    std::printf("posted to %s: message id %s, send id %s, %s\n", r->address.c_str(),
                r->message_id.c_str(), r->send_id.c_str(),
                r->path == mail::PostPath::kPushed
                    ? absl::StrCat("pushed to ", r->deliveries, " subscriber(s)").c_str()
                    : "queued for fetch");
    return 0;
  }
  if (c.verb == "fetch") {
    std::optional<mail::Disposition> disposition = mail::parse_disposition(c.ack);
    if (!disposition) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "--ack ", c.ack,
          " is not a disposition; write handled, discard, unhandled or terminate")));
    }
    // handled: an auto fetch; otherwise a manual batch settled with the disposition asked for,
    // all at once (ack_all). --batch N copies, waiting up to --wait seconds for the first.
    mail::FetchOptions o;
    if (*disposition != mail::Disposition::kHandled) o.ack = mail::AckMode::kManual;
    o.max_messages = c.batch;
    o.max_wait = absl::Seconds(c.wait_s);
    absl::StatusOr<std::vector<mail::Delivery>> batch = office.fetch_batch(c.address, o);
    if (!batch.ok()) return fail(batch.status());
    if (batch->empty()) {
      std::printf("no message queued at %s\n", c.address.c_str());
      return 0;
    }
    for (size_t i = 0; i < batch->size(); ++i) {
      if (i > 0) std::printf("----\n");
      print_letter((*batch)[i].letter());
    }
    for (bool took : mail::ack_all(*batch, *disposition)) {
      if (!took && o.ack == mail::AckMode::kManual) {
        return fail(absl::AbortedError("a settlement did not take effect (its lease ended)"));
      }
    }
    return 0;
  }
  if (c.verb == "peek") {
    absl::StatusOr<std::vector<mail::Letter>> letters = office.peek(c.address, 10);
    if (!letters.ok()) return fail(letters.status());
    if (letters->empty()) std::printf("no message queued at %s\n", c.address.c_str());
    for (size_t i = 0; i < letters->size(); ++i) {
      if (i > 0) std::printf("----\n");
      print_letter((*letters)[i]);
    }
    return 0;
  }
  absl::StatusOr<mail::MailboxStatus> s = office.status(c.address);
  if (!s.ok()) return fail(s.status());
  std::printf("%s\n", s->to_json().c_str());
  return 0;
}

}  // namespace

int mail_command(const MailCommand& command) {
  static const std::set<std::string> kVerbs = {"post",   "fetch",  "peek", "status",
                                               "create", "delete", "list", "subscribe"};
  if (!kVerbs.contains(command.verb)) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("unknown verb '", command.verb,
                     "'; write post, fetch, peek, status, create, delete, list or subscribe")));
  }
  if (command.verb == "fetch" && !mail::parse_disposition(command.ack)) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--ack ", command.ack,
                     " is not a disposition; write handled, discard, unhandled or terminate")));
  }
  const bool create_private = command.verb == "create" && command.is_private;
  if (create_private && !command.address.empty()) {
    return fail(absl::InvalidArgumentError(
        "create --private draws the mailbox's address itself; give no address"));
  }
  // M-ADDR-2: a bad address fails before anything is contacted.
  if (command.verb != "list" && !create_private) {
    absl::StatusOr<mail::MailAddress> address = mail::MailAddress::parse(command.address);
    if (!address.ok()) return fail(address.status());
  }

  // R-SEC-1: the node authenticates with the topology's key (the state file's secret): the named
  // topology's, or the first running one's when none is named (docs/security.md).
  std::shared_ptr<const routing::ChannelKey> key;
  if (std::vector<TopologyState> states = read_topology_states(command.topology); !states.empty()) {
    absl::StatusOr<std::shared_ptr<const routing::ChannelKey>> k = channel_key(states.front());
    if (!k.ok()) return fail(k.status());
    key = *std::move(k);
  }
  routing::NodeOptions o;
  o.channel.key = std::move(key);
  o.id = runtime::ProcId{runtime::Uid::random(*runtime::Label::parse("mail"))};
  o.listen = *runtime::ChannelAddr::ipc_abstract(absl::StrCat("postal-mail-", ::getpid()));
  o.scheduler.workers = 1;
  o.system_actors = false;
  absl::StatusOr<std::unique_ptr<routing::Node>> node = routing::Node::start(std::move(o));
  if (!node.ok()) return fail(node.status());
  std::shared_ptr<runtime::Client> client = *runtime::Client::attach((*node)->proc(), "mail");
  absl::StatusOr<runtime::ActorAddr> host = find_mailbox_host(*client, command.topology);
  if (!host.ok()) return fail(host.status());
  absl::StatusOr<std::unique_ptr<mail::PostProvider>> provider =
      mail::PostProvider::create(mail::PostOptions{.context = client, .host = *host});
  if (!provider.ok()) return fail(provider.status());
  mail::PostOffice office;
  if (absl::Status s = office.register_provider(*std::move(provider)); !s.ok()) return fail(s);
  if (absl::Status s = office.start(); !s.ok()) return fail(s);
  return run_verb(office, command);
}

}  // namespace postal::tools
