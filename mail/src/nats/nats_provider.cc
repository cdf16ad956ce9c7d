// The nats provider (nats_provider.h): queue mailboxes in a JetStream work-queue stream.
#include "postal/mail/nats_provider.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nats_held.h"
#include "nats_link.h"
#include "nats_queue.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/system_headers.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {

// How long one server-side wait of a long poll lasts: the poll re-checks its deadline on the
// provider's clock, due nak delays and stop() at least this often, and a request abandoned at
// its deadline is answered by the server within it (so no copy lands in a closed inbox).
inline constexpr absl::Duration kPollSlice = absl::Milliseconds(250);
// Mailboxes whose last activity this process remembers; past it the first in address order is
// forgotten (its lastActivityTime reads null again), so a process touching ever new addresses
// does not grow without bound.
inline constexpr size_t kMaxRemembered = 65536;

struct NatsProvider::State {
  explicit State(NatsProviderOptions o)
      : options(std::move(o)),
        held(std::make_shared<nats::HeldCopies>(options.clock, options.server_ack_wait / 4)) {}

  std::shared_ptr<nats::QueueConn> running() {
    absl::MutexLock lock(&mu);
    return conn;
  }
  void touched(const std::string& address) {
    absl::MutexLock lock(&mu);
    if (activity.size() >= kMaxRemembered && !activity.contains(address)) {
      activity.erase(activity.begin());
    }
    activity[address] = options.clock->now();
  }

  const NatsProviderOptions options;
  const std::shared_ptr<nats::HeldCopies> held;
  absl::Mutex mu;
  std::shared_ptr<nats::QueueConn> conn ABSL_GUARDED_BY(mu);  // null while stopped
  std::map<std::string, absl::Time> activity ABSL_GUARDED_BY(mu);
  std::map<std::string, int64_t> waiting ABSL_GUARDED_BY(mu);  // long polls, by address
};

namespace {

absl::Status check_options(const NatsProviderOptions& o) {
  const bool prefix_ok = !o.prefix.empty() && o.prefix.size() <= 32 &&
                         std::all_of(o.prefix.begin(), o.prefix.end(), [](char c) {
                           return absl::ascii_isupper(static_cast<unsigned char>(c)) ||
                                  absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_';
                         });
  if (!prefix_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("nats provider: prefix \"", o.prefix, "\" must be 1 to 32 of A-Z, 0-9 and _"));
  }
  if (o.replicas < 1 || o.replicas > 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("nats provider: replicas is ", o.replicas, "; use 1, or 3 in a cluster"));
  }
  if (o.timeout <= absl::ZeroDuration() || o.server_ack_wait < absl::Seconds(1) || o.max_held < 1) {
    return absl::InvalidArgumentError(
        "nats provider: timeout must be positive, server_ack_wait at least 1s, max_held at "
        "least 1");
  }
  return absl::OkStatus();
}

// Marks a copy as handed out: the server's delivery count is its round (M-RETRY-3).
Letter handed_out(nats::HeldCopies& held, nats::Pulled& p) {
  held.handed_out(p.letter.to, p.stream_seq);
  p.letter.headers.set(kRound, p.deliveries);
  p.letter.headers.set(kAttempt, uint64_t{1});
  return std::move(p.letter);
}

}  // namespace

absl::StatusOr<std::unique_ptr<NatsProvider>> NatsProvider::create(NatsProviderOptions options) {
  if (absl::Status s = check_options(options); !s.ok()) return s;
  if (options.clock == nullptr) options.clock = std::make_shared<SystemClock>();
  return std::unique_ptr<NatsProvider>(new NatsProvider(std::move(options)));
}

NatsProvider::NatsProvider(NatsProviderOptions options)
    : state_(std::make_shared<State>(std::move(options))) {}

NatsProvider::~NatsProvider() { stop(StopOptions{}); }

bool NatsProvider::can(Capability op, const MailAddress*) const {
  switch (op) {
    case Capability::kPost:
    case Capability::kFetch:
    case Capability::kManualAck:
    case Capability::kStatus:
    case Capability::kEnumerate:
    case Capability::kRecover:
    case Capability::kClear:
    case Capability::kWaitIdle:
      return true;
    default:
      return false;
  }
}

