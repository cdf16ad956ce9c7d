// mq9_verbs.cc — what a bridge connection's PUB, SUB and UNSUB do, on the connection's strand:
// the mq9 verbs on `RetainedMailboxes`, and plain NATS routing for every other subject.
// See mq9_session.h and docs/mq9.md.
#include <algorithm>
#include <optional>

#include <boost/asio/post.hpp>

#include "absl/strings/str_cat.h"
#include "mq9_json.h"
#include "mq9_session.h"
#include "mq9_subject.h"
#include "postal/mail/retained_mailboxes.h"
#include "postal/runtime/logger.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::mq9 {

struct Session::Subscription {
  RetainedSubscription retained;
  ListingWatch watch;
  absl::Mutex mu;                  // a listing watch: its snapshot goes out before its events
  std::atomic<uint64_t> max{0};    // UNSUB sid max: 0 = unlimited
  std::atomic<uint64_t> delivered{0};
  std::atomic<bool> ended{false};
};

namespace {

// How NATS refuses a subscription without closing the connection: clients report it through
// their error callback (libnats: "permissions violation") and keep the connection.
std::string refusal(std::string_view subject, const absl::Status& why) {
  std::string text = absl::StrCat("Permissions Violation for Subscription to \"", sv(subject),
                                  "\": ", why.message());
  std::replace(text.begin(), text.end(), '\'', '"');  // a quote would end the -ERR text
  return absl::StrCat("-ERR '", text, "'\r\n");
}

}  // namespace

void Session::verb(VerbCommand cmd, size_t bytes) {
  if (torn_down_) {
    verb_done(bytes);
    return;
  }
  bool later = false;  // a publish releases its bytes once stored
  switch (cmd.op) {
    case NatsOp::kPub:
      later = publish(cmd, bytes);
      break;
    case NatsOp::kSub:
      subscribe(cmd);
      break;
    case NatsOp::kUnsub:
      unsubscribe(cmd);
      break;
    default:
      break;
  }
  if (!later) verb_done(bytes);
}

void Session::reply(std::string_view to, std::string json) {
  if (!to.empty()) core_.routes.route(to, "", "", json);
}

bool Session::publish(VerbCommand& cmd, size_t bytes) {
  const Mq9Subject s = parse_mq9_subject(cmd.subject);
  switch (s.verb) {
    case Mq9Verb::kNotMq9:
      if (!valid_subject(cmd.subject, /*wildcards=*/false)) {
        runtime::Logger::mail().debug(absl::StrCat("mq9 bridge: dropped a publish to invalid subject \"",
                                          sv(cmd.subject), "\""));
        return false;
      }
      core_.routes.route(cmd.subject, cmd.reply, cmd.headers, cmd.payload);
      return false;
    case Mq9Verb::kCreate:
      create(cmd);
      return false;
    case Mq9Verb::kList:
      list(cmd);
      return false;
    case Mq9Verb::kDelete:
      erase(cmd);
      return false;
    case Mq9Verb::kUnknown:
    case Mq9Verb::kMsg:
      break;
  }
  if (s.verb == Mq9Verb::kUnknown || s.wildcard) {
    core_.counters.publish_failures.fetch_add(1, std::memory_order_relaxed);
    reply(cmd.reply,
          error_json(absl::InvalidArgumentError(absl::StrCat(
              "mq9: \"", sv(cmd.subject),
              "\" is not an mq9 v1 subject to publish to; use $mq9.AI.MAILBOX.CREATE, "
              "$mq9.AI.MAILBOX.MSG.{mail_id}[.critical|.urgent], "
              "$mq9.AI.MAILBOX.DELETE.{mail_id}.{msg_id} or $mq9.AI.PUBLIC.LIST"))));
    return false;
  }
  const std::string mailbox(s.mailbox);
  core_.options.mailboxes->publish_async(
      mailbox, s.priority.value_or(Priority::kNormal), std::move(cmd.payload),
      [self = shared_from_this(), to = std::move(cmd.reply), bytes](absl::StatusOr<uint64_t> r) {
        if (r.ok()) {
          self->core_.counters.published.fetch_add(1, std::memory_order_relaxed);
          self->reply(to, absl::StrCat("{\"msg_id\":", *r, "}"));
        } else {
          self->core_.counters.publish_failures.fetch_add(1, std::memory_order_relaxed);
          if (to.empty()) {
            runtime::Logger::mail().debug(
                absl::StrCat("mq9 bridge: a publish with no reply subject failed: ", r.status().ToString()));
          }
          self->reply(to, error_json(r.status()));
        }
        self->verb_done(bytes);
      });
  return true;
}

