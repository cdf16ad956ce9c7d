// nats_tunnel.h — byte streams over NATS (routing internal): what carries a `nats://` channel.
//
// A nats:// channel is the stream channel (wire v2: stream_client / stream_server) run through a
// tunnel. Each connection the stream client makes (`TunnelClient::dial`) is one virtual
// connection over NATS to the TunnelServer of the proc's subject, which hands it to its stream
// server (`adopt`). The stream side's writes go straight into NATS messages on the writing thread
// (a ByteSink, byte_sink.h); the peer's bytes reach it through a socketpair, written by the NATS
// callback. Every rule of the stream channel — sessions, acks, retransmit after a lost
// connection, heartbeats, chunking, undeliverables, authentication — holds unchanged, because
// the stream protocol runs end to end; the tunnel only delivers bytes in order or cuts the
// connection:
//   * Messages are [kind:1][seq:8 LE][payload]: OPEN (published with the dialer's inbox for the
//     connection as reply subject and payload), OPENED (its answer), DATA (sequenced per
//     direction from 1), ACK (payload: bytes consumed so far, u64 LE), FIN.
//   * Subjects: client → server `<subject>.t.<conn>`; server → client the inbox OPEN named.
//   * A gap in the DATA sequence (NATS core is at most once: a slow consumer or a failover drops
//     messages), a NATS disconnect or reconnect, or a FIN cuts the connection: the stream client
//     reconnects and resumes its session, retransmitting what was not acked (R-CHAN-2).
//   * Flow control: a side's sink takes no more while `window` bytes it sent are unacked, so a
//     slow reader pushes back across NATS as a slow socket does; a peer that sends past the window
//     is cut. DATA payloads are at most the server's max_payload minus the 9-byte header.
//   * The dial never blocks: the sink takes nothing until OPENED. With no proc serving the
//     subject the server answers the OPEN "no responders" at once, and a refusal is a FIN; either
//     way the socket closes, which the stream client sees as a refused connection. A first dial
//     probes the subject before it dials, so it fails at once too.
//   * Heartbeats: each side asks the other every `keepalive` whether it still holds each
//     connection (PROBE, a request answered OPENED or FIN); a FIN, no responders (a killed proc
//     sends no FIN) or three unanswered probes cut it.
// Threads: per virtual connection a writer (NATS → socket) for what the socket does not take at
// once; NATS callbacks otherwise write to the socket themselves. Each tunnel has its own NATS
// connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "byte_sink.h"
#include "nats_conn.h"
#include "postal/runtime/location.h"

namespace postal::routing::internal::nats_tunnel {

struct TunnelOptions {
  std::string url;                              // nats://host:port
  std::string subject;                          // the served proc's subject
  NatsCredentials credentials;                  // what it presents to NATS (nats_credentials)
  routing::NatsTls tls;                         // TLS to the server; off unless a CA file is given
  absl::Duration timeout;                       // connecting to NATS, and an OPEN's answer
  size_t window = 4 << 20;                      // unacked bytes per direction of a connection
  size_t max_connections = 1024;                // virtual connections a server holds at once
  absl::Duration keepalive = absl::Seconds(1);  // how often a connection's peer is probed
};

// What a tunnel counts (tests and diagnostics).
struct TunnelStats {
  uint64_t opened = 0;    // virtual connections made
  uint64_t cut_gap = 0;   // cut for a gap in the DATA sequence
  uint64_t cut_nats = 0;  // cut because the NATS connection was lost or came back
  uint64_t cut_gone = 0;  // cut because the peer no longer had it (heartbeats)
  uint64_t refused = 0;   // OPENs refused or unanswered
};

class TunnelServer {
 public:
  // Serves `options.subject`, handing each virtual connection to `adopt` (the stream server).
  static absl::StatusOr<std::unique_ptr<TunnelServer>> start(const TunnelOptions& options,
                                                             SinkAdopter adopt);
  virtual ~TunnelServer() = default;
  virtual TunnelStats stats() const = 0;
  // Stops answering and cuts every connection without a FIN, as a killed process would.
  virtual void vanish() = 0;
};

class TunnelClient {
 public:
  // Connects to NATS; each `dial` is a virtual connection to `options.subject`.
  static absl::StatusOr<std::unique_ptr<TunnelClient>> start(const TunnelOptions& options);
  virtual ~TunnelClient() = default;
  // A new connection, without waiting for the server's answer (a SinkDialer, byte_sink.h).
  virtual absl::StatusOr<SinkLink> dial() = 0;
  virtual TunnelStats stats() const = 0;
  // Whether a proc serves the subject now: Unavailable (no responders, or no answer within the
  // timeout) when none does.
  virtual absl::Status probe() = 0;
};

// A private folder (0700), removed with the object (local_nats.h keeps a server's files there).
class PrivateDir {
 public:
  static absl::StatusOr<PrivateDir> make();
  PrivateDir(PrivateDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  PrivateDir& operator=(PrivateDir&&) = delete;
  ~PrivateDir();
  const std::string& path() const { return path_; }

 private:
  explicit PrivateDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace postal::routing::internal::nats_tunnel
