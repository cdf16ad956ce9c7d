// The postal-watch actor (remote_watch.h): the registry of this proc's remote watches, the
// failure detector between procs that watch each other's actors, and the server of the watch
// requests of other procs. One actor, so its state needs no lock: handlers run one at a time.
#include "watch_keeper.h"

#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "postal/actors/actor_handle.h"
#include "postal/actors/context.h"
#include "postal/actors/down.h"

namespace postal::actors::internal {
namespace {

// The keeper's own timer.
struct WatchTick {
  template <class A>
  void serialize(A&) {}
};

}  // namespace
}  // namespace postal::actors::internal

POSTAL_MESSAGE(postal::actors::internal::WatchTick, "postal.WatchTick");

namespace postal::actors::internal {
namespace {

using runtime::ActorAddr;

template <class M>
runtime::PortRef<M> port_of(const ActorAddr& actor) {
  return runtime::PortRef<M>(actor.port(runtime::Port::handler(wire::type_hash<M>())));
}

uint64_t fresh_incarnation() {
  std::random_device rd;
  uint64_t v = 0;
  while (v == 0) v = (uint64_t{rd()} << 32) | rd();
  return v;
}

class WatchKeeper
    : public Actor,
      public Handles<WatchRemote, WatchRequest, WatchAck, WatchPing, WatchPong, WatchTick> {
 public:
  explicit WatchKeeper(WatchOptions options)
      : options_(options), incarnation_(fresh_incarnation()) {}

  // ---- this proc's watches of other procs' actors ----
  absl::Status handle(Context& cx, WatchRemote m) override {
    const ActorAddr keeper = keeper_of(m.target);
    const std::string key = m.target.id.proc.to_string();
    if (m.op != WatchRemote::kWatch) {
      const bool had = erase(key, m.target, m.watcher);
      if (had && m.op == WatchRemote::kUnwatch) {
        port_of<WatchRequest>(keeper).send(cx, WatchRequest{m.target, m.watcher, false});
      }
      return absl::OkStatus();
    }
    if (total_ >= kMaxRemoteWatches) {
      down(cx, m.watcher, m.target,
           absl::StrCat("this proc holds ", kMaxRemoteWatches,
                        " remote watches already (kMaxRemoteWatches); unwatch some first"));
      return absl::OkStatus();
    }
    Peer& peer = peers_[key];
    if (peer.entries.empty()) {
      peer.keeper = keeper;
      peer.last_heard = cx.proc().now();  // the clock starts with the first watch
    }
    peer.entries.push_back(Entry{m.target, m.watcher, 0, cx.proc().now()});
    ++total_;
    port_of<WatchRequest>(keeper).send(cx, WatchRequest{m.target, m.watcher, true});
    if (!tick_.valid())
      tick_ = cx.send_every(options_.interval, port_of<WatchTick>(cx.self_addr()), WatchTick{});
    return absl::OkStatus();
  }

  absl::Status handle(Context& cx, WatchAck m) override {
    Peer* peer = find(m.target);
    if (peer == nullptr) return absl::OkStatus();  // over already: quarantined
    peer->last_heard = cx.proc().now();
    for (Entry& e : peer->entries) {
      if (e.target.id == m.target.id && e.watcher.id == m.watcher.id && e.incarnation == 0) {
        e.incarnation = m.incarnation;
      }
    }
    end_other_incarnations(cx, *peer, m.incarnation);
    if (peer->entries.empty()) peers_.erase(m.target.id.proc.to_string());
    return absl::OkStatus();
  }

  absl::Status handle(Context& cx, WatchPong m) override {
    const runtime::MessageEnvelope* env = cx.envelope();
    auto it = env ? peers_.find(env->sender().id.proc.to_string()) : peers_.end();
    if (it == peers_.end()) return absl::OkStatus();
    it->second.last_heard = cx.proc().now();
    end_other_incarnations(cx, it->second, m.incarnation);
    if (it->second.entries.empty()) peers_.erase(it);
    return absl::OkStatus();
  }

  absl::Status handle(Context& cx, WatchTick) override {
    const absl::Time now = cx.proc().now();
    for (auto it = peers_.begin(); it != peers_.end();) {
      Peer& peer = it->second;
      if (now - peer.last_heard > options_.timeout) {
        end_all(
            cx, peer,
            absl::StrCat("its proc did not answer for ", absl::FormatDuration(options_.timeout)));
      } else {
        for (size_t i = 0; i < peer.entries.size();) {  // asked, never answered
          if (peer.entries[i].incarnation == 0 && now - peer.entries[i].since > options_.timeout) {
            end_entry(cx, peer, i, "its proc never answered the watch");
          } else {
            ++i;
          }
        }
        port_of<WatchPing>(peer.keeper).send(cx, WatchPing{});
      }
      if (peer.entries.empty()) {
        peers_.erase(it++);
      } else {
        ++it;
      }
    }
    if (peers_.empty() && tick_.valid()) {
      cx.cancel(tick_);
      tick_ = TimerHandle();
    }
    return absl::OkStatus();
  }

  // A request or ping that could not be delivered: the target's proc cannot be reached.
  absl::Status handle_undeliverable(Context& cx, const runtime::MessageEnvelope& env) override {
    const uint64_t hash = env.data().type_hash();
    if (hash != wire::type_hash<WatchRequest>() && hash != wire::type_hash<WatchPing>()) {
      return absl::OkStatus();  // a Down or an answer to a proc that is gone: nobody to tell
    }
    auto it = peers_.find(env.dest().id.actor.proc.to_string());
    if (it == peers_.end()) return absl::OkStatus();
    const runtime::DeliveryFailure* why = env.root_failure();
    end_all(cx, it->second,
            absl::StrCat("its proc cannot be reached: ", why ? why->to_string() : "undeliverable"));
    peers_.erase(it);
    if (peers_.empty() && tick_.valid()) {
      cx.cancel(tick_);
      tick_ = TimerHandle();
    }
    return absl::OkStatus();
  }

  // ---- other procs' watches of this proc's actors ----
  absl::Status handle(Context& cx, WatchRequest m) override {
    serve_remote_watch(cx.proc(), m);
    const runtime::MessageEnvelope* env = cx.envelope();
    if (m.watch && env != nullptr) {
      port_of<WatchAck>(env->sender()).send(cx, WatchAck{m.target, m.watcher, incarnation_});
    }
    return absl::OkStatus();
  }

  absl::Status handle(Context& cx, WatchPing) override {
    if (const runtime::MessageEnvelope* env = cx.envelope()) {
      port_of<WatchPong>(env->sender()).send(cx, WatchPong{incarnation_});
    }
    return absl::OkStatus();
  }

 private:
  struct Entry {
    ActorAddr target;
    ActorAddr watcher;
    uint64_t incarnation = 0;  // of the proc that acknowledged it; 0: not yet
    absl::Time since;
  };
  struct Peer {
    ActorAddr keeper;
    absl::Time last_heard;
    std::vector<Entry> entries;
  };

  static ActorAddr keeper_of(const ActorAddr& target) {
    return ActorAddr{runtime::ActorId{target.id.proc,
                                      runtime::Uid::singleton(*runtime::Label::parse(kWatchName))},
                     target.location};
  }
  Peer* find(const ActorAddr& target) {
    auto it = peers_.find(target.id.proc.to_string());
    return it == peers_.end() ? nullptr : &it->second;
  }
  bool erase(const std::string& key, const ActorAddr& target, const ActorAddr& watcher) {
    auto it = peers_.find(key);
    if (it == peers_.end()) return false;
    std::vector<Entry>& v = it->second.entries;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].target.id == target.id && v[i].watcher.id == watcher.id) {
        v.erase(v.begin() + static_cast<ptrdiff_t>(i));
        --total_;
        if (v.empty()) peers_.erase(it);
        return true;
      }
    }
    return false;
  }
  void down(Context& cx, const ActorAddr& watcher, const ActorAddr& target, std::string why) {
    port_of<Down>(watcher).send(cx, Down{target, std::move(why), false, /*unreachable=*/true});
  }
  void end_entry(Context& cx, Peer& peer, size_t i, const std::string& why) {
    down(cx, peer.entries[i].watcher, peer.entries[i].target, why);
    peer.entries.erase(peer.entries.begin() + static_cast<ptrdiff_t>(i));
    --total_;
  }
  void end_all(Context& cx, Peer& peer, const std::string& why) {
    while (!peer.entries.empty()) end_entry(cx, peer, peer.entries.size() - 1, why);
  }
  // The proc answers as `incarnation`: watches acknowledged by an earlier one were forgotten.
  void end_other_incarnations(Context& cx, Peer& peer, uint64_t incarnation) {
    for (size_t i = 0; i < peer.entries.size();) {
      const uint64_t inc = peer.entries[i].incarnation;
      if (inc != 0 && inc != incarnation) {
        end_entry(cx, peer, i, "its proc restarted (the watch was on the earlier one)");
      } else {
        ++i;
      }
    }
  }

  const WatchOptions options_;
  const uint64_t incarnation_;
  absl::flat_hash_map<std::string, Peer> peers_;  // by the watched proc's id
  size_t total_ = 0;
  TimerHandle tick_;
};

}  // namespace

absl::Status install_watch_keeper(runtime::Proc& proc, const WatchOptions& options) {
  return spawn<WatchKeeper>(proc, kWatchName, options).status();
}

}  // namespace postal::actors::internal