void Session::create(const VerbCommand& cmd) {
  absl::StatusOr<MailboxSpec> spec = parse_create(cmd.payload, core_.options.default_ttl);
  if (!spec.ok()) {
    reply(cmd.reply, error_json(spec.status()));
    return;
  }
  absl::StatusOr<CreateResult> r = core_.options.mailboxes->create_mailbox(*spec);
  if (!r.ok()) {
    reply(cmd.reply, error_json(r.status()));
    return;
  }
  reply(cmd.reply, mailbox_json(r->mailbox, &r->created));
}

void Session::list(const VerbCommand& cmd) {
  absl::StatusOr<std::vector<MailboxInfo>> r = core_.options.mailboxes->list_public();
  reply(cmd.reply, r.ok() ? listing_json(*r) : error_json(r.status()));
}

void Session::erase(const VerbCommand& cmd) {
  const Mq9Subject s = parse_mq9_subject(cmd.subject);
  absl::StatusOr<bool> r = core_.options.mailboxes->erase(s.mailbox, s.msg_id);
  reply(cmd.reply, r.ok() ? absl::StrCat("{\"deleted\":", *r ? "true" : "false", "}")
                          : error_json(r.status()));
}

void Session::subscribe(VerbCommand& cmd) {
  if (mq9_subs_.size() + plain_sids_.size() >= core_.options.max_subscriptions) {
    close("Maximum Subscriptions Exceeded");
    return;
  }
  if (mq9_subs_.contains(cmd.sid) || plain_sids_.contains(cmd.sid)) {
    push(refusal(cmd.subject, absl::AlreadyExistsError(
                                  absl::StrCat("sid ", sv(cmd.sid), " is already subscribed"))));
    return;
  }
  const Mq9Subject s = parse_mq9_subject(cmd.subject);
  if (s.verb == Mq9Verb::kNotMq9) {
    if (!valid_subject(cmd.subject, /*wildcards=*/true)) {
      push(refusal(cmd.subject, absl::InvalidArgumentError("not a valid NATS subject")));
      return;
    }
    core_.routes.add(shared_from_this(), cmd.sid, cmd.subject, cmd.queue);
    plain_sids_.insert(cmd.sid);
    return;
  }
  auto sub = std::make_shared<Subscription>();
  std::weak_ptr<Session> weak = weak_from_this();
  Mq9Bridge::Core& core = core_;
  if (s.verb == Mq9Verb::kList) {
    std::vector<MailboxInfo> snapshot;
    absl::MutexLock lock(&sub->mu);
    absl::StatusOr<ListingWatch> w = core_.options.mailboxes->watch_public(
        &snapshot, [weak, sub, sid = cmd.sid](const MailboxEvent& e) {
          absl::MutexLock lock(&sub->mu);
          auto self = weak.lock();
          if (!self || sub->ended.load()) return;
          const char* kind = e.kind == MailboxEventKind::kCreated   ? "created"
                             : e.kind == MailboxEventKind::kExpired ? "expired"
                                                                    : "removed";
          self->deliver(kListSubject, sid, "", "", event_json(kind, e.mailbox));
        });
    if (!w.ok()) {
      push(refusal(cmd.subject, w.status()));
      return;
    }
    sub->watch = std::move(*w);
    for (const MailboxInfo& m : snapshot) deliver(kListSubject, cmd.sid, "", "", event_json("listed", m));
    mq9_subs_.emplace(cmd.sid, std::move(sub));
    return;
  }
  if (s.verb != Mq9Verb::kMsg) {
    push(refusal(cmd.subject,
                 absl::InvalidArgumentError("subscribe to $mq9.AI.MAILBOX.MSG.{mail_id}[.*] or "
                                            "$mq9.AI.PUBLIC.LIST")));
    return;
  }
  // A subject naming one priority gets that priority only; `.*`, `.>` or none: all of them.
  const std::optional<Priority> only = s.wildcard ? std::nullopt : s.priority;
  // In a queue group, a pushed message stays unsettled: it comes back when the group forms
  // again unless a member deletes it (mq9's at-least-once recipe).
  const bool group = !cmd.queue.empty();
  RetainedSubscribeOptions options;
  // Members of one group must want the same messages: a priority filter is part of the group,
  // or a live message handed to a member that filters it out would reach no one.
  options.queue_group =
      group && only ? absl::StrCat(sv(cmd.queue), ".", sv(to_string(*only))) : cmd.queue;
  // The mailbox's end (TTL, removal) reaches clients that read headers as a status message.
  options.on_end = [weak, sid = cmd.sid, mailbox = std::string(s.mailbox)](const absl::Status& why) {
    auto self = weak.lock();
    if (!self || !self->headers_enabled()) return;
    self->deliver(message_subject(mailbox, Priority::kNormal), sid, "",
                  absl::StrCat("NATS/1.0 410 Mailbox Ended\r\nMq9-Ended: ",
                               error_code(why), "\r\n\r\n"),
                  "");
  };
  RetainedHandler handler = [weak, sub, &core, sid = cmd.sid, only,
                             group](const RetainedMessage& m) -> Disposition {
    const Disposition kept = group ? Disposition::kUnhandled : Disposition::kHandled;
    auto self = weak.lock();
    if (!self || sub->ended.load(std::memory_order_acquire)) return Disposition::kUnhandled;
    if (only && m.priority != *only) return kept;
    const uint64_t max = sub->max.load(std::memory_order_acquire);
    const uint64_t n = sub->delivered.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (max != 0 && n > max) return Disposition::kUnhandled;
    self->deliver(message_subject(m.mailbox, m.priority), sid, delete_subject(m.mailbox, m.seq),
                  message_headers(m), m.body);
    core.counters.pushed.fetch_add(1, std::memory_order_relaxed);
    if (max != 0 && n == max) {
      boost::asio::post(self->strand_, [self, sid] {
        VerbCommand unsub{NatsOp::kUnsub, {}, {}, {}, sid, {}, {}, 0};
        self->unsubscribe(unsub);
      });
    }
    return kept;
  };
  absl::StatusOr<RetainedSubscription> r =
      core_.options.mailboxes->subscribe(s.mailbox, std::move(handler), std::move(options));
  if (!r.ok()) {
    push(refusal(cmd.subject, r.status()));
    return;
  }
  sub->retained = std::move(*r);
  mq9_subs_.emplace(cmd.sid, std::move(sub));
}

