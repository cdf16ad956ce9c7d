// subscription.h — `Subscription`, the RAII handle of one subscribe() (M-RECV-2, M-RETRY-4).
//
// `PostOffice::subscribe` returns it once the subscription is established: a letter posted
// after that returns is pushed to the callback. Destroying the handle unsubscribes.
//
// Unsubscribing (explicitly, by destruction, or by the provider's stop()):
//   * no new delivery starts for this subscription;
//   * deliveries waiting in a retry backoff, or dispatched but not started, are cancelled —
//     they settle as cancelled, and their message falls back to the queue (or the dead-letter
//     hook) by the broadcast rules (M-RETRY-1);
//   * a callback that is running is never cancelled: it runs to its end and its result settles
//     its delivery. `unsubscribe()` waits for it to return — after it returns, the callback is
//     neither running nor ever called again, so it may capture references safely, and the
//     provider has destroyed it (releasing its captures) — except when called from inside that
//     very callback, where it neither waits nor destroys it.
// A callback that never returns therefore blocks `unsubscribe()`; the settle watchdog has
// already given its message back by then (M-RETRY-4).
#pragma once

#include <memory>
#include <string>

namespace postal::mail {

// Implemented by providers.
class SubscriptionControl {
 public:
  virtual ~SubscriptionControl() = default;
  virtual void unsubscribe() = 0;  // idempotent; the contract above
  virtual bool active() const = 0;
  // The first half of unsubscribe: no new delivery starts and the waiting ones are cancelled,
  // but nothing waits for a running one. The default is unsubscribe().
  virtual void detach() { unsubscribe(); }
};

class Subscription {
 public:
  Subscription() = default;  // inactive
  Subscription(std::string id, std::string address, std::unique_ptr<SubscriptionControl> control)
      : id_(std::move(id)), address_(std::move(address)), control_(std::move(control)) {}
  Subscription(Subscription&&) noexcept = default;
  Subscription& operator=(Subscription&& other) noexcept {
    if (this != &other) {
      unsubscribe();
      id_ = std::move(other.id_);
      address_ = std::move(other.address_);
      control_ = std::move(other.control_);
    }
    return *this;
  }
  ~Subscription() { unsubscribe(); }

  void unsubscribe() {
    if (control_) control_->unsubscribe();
  }
  // Stops new deliveries at once without waiting for running ones (a MailboxHost drops a dead
  // subscriber's subscription from the thread that must settle what it still had in flight);
  // unsubscribe() later waits as usual.
  void detach() {
    if (control_) control_->detach();
  }
  // False once unsubscribed, or torn down by the provider's stop().
  bool active() const { return control_ && control_->active(); }
  const std::string& id() const { return id_; }
  const std::string& address() const { return address_; }  // canonical

 private:
  std::string id_;
  std::string address_;
  std::unique_ptr<SubscriptionControl> control_;
};

}  // namespace postal::mail