absl::Status NatsProvider::start() {
  absl::MutexLock lock(&state_->mu);
  if (state_->conn != nullptr) return absl::OkStatus();
  const NatsProviderOptions& o = state_->options;
  nats::NatsLink::Options link_options{.url = o.url,
                                       .token = o.token,
                                       .timeout = o.timeout,
                                       .name = "postal nats provider",
                                       .tls_ca_file = {},
                                       .tls_cert_file = {},
                                       .tls_key_file = {}};
  absl::StatusOr<std::unique_ptr<nats::NatsLink>> link = nats::NatsLink::connect(link_options);
  if (!link.ok()) return link.status();
  link_options.send_asap = false;  // batches of acks: gathered, one write each
  link_options.name = "postal nats provider (acks)";
  absl::StatusOr<std::unique_ptr<nats::NatsLink>> bulk = nats::NatsLink::connect(link_options);
  if (!bulk.ok()) return bulk.status();
  auto conn = std::make_shared<nats::QueueConn>();
  conn->link = *std::move(link);
  conn->bulk = *std::move(bulk);
  conn->queue =
      std::make_unique<nats::QueueStream>(*conn->link, *conn->bulk,
                                          nats::QueueStream::Config{.prefix = o.prefix,
                                                                    .replicas = o.replicas,
                                                                    .ack_wait = o.server_ack_wait,
                                                                    .max_ack_pending = o.max_held});
  if (absl::Status s = conn->queue->ensure(); !s.ok()) return s;
  state_->conn = conn;
  state_->held->attach(std::move(conn));
  return absl::OkStatus();
}

void NatsProvider::stop(const StopOptions& options) {
  std::shared_ptr<nats::QueueConn> conn;
  {
    absl::MutexLock lock(&state_->mu);
    conn = std::move(state_->conn);
  }
  if (conn == nullptr) return;
  if (options.purge) {
    if (absl::StatusOr<uint64_t> purged = conn->queue->purge(); purged.ok()) {
      state_->held->forget_all();
    }
  }
  state_->held->detach();  // every held copy goes back
}

absl::Status NatsProvider::check_running(std::string_view verb, const MailAddress& address) const {
  if (state_->running() != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      sv(verb), " ", address.canonical(), ": the nats provider is stopped; start() it first"));
}

// M-RETRY-3: system headers are minted here and never taken from the sender.
PostReceipt NatsProvider::mint(const MailAddress& to, Letter& letter) const {
  strip_system_headers(letter.headers);
  if (letter.id.empty()) letter.id = mint_send_id();
  letter.to = to.canonical();
  letter.headers.set(kSendId, mint_send_id());
  letter.headers.set(kSentAt, format_iso8601(state_->options.clock->now()));
  return PostReceipt{letter.to, letter.id, letter.headers.get(kSendId).value_or(""),
                     PostPath::kQueued, 0};
}

absl::StatusOr<PostReceipt> NatsProvider::post(const MailAddress& to, Letter letter) {
  std::shared_ptr<nats::QueueConn> conn = state_->running();
  if (conn == nullptr) return check_running("post", to);
  PostReceipt receipt = mint(to, letter);
  absl::StatusOr<uint64_t> seq = conn->queue->publish(receipt.address, letter);
  if (!seq.ok()) return seq.status();
  state_->touched(receipt.address);
  return receipt;
}

void NatsProvider::post_async(const MailAddress& to, Letter letter, PostDone done) {
  std::shared_ptr<nats::QueueConn> conn = state_->running();
  if (conn == nullptr) return std::move(done)(check_running("post", to));
  PostReceipt receipt = mint(to, letter);
  state_->touched(receipt.address);
  const std::string address = receipt.address;
  conn->queue->publish_async(
      address, letter,
      [receipt = std::move(receipt), done = std::move(done)](absl::StatusOr<uint64_t> seq) mutable {
        if (!seq.ok()) return std::move(done)(seq.status());
        std::move(done)(std::move(receipt));
      });
}

