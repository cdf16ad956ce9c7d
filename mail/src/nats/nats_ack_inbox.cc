#include "nats_ack_inbox.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::nats {

AckInbox::AckInbox(const NatsLink& link, size_t max_pending)
    : link_(link), max_pending_(max_pending) {}

AckInbox::~AckInbox() {
  if (sub_ != nullptr) {
    // The subscription's last callback has returned once the completion callback ran.
    if (natsSubscription_Unsubscribe(sub_) == NATS_OK) {
      complete_.WaitForNotificationWithTimeout(absl::Seconds(10));
    }
    natsSubscription_Destroy(sub_);
  }
  std::map<uint64_t, Pending> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(pending_);
  }
  for (auto& [n, p] : left) {
    std::move(p.done)(IoFailedError("the NATS store closed before the append was acknowledged"));
  }
}

absl::Status AckInbox::start() {
  natsInbox* inbox = nullptr;
  natsStatus s = natsInbox_Create(&inbox);
  if (s != NATS_OK) return link_.error("making an inbox", s);
  inbox_ = inbox;
  natsInbox_Destroy(inbox);
  const std::string wildcard = inbox_ + ".*";
  // A callback also when nothing came for the timeout, so overdue acks fail on a quiet link.
  s = natsConnection_SubscribeTimeout(&sub_, link_.nc(), wildcard.c_str(), link_.timeout_ms(),
                                      &AckInbox::on_message, this);
  if (s == NATS_OK) s = natsSubscription_SetPendingLimits(sub_, -1, -1);
  if (s == NATS_OK) {
    s = natsSubscription_SetOnCompleteCB(
        sub_, [](void* self) { static_cast<AckInbox*>(self)->complete_.Notify(); }, this);
  }
  if (s != NATS_OK) return link_.error("subscribing to the ack inbox", s);
  return absl::OkStatus();
}

void AckInbox::publish(const std::string& subject, std::string_view body, Done done) {
  const absl::Duration timeout = absl::Milliseconds(link_.timeout_ms());
  uint64_t n = 0;
  {
    absl::MutexLock lock(&mu_);
    auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return pending_.size() < max_pending_;
    };
    if (mu_.AwaitWithTimeout(absl::Condition(&room), timeout)) {
      n = ++next_;
      pending_.emplace(n, Pending{std::move(done), absl::Now() + timeout});
    }
  }
  if (n == 0) {
    std::move(done)(IoFailedError(absl::StrCat(
        "the NATS store: ", max_pending_, " appends wait for their ack and none came within ",
        absl::FormatDuration(timeout), "; is the server overloaded or gone?")));
    return;
  }
  const std::string reply = absl::StrCat(inbox_, ".", n);
  const natsStatus s = natsConnection_PublishRequest(link_.nc(), subject.c_str(), reply.c_str(),
                                                     body.data(), static_cast<int>(body.size()));
  if (s == NATS_OK) return;
  Done failed;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(n);
    if (it == pending_.end()) return;  // answered meanwhile (cannot be, but never twice)
    failed = std::move(it->second.done);
    pending_.erase(it);
  }
  std::move(failed)(link_.error("publishing", s));
}

void AckInbox::on_message(natsConnection*, natsSubscription*, natsMsg* msg, void* self) {
  auto* inbox = static_cast<AckInbox*>(self);
  if (msg != nullptr) inbox->answer(msg);
  inbox->expire_overdue();
}

void AckInbox::answer(natsMsg* msg) {
  std::string_view subject = natsMsg_GetSubject(msg);
  uint64_t n = 0;
  const size_t dot = subject.rfind('.');
  Done done;
  if (dot != std::string_view::npos && absl::SimpleAtoi(sv(subject.substr(dot + 1)), &n)) {
    absl::MutexLock lock(&mu_);
    if (auto it = pending_.find(n); it != pending_.end()) {
      done = std::move(it->second.done);
      pending_.erase(it);
    }
  }
  if (done) {
    std::move(done)(parse_pub_ack(
        link_, std::string_view(natsMsg_GetData(msg),
                                static_cast<size_t>(natsMsg_GetDataLength(msg)))));
  }
  natsMsg_Destroy(msg);
}

void AckInbox::expire_overdue() {
  const absl::Time now = absl::Now();
  std::vector<Done> overdue;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = pending_.begin(); it != pending_.end() && it->second.deadline <= now;) {
      overdue.push_back(std::move(it->second.done));
      it = pending_.erase(it);
    }
  }
  for (Done& d : overdue) {
    std::move(d)(IoFailedError(absl::StrCat(
        "the NATS store: no ack within ", link_.timeout_ms(),
        " ms; the message may or may not be stored — is the server reachable?")));
  }
}

absl::StatusOr<uint64_t> parse_pub_ack(const NatsLink& link, std::string_view reply) {
  nlohmann::json ack = nlohmann::json::parse(reply, nullptr, /*allow_exceptions=*/false);
  if (ack.is_object()) {
    if (auto e = ack.find("error"); e != ack.end() && e->is_object()) {
      const auto code = e->find("err_code");
      const auto text = e->find("description");
      return link.error(
          absl::StrCat("storing a message (",
                       text != e->end() && text->is_string() ? text->get<std::string>() : "?",
                       ")"),
          NATS_ERR,
          jsErrCode(code != e->end() && code->is_number_integer() ? code->get<int>() : 0));
    }
    if (auto seq = ack.find("seq"); seq != ack.end() && seq->is_number_unsigned()) {
      return seq->get<uint64_t>();
    }
  }
  return link.error("storing a message (the ack is not a JetStream publish ack)", NATS_ERR);
}

}  // namespace postal::mail::nats
