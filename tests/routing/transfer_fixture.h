// What the transfer tests share (channel_transfer_test.cc, gateway_stream_test.cc): a payload
// whose bytes show where they were, and a fake server's view of a client's stream.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "channel_fixture.h"

namespace postal::routing::channel_test {

// A payload whose every byte depends on its offset, so a chunk in the wrong place shows.
inline std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 4093) % 26);
  return s;
}

// The fake server's view of the client's stream: DATA frames decoded (chunked ones register a
// transfer), CHUNK bytes appended to their transfer.
struct FakeServer {
  v2::EnvelopeDecoder decoder;
  struct Seen {
    uint64_t seq = 0;
    int64_t n = -1;
    std::string sender;
    uint64_t chunked = 0;  // payload_len of a transfer
  };
  std::vector<Seen> data;
  std::map<uint64_t, std::string> transfers;  // seq → bytes received

  // Reads one frame; false when none came.
  bool read(RawPeer& peer) {
    std::optional<RawPeer::Received> f = peer.next();
    if (!f) return false;
    if (f->kind == v2::Kind::kData) {
      Seen seen;
      absl::StatusOr<EnvelopePtr> env =
          decoder.decode(f->body, seen.seq, &seen.chunked, 1ull << 30);
      EXPECT_TRUE(env.ok()) << env.status();
      if (!env.ok()) return false;
      seen.sender = (*env)->sender().to_string();
      if (seen.chunked == 0) {
        absl::StatusOr<ChanMsg> msg = (*env)->data().take<ChanMsg>();
        seen.n = msg.ok() ? msg->n : -1;
      } else {
        transfers[seen.seq];
      }
      data.push_back(seen);
      return true;
    }
    EXPECT_EQ(f->kind, v2::Kind::kChunk);
    absl::StatusOr<v2::Chunk> chunk = v2::decode_chunk(f->body);
    EXPECT_TRUE(chunk.ok()) << chunk.status();
    if (!chunk.ok()) return false;
    std::string& bytes = transfers[chunk->seq];
    EXPECT_EQ(chunk->offset, bytes.size()) << "chunks arrive in order, from what the server holds";
    bytes.append(chunk->bytes);
    return true;
  }
};

}  // namespace postal::routing::channel_test
