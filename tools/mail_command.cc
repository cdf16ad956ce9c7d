// `postal mail post|fetch|peek|status|create|delete|subscribe|policy ADDR`, `postal mail list`:
// one mail verb against a running topology. create, delete, list and subscribe (tail -f) are for
// retained mailboxes, which a MailboxHost serves when it has a store (its `store` spawn parameter).
//
// It reads the topology's state file (topology_state.h; `postal up` writes it), asks each
// recorded proc in turn for an actor named `mailbox-host` (mail::kMailboxHostName, a
// postal.MailboxHost), and runs the verb through a PostProvider from a throwaway proc on an
// abstract ipc socket. Only `post:` addresses are served by a topology.
//
// A `nats:` address runs the verb through a nats provider instead (post, fetch, status; the
// server from --nats, the prefix from --nats-prefix): no topology is needed.
//
// `postal mail export ADDR FILE --store DB` and `postal mail import FILE --store DB` work on a
// store file instead, offline (mailbox_export.h): the store is opened exclusively, so they refuse
// to run beside a MailboxHost that serves it.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "commands.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mailbox_export.h"
#include "postal/mail/mailbox_host.h"
#include "postal/mail/mem_provider.h"
#include "postal/mail/nats_provider.h"
#include "postal/mail/post_office.h"
#include "postal/mail/post_provider.h"
#include "postal/mail/sqlite_mail_store.h"
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
  // --count. With --group it competes in a queue group and settles what it prints.
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
        // Past --count: not printed, so not settled for a queue group (M-RECV-4).
        if (c.count > 0 && seen >= c.count) return mail::RetriableError("--count reached");
        if (seen > 0) std::printf("----\n");
        print_letter(l);
        std::fflush(stdout);
        ++seen;
        return absl::OkStatus();
      },
      {.deliver = *deliver, .queue_group = c.group});
  if (!sub.ok()) return fail(sub.status());
  {
    absl::MutexLock lock(&mu);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return c.count > 0 && seen >= c.count; };
    mu.Await(absl::Condition(&done));
  }
  // Settles what was printed before leaving: unsubscribe returns once the host ran no callback
  // of it any more (a queue group's marks are written by then).
  sub->unsubscribe();
  return 0;
}

std::string describe(const mail::MailboxPolicy& p) {
  if (p.empty()) return "no policy (the provider's settings apply)\n";
  std::string out;
  if (p.retry) {
    absl::StrAppend(&out, "retry: max_attempts ", p.retry->max_attempts, ", base_delay ",
                    absl::FormatDuration(p.retry->base_delay), ", max_delay ",
                    absl::FormatDuration(p.retry->max_delay), ", factor ", p.retry->factor,
                    ", jitter ", p.retry->jitter, "\n");
  }
  if (p.max_delivery_rounds) absl::StrAppend(&out, "rounds: ", *p.max_delivery_rounds, "\n");
  if (p.dead_letter) absl::StrAppend(&out, "dead_letter: ", *p.dead_letter ? "on" : "off", "\n");
  if (p.settle_timeout) {
    absl::StrAppend(&out, "settle_timeout: ", absl::FormatDuration(*p.settle_timeout), "\n");
  }
  return out;
}

// `policy ADDR`: shows the mailbox's policy (M-RETRY-6); with options, changes the fields given
// (the rest stay as they are; --clear first clears it) and shows the result. A bad policy is
// refused by the host and nothing changes.
int run_policy(mail::PostOffice& office, const MailCommand& c) {
  const bool changes = c.clear || c.max_attempts >= 0 || c.base_delay_ms >= 0 ||
                       c.max_delay_ms >= 0 || c.rounds >= 0 || c.settle_timeout_ms >= 0 ||
                       !c.dead_letter.empty();
  absl::StatusOr<mail::MailboxPolicy> current = office.policy(c.address);
  if (!current.ok()) return fail(current.status());
  if (changes) {
    mail::MailboxPolicy p = c.clear ? mail::MailboxPolicy{} : *current;
    if (c.max_attempts >= 0 || c.base_delay_ms >= 0 || c.max_delay_ms >= 0) {
      mail::RetryPolicy r = p.retry.value_or(mail::RetryPolicy{});
      if (c.max_attempts >= 0) r.max_attempts = static_cast<uint32_t>(c.max_attempts);
      if (c.base_delay_ms >= 0) r.base_delay = absl::Milliseconds(c.base_delay_ms);
      if (c.max_delay_ms >= 0) r.max_delay = absl::Milliseconds(c.max_delay_ms);
      p.retry = r;
    }
    if (c.rounds >= 0) p.max_delivery_rounds = static_cast<uint64_t>(c.rounds);
    if (c.settle_timeout_ms >= 0) p.settle_timeout = absl::Milliseconds(c.settle_timeout_ms);
    if (!c.dead_letter.empty()) p.dead_letter = c.dead_letter == "on";
    if (absl::Status s = office.set_policy(c.address, p); !s.ok()) return fail(s);
    current = office.policy(c.address);
    if (!current.ok()) return fail(current.status());
  }
  std::printf("policy of %s:\n%s", c.address.c_str(), describe(*current).c_str());
  return 0;
}

