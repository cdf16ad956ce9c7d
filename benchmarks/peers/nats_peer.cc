// nats_bench: NATS publish/subscribe through a local nats-server, the broker peer of postal's
// tcp scenarios. `postal bench` starts the server on a loopback port and runs this program.
//
//   nats_bench --url nats://127.0.0.1:PORT --size BYTES --messages N [--rtt-messages N]
//              [--window 1024] [--label nats]
//              [--mq9 1]        the server is `postal mq9`: both subjects are mq9 MSG subjects of
//                               public mailboxes this creates; its round trip is a publish
//                               answered by the bridge once stored (no responder)
//              [--jetstream 1]  the round trip is a JetStream publish acknowledged once stored
//                               (file storage; no responder) — mq9's stored round trip's peer
//              [--stream-subject S] [--rtt-subject S]
//
// Connections to the server: a publisher and a subscriber for the stream, a requester and a
// responder for the round trip (every message crosses the server: two TCP hops and the broker).
//
//   stream      the publisher publishes `messages` messages on one subject with at most `window`
//               not yet received by the subscriber (capped at 32 MiB in flight, so the server
//               never cuts the subscriber off as a slow consumer); messages/s from the first
//               publish to the last receive, and one-way latency from a timestamp in the body.
//   round_trip  natsConnection_Request / a responder that publishes the body back to the reply
//               subject; latency per round trip.
//
// The window is counted in-process (publisher and subscriber share memory), which is cheaper than
// postal's acknowledgements over the network. Prints one JSON line (peer_common.h).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <nats/nats.h>

#include "peer_common.h"

namespace {

constexpr char kMq9MsgPrefix[] = "$mq9.AI.MAILBOX.MSG.";

void check(natsStatus s, const char* what) {
  if (s != NATS_OK) {
    postal_peers::fail("nats", std::string(what) + ": " + natsStatus_GetText(s) + " (" +
                                   nats_GetLastError(nullptr) + ")");
  }
}

struct StreamState {
  uint64_t total = 0;
  std::atomic<uint64_t> received{0};
  std::vector<int64_t> one_way_ns;  // written by the subscriber thread only
  std::mutex mu;
  std::condition_variable cv;
};

void on_stream(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  auto* s = static_cast<StreamState*>(closure);
  int64_t sent = 0;
  if (natsMsg_GetDataLength(msg) >= static_cast<int>(sizeof sent)) {
    std::memcpy(&sent, natsMsg_GetData(msg), sizeof sent);
    s->one_way_ns.push_back(postal_peers::now_ns() - sent);
  }
  natsMsg_Destroy(msg);
  const uint64_t n = s->received.fetch_add(1) + 1;
  if (n % 64 == 0 || n == s->total) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->cv.notify_all();
  }
}

