// MemProvider's core verbs: post, fetch, status, wait_idle (the admin verbs: mem_admin.cc).
// Each takes the bus lock and hands the work to mem_queue.cc.
#include "absl/strings/str_cat.h"
#include "mem_state.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mem_provider.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {

using mem_internal::BusLock;
using mem_internal::BusState;
using mem_internal::Topic;

namespace {

absl::Status stopped(std::string_view verb, const MailAddress& address) {
  return absl::FailedPreconditionError(absl::StrCat(
      sv(verb), " ", address.canonical(), ": the mem provider is stopped; start() it first"));
}

MailboxStatus never_seen(const MailAddress& address) {
  // M-STAT-1: unknown, exists false — not "online with 0".
  MailboxStatus s;
  s.address = address.canonical();
  s.state = MailboxState::kUnknown;
  s.exists = false;
  return s;
}

}  // namespace

absl::StatusOr<PostReceipt> MemProvider::post(const MailAddress& to, Letter letter) {
  if (std::optional<std::string> name = retained_name(to)) {
    return post_retained(*name, to, std::move(letter));
  }
  BusState& bus = *core_->bus;
  Letter stamped = mem_internal::stamp_for_send(std::move(letter), to, bus.clock->now());
  BusLock lock(bus);
  if (!core_->running) return stopped("post", to);
  return mem_internal::post_locked(bus, core_->config, bus.topic_locked(to), std::move(stamped));
}

absl::StatusOr<std::optional<Delivery>> MemProvider::fetch(const MailAddress& address,
                                                           const FetchOptions& options) {
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  if (!core_->running) return stopped("fetch", address);
  Topic* topic = bus.find_locked(address.canonical());
  if (topic == nullptr) return std::optional<Delivery>();
  return mem_internal::fetch_locked(bus, core_, *topic, options);
}

absl::StatusOr<MailboxStatus> MemProvider::status(const MailAddress& address) {
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  Topic* topic = bus.find_locked(address.canonical());
  if (topic == nullptr) return never_seen(address);
  return mem_internal::status_locked(bus, *topic, core_->running);
}

absl::Status MemProvider::wait_idle(absl::Time deadline) {
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  bool idle = bus.mu.AwaitWithDeadline(
      absl::Condition(
          +[](BusState* b) ABSL_NO_THREAD_SAFETY_ANALYSIS { return b->busy == 0; }, &bus),
      deadline);
  if (idle) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("wait_idle: ", bus.busy,
                   " mem deliveries are still queued or running at the deadline; a "
                   "callback may be stuck (see mem.watchdogCancelledCount)"));
}

}  // namespace postal::mail
