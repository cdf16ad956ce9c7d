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
#include "postal/wire/codec.h"

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
      // Unwatch, or a Down that reached the watcher: cancel on the target's proc too (after a
      // Down from there it holds nothing; after a stale Down taken by a newer watch it does).
      if (erase(key, m.target, m.watcher)) {
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
    if (peer.entries
            .emplace(entry_key(m.target, m.watcher), Entry{m.target, m.watcher, 0, cx.proc().now()})
            .second) {
      ++total_;
    }
    port_of<WatchRequest>(keeper).send(cx, WatchRequest{m.target, m.watcher, true});
    start_ticking(cx);
    return absl::OkStatus();
  }

  absl::Status handle(Context& cx, WatchAck m) override {
    Peer* peer = find(m.target);
    if (peer == nullptr) return absl::OkStatus();  // over already: quarantined
    peer->last_heard = cx.proc().now();
    auto it = peer->entries.find(entry_key(m.target, m.watcher));
    if (it == peer->entries.end() || it->second.incarnation != 0) return absl::OkStatus();
    if (peer->incarnation != 0 && m.incarnation != peer->incarnation) {
      // Acknowledged by an incarnation that has answered pings no more: the registration went
      // with it.
      end_entry(cx, *peer, it, "its proc restarted (the watch was on the earlier one)");
    } else {
      it->second.incarnation = m.incarnation;
    }
    if (peer->entries.empty()) peers_.erase(m.target.id.proc.to_string());
    return absl::OkStatus();
  }

  absl::Status handle(Context& cx, WatchPong m) override {
    const runtime::MessageEnvelope* env = cx.envelope();
    auto it = env ? peers_.find(env->sender().id.proc.to_string()) : peers_.end();
    if (it == peers_.end()) return absl::OkStatus();
    it->second.last_heard = cx.proc().now();
    it->second.incarnation = m.incarnation;
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
        for (auto e = peer.entries.begin(); e != peer.entries.end();) {  // asked, never answered
          if (e->second.incarnation == 0 && now - e->second.since > options_.timeout) {
            end_entry(cx, peer, e++, "its proc never answered the watch");
          } else {
            ++e;
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
    // Watcher procs that stopped pinging (killed, cut off, restarted): their registrations here
    // would never be cancelled, so they go (a live one re-registers when it watches again).
    for (auto it = served_.begin(); it != served_.end();) {
      if (now - it->second.last_ping > 2 * options_.timeout) {
        for (auto& [key, request] : it->second.registrations) {
          serve_remote_watch(cx.proc(), WatchRequest{request.target, request.watcher, false});
        }
        served_total_ -= it->second.registrations.size();
        served_.erase(it++);
      } else {
        ++it;
      }
    }
    stop_ticking_when_idle(cx);
    return absl::OkStatus();
  }

  // A request or ping that could not be delivered: a request ends its own watch (its target's
  // address may be the only bad one), a ping every watch of its proc.
  absl::Status handle_undeliverable(Context& cx, const runtime::MessageEnvelope& env) override {
    const uint64_t hash = env.data().type_hash();
    if (hash != wire::type_hash<WatchRequest>() && hash != wire::type_hash<WatchPing>()) {
      return absl::OkStatus();  // a Down or an answer to a proc that is gone: nobody to tell
    }
    auto it = peers_.find(env.dest().id.actor.proc.to_string());
    if (it == peers_.end()) return absl::OkStatus();
    const runtime::DeliveryFailure* failure = env.root_failure();
    const std::string why = absl::StrCat("its proc cannot be reached: ",
                                         failure ? failure->to_string() : "undeliverable");
    if (hash == wire::type_hash<WatchRequest>()) {
      WatchRequest request;
      if (const WatchRequest* typed = env.data().get<WatchRequest>()) {
        request = *typed;
      } else {  // it came back over a channel: bytes
        absl::StatusOr<std::string_view> bytes = const_cast<wire::Any&>(env.data()).bytes();
        if (!bytes.ok() || !wire::decode_into(*bytes, request, "WatchRequest").ok()) {
          return absl::OkStatus();
        }
      }
      if (!request.watch) return absl::OkStatus();
      auto e = it->second.entries.find(entry_key(request.target, request.watcher));
      if (e != it->second.entries.end()) end_entry(cx, it->second, e, why);
    } else {
      end_all(cx, it->second, why);
    }
    if (it->second.entries.empty()) peers_.erase(it);
    stop_ticking_when_idle(cx);
    return absl::OkStatus();
  }

  // ---- other procs' watches of this proc's actors ----
  absl::Status handle(Context& cx, WatchRequest m) override {
    const runtime::MessageEnvelope* env = cx.envelope();
    // Only a watcher's own proc registers or cancels it: a peer cannot cancel someone else's
    // watch or register watchers that live elsewhere.
    if (env == nullptr || !(env->sender().id.proc == m.watcher.id.proc)) return absl::OkStatus();
    const std::string from = m.watcher.id.proc.to_string();
    const std::string key = entry_key(m.target, m.watcher);
    if (!m.watch) {
      if (auto it = served_.find(from); it != served_.end()) {
        served_total_ -= it->second.registrations.erase(key);
        if (it->second.registrations.empty()) served_.erase(it);
      }
      serve_remote_watch(cx.proc(), m);
      return absl::OkStatus();
    }
    const auto known = served_.find(from);
    if (served_total_ >= kMaxRemoteWatches &&
        (known == served_.end() || !known->second.registrations.contains(key))) {
      port_of<Down>(m.watcher).send(
          cx, Down{m.target,
                   absl::StrCat("its proc serves ", kMaxRemoteWatches,
                                " remote watches already (kMaxRemoteWatches)"),
                   false, true});
    } else {
      Served& served = served_[from];
      if (served.registrations.empty()) served.last_ping = cx.proc().now();
      served_total_ += served.registrations.emplace(key, m).second ? 1 : 0;
      serve_remote_watch(cx.proc(), m);
      start_ticking(cx);
    }
    port_of<WatchAck>(env->sender()).send(cx, WatchAck{m.target, m.watcher, incarnation_});
    return absl::OkStatus();
  }

  absl::Status handle(Context& cx, WatchPing) override {
    if (const runtime::MessageEnvelope* env = cx.envelope()) {
      if (auto it = served_.find(env->sender().id.proc.to_string()); it != served_.end()) {
        it->second.last_ping = cx.proc().now();
      }
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
  using Entries = absl::flat_hash_map<std::string, Entry>;  // by entry_key
  struct Peer {
    ActorAddr keeper;
    absl::Time last_heard;
    uint64_t incarnation = 0;  // of its latest pong; 0: none yet
    Entries entries;
  };

  static std::string entry_key(const ActorAddr& target, const ActorAddr& watcher) {
    return absl::StrCat(target.id.to_string(), " ", watcher.id.to_string());
  }
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
    if (it == peers_.end() || it->second.entries.erase(entry_key(target, watcher)) == 0) {
      return false;
    }
    --total_;
    if (it->second.entries.empty()) peers_.erase(it);
    return true;
  }
  void down(Context& cx, const ActorAddr& watcher, const ActorAddr& target, std::string why) {
    port_of<Down>(watcher).send(cx, Down{target, std::move(why), false, /*unreachable=*/true});
  }
  // Ends one watch: Down to its watcher, and a cancel to the target's proc in case it is alive
  // after all (slow, not gone), so its registration does not linger there.
  void end_entry(Context& cx, Peer& peer, Entries::iterator it, const std::string& why) {
    down(cx, it->second.watcher, it->second.target, why);
    port_of<WatchRequest>(peer.keeper)
        .send(cx, WatchRequest{it->second.target, it->second.watcher, false});
    peer.entries.erase(it);
    --total_;
  }
  void end_all(Context& cx, Peer& peer, const std::string& why) {
    while (!peer.entries.empty()) end_entry(cx, peer, peer.entries.begin(), why);
  }
  // The proc answers as `incarnation`: watches acknowledged by an earlier one were forgotten.
  void end_other_incarnations(Context& cx, Peer& peer, uint64_t incarnation) {
    for (auto it = peer.entries.begin(); it != peer.entries.end();) {
      const uint64_t inc = it->second.incarnation;
      if (inc != 0 && inc != incarnation) {
        end_entry(cx, peer, it++, "its proc restarted (the watch was on the earlier one)");
      } else {
        ++it;
      }
    }
  }
  void start_ticking(Context& cx) {
    if (!tick_.valid()) {
      tick_ = cx.send_every(options_.interval, port_of<WatchTick>(cx.self_addr()), WatchTick{});
    }
  }
  void stop_ticking_when_idle(Context& cx) {
    if (peers_.empty() && served_.empty() && tick_.valid()) {
      cx.cancel(tick_);
      tick_ = TimerHandle();
    }
  }

  const WatchOptions options_;
  const uint64_t incarnation_;
  absl::flat_hash_map<std::string, Peer> peers_;  // by the watched proc's id
  size_t total_ = 0;
  // Other procs' watches of this proc's actors, by the watcher's proc id.
  struct Served {
    absl::Time last_ping;
    absl::flat_hash_map<std::string, WatchRequest> registrations;  // by entry_key
  };
  absl::flat_hash_map<std::string, Served> served_;
  size_t served_total_ = 0;
  TimerHandle tick_;
};

}  // namespace

absl::Status install_watch_keeper(runtime::Proc& proc, const WatchOptions& options) {
  return spawn<WatchKeeper>(proc, kWatchName, options).status();
}

}  // namespace postal::actors::internal