void Session::unsubscribe(const VerbCommand& cmd) {
  if (plain_sids_.contains(cmd.sid)) {
    // With a max the sid stays taken (and counted) until a plain UNSUB: the route may expire by
    // itself, but a hostile SUB/UNSUB-max loop must not grow the routes past the bound.
    if (cmd.max_msgs) {
      core_.routes.set_max(id_, cmd.sid, cmd.max_msgs);
    } else {
      plain_sids_.erase(cmd.sid);
      core_.routes.remove(id_, cmd.sid);
    }
    return;
  }
  auto it = mq9_subs_.find(cmd.sid);
  if (it == mq9_subs_.end()) return;
  std::shared_ptr<Subscription> sub = it->second;
  if (cmd.max_msgs != 0 && sub->delivered.load() < cmd.max_msgs) {
    sub->max.store(cmd.max_msgs, std::memory_order_release);
    // A handler that read no max yet may have reached it meanwhile: look again.
    if (sub->delivered.load(std::memory_order_acquire) < cmd.max_msgs) return;
  }
  sub->ended.store(true, std::memory_order_release);
  mq9_subs_.erase(it);
  sub->retained.unsubscribe();  // waits for a running callback (never this one: the strand)
  sub->watch.stop();
}

void Session::teardown() {
  if (torn_down_) return;
  torn_down_ = true;
  for (auto& [sid, sub] : mq9_subs_) {
    sub->ended.store(true, std::memory_order_release);
    sub->retained.unsubscribe();
    sub->watch.stop();
  }
  mq9_subs_.clear();
  core_.routes.remove_all(id_);
  plain_sids_.clear();
}

}  // namespace postal::mail::mq9