int run_verb(mail::PostOffice& office, const MailCommand& c) {
  if (int rc = run_retained_verb(office, c); rc >= 0) return rc;
  if (c.verb == "policy") return run_policy(office, c);
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

// Writes `text` to `path` through a temporary file in the same folder, renamed over it once
// complete, so a reader never sees half an export.
absl::Status write_whole(const std::string& path, const std::string& text) {
  const std::string tmp = absl::StrCat(path, ".tmp-", ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wbx");
  if (f == nullptr) {
    return mail::IoFailedError(absl::StrCat("cannot write '", tmp, "': ", std::strerror(errno)));
  }
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    std::remove(tmp.c_str());
    return mail::IoFailedError(absl::StrCat("cannot write '", path, "': ", std::strerror(saved)));
  }
  return absl::OkStatus();
}

// export / import: offline, on the store file (the store opened exclusively).
int run_store_verb(const MailCommand& c) {
  if (c.store.empty()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        c.verb, " works on a store file: give it with --store FILE (the `store` spawn parameter "
                "of the MailboxHost, which must not be running)")));
  }
  absl::StatusOr<std::unique_ptr<mail::MailStore>> store =
      mail::SqliteMailStore::open(c.store, {.exclusive = true});
  if (!store.ok()) return fail(store.status());
  if (c.verb == "import") {
    if (c.address.empty() || !c.file.empty()) {
      return fail(absl::InvalidArgumentError("import takes one file: postal mail import FILE "
                                             "--store DB"));
    }
    absl::StatusOr<mail::ImportResult> r = mail::import_mailbox(**store, c.address, absl::Now());
    if (!r.ok()) return fail(r.status());
    std::printf("imported %llu letter(s) into %s (%s)\n",
                static_cast<unsigned long long>(r->messages), r->mailbox.c_str(),
                r->created ? "created" : "existing");
    return 0;
  }
  if (c.file.empty()) {
    return fail(absl::InvalidArgumentError("export writes a file: postal mail export ADDR FILE "
                                           "--store DB"));
  }
  absl::StatusOr<mail::MailAddress> address = mail::MailAddress::parse(c.address);
  if (!address.ok()) return fail(address.status());
  const std::string name = mail::MemProvider::store_name(*address);
  absl::StatusOr<std::string> text = mail::export_mailbox(**store, name);
  if (!text.ok()) return fail(text.status());
  if (absl::Status s = write_whole(c.file, *text); !s.ok()) return fail(s);
  std::printf("exported %s to %s\n", name.c_str(), c.file.c_str());
  return 0;
}

// A verb on a nats: address, through a nats provider of its own.
int run_nats_verb(const MailCommand& c) {
  absl::StatusOr<std::unique_ptr<mail::NatsProvider>> provider =
      mail::NatsProvider::create({.url = c.nats_url, .prefix = c.nats_prefix});
  if (!provider.ok()) return fail(provider.status());
  mail::PostOffice office;
  if (absl::Status s = office.register_provider(*std::move(provider)); !s.ok()) return fail(s);
  if (absl::Status s = office.start(); !s.ok()) return fail(s);
  return run_verb(office, c);
}

}  // namespace

int mail_command(const MailCommand& command) {
  static const std::set<std::string> kVerbs = {"post",   "fetch",  "peek", "status",
                                               "create", "delete", "list", "subscribe",
                                               "policy", "export", "import"};
  if (!kVerbs.contains(command.verb)) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "unknown verb '", command.verb,
        "'; write post, fetch, peek, status, create, delete, list, subscribe, policy, export or "
        "import")));
  }
  if (command.verb == "export" || command.verb == "import") return run_store_verb(command);
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
    if (address->scheme() == mail::NatsProvider::kScheme) return run_nats_verb(command);
  }

  // R-SEC-1: the node authenticates with the topology's key (the state file's secret): the named
  // topology's, or the first running one's when none is named (docs/security.md).
  std::shared_ptr<const routing::ChannelKey> key;
  routing::TlsMode tls = routing::TlsMode::kAuto;
  if (std::vector<TopologyState> states = read_topology_states(command.topology); !states.empty()) {
    absl::StatusOr<std::shared_ptr<const routing::ChannelKey>> k = channel_key(states.front());
    if (!k.ok()) return fail(k.status());
    key = *std::move(k);
    tls = states.front().tls;  // R-SEC-1: a topology with tls on refuses plaintext
  }
  routing::NodeOptions o;
  o.channel.key = std::move(key);
  o.channel.tls = tls;
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