absl::StatusOr<Subscription> NatsProvider::subscribe(const MailAddress& address, MailHandler,
                                                     const SubscribeOptions&) {
  return UnsupportedCapabilityError(kScheme, to_string(Capability::kSubscribe),
                                    absl::StrCat("subscribe ", address.canonical()));
}

absl::StatusOr<std::optional<Delivery>> NatsProvider::fetch(const MailAddress& address,
                                                            const FetchOptions& options) {
  return fetch_one(address, options);
}

absl::StatusOr<std::vector<Delivery>> NatsProvider::fetch_batch(const MailAddress& address,
                                                                const FetchOptions& options) {
  std::shared_ptr<nats::QueueConn> conn = state_->running();
  if (conn == nullptr) return check_running("fetch", address);
  const std::string addr = address.canonical();
  const bool manual = options.ack == AckMode::kManual;
  nats::HeldCopies& held = *state_->held;
  // M-ACK-3: expired leases go back before a manual fetch looks (and due nak delays before any).
  held.reclaim(&addr, manual);
  absl::StatusOr<std::vector<nats::Pulled>> pulled =
      conn->queue->pull(addr, options.max_messages, absl::ZeroDuration());
  if (pulled.ok() && pulled->empty() && options.max_wait > absl::ZeroDuration()) {
    // The long poll (M-RECV-6), on the provider's clock, in slices the server waits out.
    Clock& clock = *state_->options.clock;
    const absl::Time deadline = clock.now() + options.max_wait;
    {
      absl::MutexLock lock(&state_->mu);
      ++state_->waiting[addr];
    }
    while (pulled.ok() && pulled->empty() && clock.now() < deadline &&
           state_->running() != nullptr) {
      held.reclaim(&addr, false);
      pulled = conn->queue->pull(addr, 1, std::min(kPollSlice, deadline - clock.now()));
      if (pulled.ok() && !pulled->empty() && options.max_messages > 1) {
        absl::StatusOr<std::vector<nats::Pulled>> rest =
            conn->queue->pull(addr, options.max_messages - 1, absl::ZeroDuration());
        if (rest.ok()) std::move(rest->begin(), rest->end(), std::back_inserter(*pulled));
      }
    }
    absl::MutexLock lock(&state_->mu);
    if (--state_->waiting[addr] == 0) state_->waiting.erase(addr);
  }
  if (!pulled.ok()) return pulled.status();
  state_->touched(addr);

  std::vector<Delivery> out;
  std::vector<std::string> auto_acks;
  size_t bytes = 0;
  for (nats::Pulled& p : *pulled) {
    const size_t size = p.letter.body.byte_size();
    std::optional<absl::Time> expires;
    if (options.max_bytes != 0 && !out.empty() && bytes + size > options.max_bytes) {
      // Over the byte bound: straight back, first in line for the next fetch.
      const uint64_t lease = held.hold(addr, p, absl::ZeroDuration(), &expires);
      held.settle(CopyKey{addr, "", lease}, Disposition::kUnhandled);
      continue;
    }
    bytes += size;
    std::string send_id = p.letter.headers.get(kSendId).value_or("");
    if (manual) {
      const uint64_t lease = held.hold(addr, p, options.ack_timeout, &expires);
      out.emplace_back(handed_out(held, p), CopyKey{addr, std::move(send_id), lease}, expires,
                       state_->held);
    } else {
      auto_acks.push_back(p.ack_subject);
      out.push_back(Delivery::settled(handed_out(held, p), CopyKey{addr, std::move(send_id), 0}));
    }
  }
  // An auto fetch hands out only what the server confirmed as acked (the rest comes back after
  // the ack wait); none confirmed is the server's silence, not an empty mailbox.
  std::vector<bool> acked = conn->queue->ack_many(auto_acks, nats::AckKind::kAck);
  for (size_t i = acked.size(); i-- > 0;) {
    if (!acked[i]) out.erase(out.begin() + static_cast<std::ptrdiff_t>(i));
  }
  if (!auto_acks.empty() && out.empty()) {
    return IoFailedError(absl::StrCat("fetch ", addr, ": the NATS server at ", state_->options.url,
                                      " did not confirm the acks; the copies come back after "
                                      "its ack wait"));
  }
  return out;
}

