// The inproc transport: `inproc://N` channels that never leave the process (R-ENV-4: nothing is
// serialized; envelopes move as typed values).
//
// The inproc table is process-wide by nature — it is how two procs in one process find each
// other by number, as sockets find each other through the kernel. It maps N to the live server's
// endpoint; a client holds the endpoint and posts straight into the server's `deliver_to`.
// Destroying a server closes its endpoint (clients then see closed() and fail posts with
// ChannelClosed) and waits for posts already inside `deliver_to` to return, so `deliver_to` is
// never called after the server is gone. Do not destroy a server from inside its own delivery.
#include <atomic>
#include <memory>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "transports.h"

namespace postal::routing::internal {
namespace {

using runtime::ChannelAddr;
using runtime::DeliveryFailure;
using runtime::EnvelopePtr;
using runtime::MessageEnvelope;
using runtime::ReturnHandle;
using runtime::TransportReason;

struct InprocEndpoint {
  InprocEndpoint(runtime::MailboxSender& d, ReturnHandle& r) : deliver_to(d), ret(r) {}
  runtime::MailboxSender& deliver_to;
  ReturnHandle& ret;
  std::atomic<bool> open{true};
  std::atomic<int64_t> in_flight{0};  // posts inside deliver_to right now
};

// The process-wide table of inproc servers, by number.
class InprocTable {
 public:
  static InprocTable& global() {
    static auto* table = new InprocTable();  // never destroyed: servers may outlive main()
    return *table;
  }

  // Registers `endpoint` under `number` (0: the lowest free number ≥ 1); returns the number.
  absl::StatusOr<uint64_t> add(uint64_t number, std::shared_ptr<InprocEndpoint> endpoint) {
    absl::MutexLock lock(&mu_);
    if (number == 0) {
      while (servers_.contains(next_free_)) ++next_free_;
      number = next_free_++;
    }
    auto [it, inserted] = servers_.try_emplace(number, std::move(endpoint));
    if (!inserted) {
      return absl::AlreadyExistsError(
          absl::StrCat("serve inproc://", number,
                       ": another server in this process already serves it; "
                       "choose another number or inproc://0 for a free one"));
    }
    return number;
  }

  void remove(uint64_t number) {
    absl::MutexLock lock(&mu_);
    servers_.erase(number);
  }

  std::shared_ptr<InprocEndpoint> find(uint64_t number) const {
    absl::MutexLock lock(&mu_);
    auto it = servers_.find(number);
    return it == servers_.end() ? nullptr : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<InprocEndpoint>> servers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_free_ ABSL_GUARDED_BY(mu_) = 1;
};

class InprocChannelClient final : public ChannelClient {
 public:
  InprocChannelClient(ChannelAddr addr, std::shared_ptr<InprocEndpoint> endpoint)
      : ChannelClient(std::move(addr)), endpoint_(std::move(endpoint)) {}

  void post_unchecked(EnvelopePtr env, ReturnHandle& ret) override {
    if (!closed_.load()) {
      endpoint_->in_flight.fetch_add(1);
      if (endpoint_->open.load()) {  // seq_cst with the server's close: see ~InprocChannelServer
        endpoint_->deliver_to.post(std::move(env), endpoint_->ret);
        endpoint_->in_flight.fetch_sub(1);
        return;
      }
      endpoint_->in_flight.fetch_sub(1);
    }
    std::string target = env->next_hop().to_string();
    MessageEnvelope::undeliverable(
        std::move(env),
        DeliveryFailure::transport_failure(std::move(target), TransportReason::kChannelClosed,
                                           std::string(status().message())),
        ret);
  }

  bool closed() const override { return closed_.load() || !endpoint_->open.load(); }
  bool rejected() const override { return false; }
  absl::Status status() const override {
    if (closed_.load()) {
      return absl::CancelledError(absl::StrCat("channel ", addr().to_string(), " was closed"));
    }
    if (!endpoint_->open.load()) {
      return absl::UnavailableError(
          absl::StrCat("channel ", addr().to_string(), ": its server is gone; redial"));
    }
    return absl::OkStatus();
  }
  size_t unacked() const override { return 0; }
  void close() override { closed_.store(true); }

 private:
  std::shared_ptr<InprocEndpoint> endpoint_;
  std::atomic<bool> closed_{false};
};

class InprocChannelServer final : public ChannelServer {
 public:
  InprocChannelServer(ChannelAddr addr, std::shared_ptr<InprocEndpoint> endpoint)
      : addr_(std::move(addr)), endpoint_(std::move(endpoint)) {}

  ~InprocChannelServer() override {
    InprocTable::global().remove(addr_.number());
    endpoint_->open.store(false);
    // A post that incremented in_flight before `open` turned false may still be delivering.
    while (endpoint_->in_flight.load() != 0) std::this_thread::yield();
  }

  const ChannelAddr& local_addr() const override { return addr_; }
  void drop_connections() override {}

 private:
  ChannelAddr addr_;
  std::shared_ptr<InprocEndpoint> endpoint_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ChannelClient>> dial_inproc(ChannelAddr addr) {
  std::shared_ptr<InprocEndpoint> endpoint = InprocTable::global().find(addr.number());
  if (endpoint == nullptr || !endpoint->open.load()) {
    return absl::UnavailableError(absl::StrCat("dial ", addr.to_string(),
                                               ": no inproc server has number ", addr.number(),
                                               " in this process"));
  }
  return std::unique_ptr<ChannelClient>(new InprocChannelClient(addr, std::move(endpoint)));
}

absl::StatusOr<std::unique_ptr<ChannelServer>> serve_inproc(ChannelAddr addr,
                                                            runtime::MailboxSender& deliver_to,
                                                            ReturnHandle& ret) {
  auto endpoint = std::make_shared<InprocEndpoint>(deliver_to, ret);
  absl::StatusOr<uint64_t> number = InprocTable::global().add(addr.number(), endpoint);
  if (!number.ok()) return number.status();
  return std::unique_ptr<ChannelServer>(
      new InprocChannelServer(ChannelAddr::inproc(*number), std::move(endpoint)));
}

}  // namespace postal::routing::internal
