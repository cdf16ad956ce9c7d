// wire_bench: the per-message CPU of the cross-proc path's parts, apart from sockets and threads.
//
//   BM_PayloadEncode / BM_PayloadDecode   cereal of the `postal bench` stream payload
//                                         (routing::Payload: 64 body bytes and two PortRefs)
//   BM_EnvelopeEncodeV2 / ...DecodeV2     wire v2's binary envelope with a warm session
//                                         dictionary (refs only, the steady state)
//   BM_EnvelopeRoundTrip                  what one message costs the two ends of a channel
//                                         together: payload encode + v2 encode + v2 decode +
//                                         payload decode
// The target of issue 9 is ≤ 1.5 µs of CPU per message over every process; these rows say how
// much of it the codecs take.
#include <benchmark/benchmark.h>

#include "envelope_codec.h"
#include "postal/routing/workload.h"
#include "postal/runtime/message_envelope.h"

namespace {

using postal::routing::Payload;
using postal::runtime::ActorAddr;
using postal::runtime::EnvelopePtr;
using postal::runtime::MessageEnvelope;
using postal::runtime::Port;
namespace v2 = postal::routing::internal::v2;

ActorAddr actor(const char* text) { return *ActorAddr::parse(text); }

Payload payload() {
  Payload p;
  p.mode = Payload::kStream;
  p.seq = 17;
  p.total = 1'000'000;
  p.sent_ns = 123456789;
  p.body = postal::wire::SharedBytes(std::string(64, 'x'));
  p.ack_to = postal::runtime::PortRef<postal::routing::StreamAck>(
      actor("driver.d1@ipc:///tmp/postal-bench-a.sock").port(Port::handler(7)));
  return p;
}

EnvelopePtr envelope() {
  return MessageEnvelope::make(actor("driver.d1@ipc:///tmp/postal-bench-a.sock"),
                               actor("echo.e1@ipc:///tmp/postal-bench-b.sock").port(Port::handler(3)),
                               postal::wire::Any::make(payload()));
}

void BM_PayloadEncode(benchmark::State& state) {
  const Payload p = payload();
  for (auto _ : state) benchmark::DoNotOptimize(postal::wire::encode(p));
}
BENCHMARK(BM_PayloadEncode);

void BM_PayloadDecode(benchmark::State& state) {
  const std::string bytes = *postal::wire::encode(payload());
  for (auto _ : state) benchmark::DoNotOptimize(postal::wire::decode<Payload>(bytes));
}
BENCHMARK(BM_PayloadDecode);

void BM_EnvelopeEncodeV2(benchmark::State& state) {
  v2::EnvelopeEncoder encoder;
  EnvelopePtr env = envelope();
  std::string out;
  uint64_t seq = 0;
  for (auto _ : state) {
    out.clear();
    benchmark::DoNotOptimize(encoder.encode(seq++, *env, out));
  }
}
BENCHMARK(BM_EnvelopeEncodeV2);

void BM_EnvelopeDecodeV2(benchmark::State& state) {
  v2::EnvelopeEncoder encoder;
  v2::EnvelopeDecoder decoder;
  EnvelopePtr env = envelope();
  std::string first, steady;
  (void)encoder.encode(0, *env, first);
  (void)encoder.encode(1, *env, steady);
  uint64_t seq = 0;
  (void)decoder.decode(first, seq);
  for (auto _ : state) benchmark::DoNotOptimize(decoder.decode(steady, seq));
}
BENCHMARK(BM_EnvelopeDecodeV2);

void BM_EnvelopeRoundTrip(benchmark::State& state) {
  v2::EnvelopeEncoder encoder;
  v2::EnvelopeDecoder decoder;
  std::string out;
  uint64_t seq = 0, got = 0;
  const EnvelopePtr model = envelope();
  const Payload p = payload();
  for (auto _ : state) {
    EnvelopePtr env = MessageEnvelope::make(model->sender(), model->dest(), postal::wire::Any::make(p));
    out.clear();
    (void)encoder.encode(seq++, *env, out);
    absl::StatusOr<EnvelopePtr> back = decoder.decode(out, got);
    benchmark::DoNotOptimize((*back)->data().take<Payload>());
  }
}
BENCHMARK(BM_EnvelopeRoundTrip);

}  // namespace

BENCHMARK_MAIN();