void on_request(natsConnection* nc, natsSubscription*, natsMsg* msg, void*) {
  if (const char* reply = natsMsg_GetReply(msg)) {
    natsConnection_Publish(nc, reply, natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
  }
  natsMsg_Destroy(msg);
}

// `send_asap`: write every publish at once instead of letting the library's flusher batch them
// (the round-trip connections; batching is what the stream wants).
natsConnection* connect(const std::string& url, bool send_asap) {
  natsOptions* opts = nullptr;
  check(natsOptions_Create(&opts), "options");
  check(natsOptions_SetURL(opts, url.c_str()), "url");
  check(natsOptions_SetMaxReconnect(opts, 0), "options");
  check(natsOptions_SetSendAsap(opts, send_asap), "options");
  natsConnection* nc = nullptr;
  check(natsConnection_Connect(&nc, opts), ("connect " + url).c_str());
  natsOptions_Destroy(opts);
  return nc;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = postal_peers::parse_flags(argc, argv);
  const std::string url = postal_peers::flag_str(flags, "url", "nats://127.0.0.1:4222");
  const uint64_t size = std::max<uint64_t>(8, postal_peers::flag_u64(flags, "size", 64));
  const uint64_t messages = postal_peers::flag_u64(flags, "messages", 100000);
  const uint64_t rtt_messages = postal_peers::flag_u64(flags, "rtt-messages", 10000);
  const uint64_t window = std::clamp<uint64_t>(
      std::min(postal_peers::flag_u64(flags, "window", 1024), (uint64_t{32} << 20) / size), 4,
      1 << 20);
  if (messages == 0 || rtt_messages == 0) {
    postal_peers::fail("nats", "--messages and --rtt-messages must be > 0");
  }
  const std::string label = postal_peers::flag_str(flags, "label", "nats");
  const bool mq9 = postal_peers::flag_u64(flags, "mq9", 0) != 0;
  const bool jetstream = postal_peers::flag_u64(flags, "jetstream", 0) != 0;
  const std::string stream_subject = postal_peers::flag_str(
      flags, "stream-subject", mq9 ? std::string(kMq9MsgPrefix) + "bench.stream" : "postal.bench.stream");
  const std::string rtt_subject = postal_peers::flag_str(
      flags, "rtt-subject", mq9 ? std::string(kMq9MsgPrefix) + "bench.rtt" : "postal.bench.rtt");
  const char* kStreamSubject = stream_subject.c_str();
  const char* kRttSubject = rtt_subject.c_str();

  natsConnection* pub = connect(url, false);
  natsConnection* sub_conn = connect(url, false);
  natsConnection* req_conn = connect(url, true);
  natsConnection* resp_conn = connect(url, true);
  StreamState state;
  state.total = messages;
  state.one_way_ns.reserve(messages);
  natsSubscription* stream_sub = nullptr;
  natsSubscription* rtt_sub = nullptr;
  check(natsConnection_Subscribe(&stream_sub, sub_conn, kStreamSubject, on_stream, &state),
        "subscribe");
  check(natsSubscription_SetPendingLimits(stream_sub, -1, -1), "pending limits");
  jsCtx* js = nullptr;
  if (mq9) {
    for (const std::string& subject : {stream_subject, rtt_subject}) {
      std::string name = subject.substr(sizeof kMq9MsgPrefix - 1);
      for (const char* priority : {".critical", ".urgent"}) {  // a priority, not the mailbox
        const size_t n = std::strlen(priority);
        if (name.size() > n && name.compare(name.size() - n, n, priority) == 0) name.resize(name.size() - n);
      }
      const std::string create = R"({"public":true,"ttl":3600,"name":")" + name + "\"}";
      natsMsg* reply = nullptr;
      check(natsConnection_Request(&reply, req_conn, "$mq9.AI.MAILBOX.CREATE", create.data(),
                                   static_cast<int>(create.size()), 10000),
            "mq9 create");
      natsMsg_Destroy(reply);
    }
  } else if (jetstream) {
    check(natsConnection_JetStream(&js, req_conn, nullptr), "jetstream");
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = "POSTALBENCH";
    const char* subjects[] = {kRttSubject};
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    jsStreamInfo* si = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    check(js_AddStream(&si, js, &cfg, nullptr, &jerr), "add stream");
    jsStreamInfo_Destroy(si);
  } else {
    check(natsConnection_Subscribe(&rtt_sub, resp_conn, kRttSubject, on_request, nullptr),
          "subscribe");
  }
  check(natsConnection_Flush(sub_conn), "flush");
  check(natsConnection_Flush(resp_conn), "flush");

  std::string body(size, 'n');
  const int64_t start = postal_peers::now_ns();
  for (uint64_t i = 0; i < messages; ++i) {
    if (i - state.received.load() >= window) {
      std::unique_lock<std::mutex> lock(state.mu);
      state.cv.wait_for(lock, std::chrono::milliseconds(1),
                        [&] { return i - state.received.load() < window; });
      if (i - state.received.load() >= window) {
        --i;  // not yet: look again
        continue;
      }
    }
    const int64_t now = postal_peers::now_ns();
    std::memcpy(body.data(), &now, sizeof now);
    check(natsConnection_Publish(pub, kStreamSubject, body.data(), static_cast<int>(size)),
          "publish");
  }
  check(natsConnection_Flush(pub), "flush");
  {
    std::unique_lock<std::mutex> lock(state.mu);
    if (!state.cv.wait_for(lock, std::chrono::seconds(120),
                           [&] { return state.received.load() >= messages; })) {
      postal_peers::fail("nats", "the subscriber received " +
                                     std::to_string(state.received.load()) + " of " +
                                     std::to_string(messages) + " in 120 s");
    }
  }
  const int64_t stream_ns = postal_peers::now_ns() - start;

  std::vector<int64_t> rtt;
  rtt.reserve(rtt_messages);
  // One stored-and-acknowledged (or answered) round trip.
  auto round_trip = [&] {
    if (js) {
      jsPubAck* ack = nullptr;
      jsErrCode jerr = static_cast<jsErrCode>(0);
      check(js_Publish(&ack, js, kRttSubject, body.data(), static_cast<int>(size), nullptr, &jerr),
            "js publish");
      jsPubAck_Destroy(ack);
      return;
    }
    natsMsg* reply = nullptr;
    check(natsConnection_Request(&reply, req_conn, kRttSubject, body.data(), static_cast<int>(size),
                                 10000),
          "request");
    natsMsg_Destroy(reply);
  };
  for (int i = 0; i < 100; ++i) round_trip();  // warm-up: the request inbox subscription exists
  const int64_t rtt_start = postal_peers::now_ns();
  for (uint64_t i = 0; i < rtt_messages; ++i) {
    const int64_t t = postal_peers::now_ns();
    round_trip();
    rtt.push_back(postal_peers::now_ns() - t);
  }
  const int64_t rtt_ns = postal_peers::now_ns() - rtt_start;

  natsSubscription_Destroy(stream_sub);
  natsSubscription_Destroy(rtt_sub);
  if (js) jsCtx_Destroy(js);
  natsConnection_Destroy(resp_conn);
  natsConnection_Destroy(req_conn);
  natsConnection_Destroy(sub_conn);
  natsConnection_Destroy(pub);
  nats_Close();

  std::printf(
      "{\"peer\": \"%s\", \"transport\": \"tcp\", \"size\": %llu, \"window\": %llu, "
      "\"stream\": %s, \"stream_one_way\": %s, \"round_trip\": %s}\n",
      label.c_str(), static_cast<unsigned long long>(size), static_cast<unsigned long long>(window),
      postal_peers::stream_json(messages, size, stream_ns).c_str(),
      postal_peers::round_trip_json(state.one_way_ns, stream_ns).c_str(),
      postal_peers::round_trip_json(std::move(rtt), rtt_ns).c_str());
  return 0;
}