absl::StatusOr<MailboxStatus> NatsProvider::status(const MailAddress& address) {
  MailboxStatus s;
  s.address = address.canonical();
  std::shared_ptr<nats::QueueConn> conn = state_->running();
  if (conn == nullptr) {
    s.state = MailboxState::kOffline;
    return s;
  }
  absl::StatusOr<nats::QueueCounts> c = conn->queue->counts(s.address);
  if (!c.ok()) return c.status();
  // The server counts returned and delayed copies as ack-pending until they are handed out again.
  const nats::HeldCopies::Counts mine = state_->held->counts(s.address, c->ack_pending);
  const uint64_t returned = std::min(mine.returned, c->ack_pending);
  const uint64_t delayed = std::min(mine.delayed, c->ack_pending - returned);
  s.in_flight_count = c->ack_pending - returned - delayed;
  s.unread_count = c->stored - std::min(c->stored, s.in_flight_count + delayed);
  int64_t waiting = 0;
  {
    absl::MutexLock lock(&state_->mu);
    if (auto it = state_->activity.find(s.address); it != state_->activity.end()) {
      s.last_activity_time = it->second;
    }
    if (auto it = state_->waiting.find(s.address); it != state_->waiting.end()) {
      waiting = it->second;
    }
  }
  const bool exists = c->stored > 0 || c->consumer || s.last_activity_time.has_value();
  s.exists = exists;
  s.state = exists ? MailboxState::kOnline : MailboxState::kUnknown;
  s.extensions["nats.waitingFetchCount"] = waiting;
  s.extensions["nats.subscriberCount"] = int64_t{0};
  s.extensions["nats.delayedCount"] = static_cast<int64_t>(delayed);
  s.extensions["nats.terminatedCount"] = static_cast<int64_t>(mine.terminated);
  return s;
}

absl::Status NatsProvider::wait_idle(absl::Time) { return absl::OkStatus(); }

absl::StatusOr<AdminResult> NatsProvider::run(const AdminRequest& request) {
  struct Handler {
    NatsProvider& p;
    absl::StatusOr<uint64_t> operator()(const admin::Recover& v) {
      std::map<std::string, uint64_t> r = p.state_->held->reclaim(&v.address, true);
      return r.empty() ? 0 : r.begin()->second;
    }
    absl::StatusOr<std::map<std::string, uint64_t>> operator()(const admin::RecoverAll&) {
      return p.state_->held->reclaim(nullptr, true);
    }
    absl::StatusOr<std::vector<MailboxStatus>> operator()(const admin::ListStatus&) {
      std::shared_ptr<nats::QueueConn> conn = p.state_->running();
      if (conn == nullptr) return std::vector<MailboxStatus>{};
      absl::StatusOr<std::vector<std::string>> boxes = conn->queue->mailboxes();
      if (!boxes.ok()) return boxes.status();
      std::vector<MailboxStatus> out;
      for (const std::string& box : *boxes) {
        absl::StatusOr<MailAddress> at = MailAddress::parse(box);
        if (!at.ok()) continue;  // a subject no provider of this prefix wrote
        absl::StatusOr<MailboxStatus> s = p.status(*at);
        if (!s.ok()) return s.status();
        out.push_back(*std::move(s));
      }
      return out;
    }
    absl::StatusOr<uint64_t> operator()(const admin::Clear&) {
      std::shared_ptr<nats::QueueConn> conn = p.state_->running();
      if (conn == nullptr)
        return absl::FailedPreconditionError("clear: the nats provider is stopped");
      absl::StatusOr<uint64_t> purged = conn->queue->purge();
      if (purged.ok()) p.state_->held->forget_all();
      return purged;
    }
  } handler{*this};
  return dispatch_admin(request, kScheme, handler);
}

}  // namespace postal::mail
