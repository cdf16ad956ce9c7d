// libFuzzer: wire v2's DATA body decoder (routing/src/envelope_codec.h, docs/wire.md §6, §7,
// §14). Any bytes: a stream error or an envelope, never a crash, a hang or an allocation past a
// small constant times the input (R-FLOW-4). The input is split into frames by a 2-byte length
// so one decoder's dictionary carries DEFINEs from frame to frame, as on a session; a frame that
// decodes is encoded again by a fresh encoder and must decode to the same addresses. Its
// payload is then decoded as a message with wire::SharedBytes fields, as a slice-backed payload
// is (§14.3): large fields must be slices inside the payload, never past it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "envelope_codec.h"
#include "postal/wire/codec.h"
#include "postal/wire/shared_bytes.h"

namespace {

struct FuzzBlob {
  postal::wire::SharedBytes a;
  std::string b;
  postal::wire::SharedBytes c;
  template <class A>
  void serialize(A& ar) {
    ar(a, b, c);
  }
};

// Decodes `payload` (kept alive by a shared copy) into FuzzBlob; a field slice outside it traps.
void decode_shared(std::string_view payload) {
  auto owner = std::make_shared<const std::string>(payload);
  FuzzBlob blob;
  if (!postal::wire::decode_into(*owner, blob, "fuzz blob", owner).ok()) return;
  const char* const begin = owner->data();
  const char* const end = begin + owner->size();
  for (const postal::wire::SharedBytes* f : {&blob.a, &blob.c}) {
    if (f->owner() == owner && (f->data() < begin || f->data() + f->size() > end)) {
      __builtin_trap();
    }
  }
}

}  // namespace

using postal::routing::internal::v2::DictLimits;
using postal::routing::internal::v2::EnvelopeDecoder;
using postal::routing::internal::v2::EnvelopeEncoder;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  EnvelopeDecoder dec(DictLimits{64, 16 << 10});
  while (in.size() >= 2) {
    const size_t n = static_cast<uint8_t>(in[0]) | (static_cast<size_t>(static_cast<uint8_t>(in[1])) << 8);
    in.remove_prefix(2);
    const std::string_view body = in.substr(0, n);
    in.remove_prefix(body.size());
    uint64_t seq = 0;
    auto env = dec.decode(body, seq);
    if (!env.ok()) break;  // a stream error ends the session
    if (absl::StatusOr<std::string_view> payload = (*env)->data().bytes(); payload.ok()) {
      decode_shared(*payload);
    }
    EnvelopeEncoder enc;
    std::string again;
    if (!enc.encode(seq, **env, again).ok()) continue;
    EnvelopeDecoder fresh;
    uint64_t seq2 = 0;
    auto back = fresh.decode(again, seq2);
    if (!back.ok() || seq2 != seq || (*back)->sender() != (*env)->sender() ||
        (*back)->dest() != (*env)->dest() || (*back)->next_hop() != (*env)->next_hop()) {
      __builtin_trap();
    }
  }
  return 0;
}
