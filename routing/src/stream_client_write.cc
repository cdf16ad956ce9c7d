// StreamClientCore's writes (stream_client.h has the threading, docs/wire.md the protocol): the
// non-blocking gathered write rounds (§13), the chunks of large payloads cut into them and their
// transfers (§9), and the wait for a writable socket. Every function here runs holding io_mu_.
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"
#include "stream_client.h"

namespace postal::routing::internal {

using runtime::DeliveryFailure;
using runtime::EnvelopePtr;
using runtime::MessageEnvelope;
using runtime::TransportReason;

namespace {

// iovecs per sendmsg (the platform's IOV_MAX is 1024).
constexpr size_t kMaxIov = 1024;
// iovecs a write round keeps for chunks (64 chunks, a head and a slice each, and a half one).
constexpr size_t kChunkIov = 2 * 64 + 2;

}  // namespace

void StreamClientCore::finish_transfer(Transfer* t) {
  auto it = std::find_if(transfers_.begin(), transfers_.end(),
                         [&](const std::unique_ptr<Transfer>& x) { return x.get() == t; });
  if (it == transfers_.end()) return;
  if (cut_half_ && cut_half_->transfer == t) cut_half_.reset();
  // Its DATA is acked, so normally trimmed already; an ended transfer's may not be: its envelope
  // then goes (and is counted) when trim() reaches it.
  bool in_pending = false;
  for (Pending& p : pending_) {
    if (p.transfer == t) {
      p.transfer = nullptr;
      in_pending = true;
    }
  }
  if (t->env) bounds_.release(*t->env);  // R-FLOW-2
  transfers_.erase(it);                  // the envelope (delivered at the server) goes with it
  if (!in_pending) outstanding_.fetch_sub(1, std::memory_order_acq_rel);
  release_held();  // a slot is free (rule 24)
}

uint64_t StreamClientCore::cut_end(const Transfer* t) const {
  uint64_t end = t->sent;  // what went out whole, then the chunk cut in half, then this batch's
  if (cut_half_ && cut_half_->transfer == t) end = cut_half_->offset + cut_half_->len;
  for (const ChunkCut& c : cuts_) {
    if (c.transfer == t) end = c.offset + c.len;
  }
  return end;
}

void StreamClientCore::cut_chunks(bool released, uint64_t data_end, size_t& bytes) {
  if (transfers_.empty()) return;
  const size_t n = transfers_.size();
  const size_t limit = chunk_limit();
  bool progress = true;
  // Round-robin, one chunk per transfer per pass, while the round has room (§9.9 rule 37): at
  // least one chunk whenever a transfer can send, however many DATA frames went before.
  while (progress && cuts_.size() < 64) {
    progress = false;
    for (size_t k = 0; k < n && cuts_.size() < 64; ++k) {
      Transfer* t = transfers_[(round_robin_ + k) % n].get();
      if (t->ending || t->released != released || (!released && t->seq >= data_end)) continue;
      const uint64_t from = cut_end(t);
      const uint64_t window_end = t->received + limits_.transfer_window;
      uint64_t end = std::min<uint64_t>({t->available(), window_end, from + limit});
      if (end <= from) continue;
      const char* data = t->payload.data() + from;
      if (t->stream) {  // §9.7: as far as one piece the gateway holds goes
        const std::string_view piece = t->stream->slice(from, static_cast<size_t>(end - from));
        if (piece.empty()) continue;
        end = from + piece.size();
        data = piece.data();
      }
      if (!cuts_.empty() && bytes >= options_.max_batch_bytes) return;
      ChunkCut c;
      c.transfer = t;
      c.offset = from;
      c.len = static_cast<size_t>(end - from);
      c.data = data;
      const uint32_t length = static_cast<uint32_t>(1 + 16 + c.len);
      std::memcpy(c.head.data(), &length, 4);
      c.head[4] = static_cast<char>(v2::Kind::kChunk);
      std::memcpy(c.head.data() + 5, &t->seq, 8);
      std::memcpy(c.head.data() + 13, &c.offset, 8);
      bytes += c.head.size() + c.len;
      cuts_.push_back(c);
      progress = true;
    }
  }
  round_robin_ = (round_robin_ + 1) % n;
}

bool StreamClientCore::end_transfers() {
  if (link_ != Link::kUp) return false;
  std::vector<Transfer*> ended;
  bool deferred = false;
  for (const std::unique_ptr<Transfer>& t : transfers_) {
    if (t->stream && t->stream->state() == PayloadStream::State::kAborted) t->ending = true;
    if (!t->ending) continue;
    // The ABORT follows the DATA frame, and a chunk cut in half is finished first (its bytes
    // are the envelope's).
    if (t->seq >= written_ || (cut_half_ && cut_half_->transfer == t.get())) {
      deferred = true;
      continue;
    }
    v2::append_abort(heartbeat_out_,
                     v2::TransferEnd{t->seq, static_cast<uint8_t>(TransportReason::kChannelClosed),
                                     "the transfer was given up before the server held it"});
    ended.push_back(t.get());
  }
  for (Transfer* t : ended) {
    if (!t->cancel) {  // the upstream aborted: it returns the envelope, if anyone does
      finish_transfer(t);
      continue;
    }
    // Rule 31: cancelled by the server, which returns nothing: the envelope (whole here, or
    // streaming through this gateway — then it is handed further back) returns from here.
    EnvelopePtr env = std::move(t->env);
    if (!env) {
      for (Pending& p : pending_) {
        if (p.transfer == t) env = std::move(p.env);
      }
    }
    const v2::TransferEnd cancel = *t->cancel;
    if (env) bounds_.release(*env);  // R-FLOW-2; trim() and finish_transfer() see no envelope
    finish_transfer(t);
    if (!env) continue;
    std::string target = target_of(*env);
    const bool known =
        cancel.reason != 0 && cancel.reason <= static_cast<uint8_t>(TransportReason::kOverloaded);
    DeliveryFailure f = DeliveryFailure::transport_failure(
        std::move(target),
        known ? static_cast<TransportReason>(cancel.reason) : TransportReason::kChannelClosed,
        absl::StrCat("the server cancelled the transfer: ", cancel.text));
    MessageEnvelope::undeliverable(std::move(env), std::move(f), returns_);
  }
  return deferred;
}

void StreamClientCore::flush_writes() {
  if (closed() || waiting_writable_) return;
  // Two passes when an ABORT had to wait for this write round (its DATA frame, a chunk cut in
  // half); later ones go with the next flush.
  for (int pass = 0; pass < 2; ++pass) {
    const bool deferred = !transfers_.empty() && end_transfers();
    int err = 0;
    switch (write_some(err)) {
      case Written::kAll:
        if (deferred) continue;
        return;
      case Written::kFull:
        return wait_writable();
      case Written::kFailed:
        last_errno_ = err;
        return link_failed(gen_, err != 0 ? os_error(err) : tls_error_);
    }
  }
}

bool StreamClientCore::write_inline() {
  int err = 0;
  return write_some(err) == Written::kAll;
}

StreamClientCore::Written StreamClientCore::write_some(int& err) {
  if (link_ != Link::kHandshaking && link_ != Link::kUp) return Written::kAll;
  const int fd = socket_.native_handle();
  iovec iov[kMaxIov];
  auto add_cut = [&](const ChunkCut& c, size_t& count) {
    size_t skip = c.done;
    if (skip < c.head.size()) {
      iov[count++] = iovec{const_cast<char*>(c.head.data()) + skip, c.head.size() - skip};
      skip = 0;
    } else {
      skip -= c.head.size();
    }
    iov[count++] = iovec{const_cast<char*>(c.data) + skip, c.len - skip};
  };
  for (;;) {
    if (tls_ != nullptr) {  // R-SEC-1: the ciphertext of the last round goes first
      if (const Written w = send_tls(err); w != Written::kAll) return w;
      if (!tls_->done()) return Written::kAll;  // no plaintext before the TLS handshake ends
    }
    size_t count = 0, bytes = 0;
    cuts_.clear();
    head_cuts_ = 0;
    batch_data_end_ = next_to_send_;
    // §10.2: a PING or PONG goes between frames, never into one cut in half.
    if (!heartbeat_out_.empty() && link_ == Link::kUp && send_offset_ == 0 && !cut_half_) {
      control_.append(heartbeat_out_);
      heartbeat_out_.clear();
    }
    if (control_sent_ < control_.size()) {
      iov[count++] = iovec{control_.data() + control_sent_, control_.size() - control_sent_};
      bytes += control_.size() - control_sent_;
    }
    if (link_ == Link::kUp) {
      // A chunk cut in half goes on first; then the chunks of released transfers (after a
      // reconnect: their pair's later envelopes must not overtake them), then DATA frames, then
      // one chunk per transfer (§9.9).
      if (cut_half_) {
        add_cut(*cut_half_, count);
        bytes += cut_half_->head.size() + cut_half_->len - cut_half_->done;
      }
      bool data_allowed = true;
      if (!transfers_.empty()) {
        cut_chunks(/*released=*/true, 0, bytes);
        head_cuts_ = cuts_.size();
        for (const ChunkCut& c : cuts_) add_cut(c, count);
        for (const std::unique_ptr<Transfer>& t : transfers_) {
          if (!t->released || t->ending) continue;
          if (cut_end(t.get()) < t->size) data_allowed = false;
        }
      }
      if (data_allowed && !pending_.empty()) {
        size_t offset = send_offset_;
        size_t i = next_to_send_ - pending_.front().seq;
        for (;
             i < pending_.size() && count + 1 + pending_[i].payload.size() <= kMaxIov - kChunkIov &&
             bytes < options_.max_batch_bytes;
             ++i) {
          const Pending& p = pending_[i];
          if (offset < p.frame.size()) {
            iov[count++] =
                iovec{const_cast<char*>(p.frame.data()) + offset, p.frame.size() - offset};
            bytes += p.frame.size() - offset;
            offset = 0;
          } else {
            offset -= p.frame.size();
          }
          for (const std::string_view piece : p.payload) {  // a frame cut in half skips some
            if (offset >= piece.size()) {
              offset -= piece.size();
              continue;
            }
            iov[count++] = iovec{const_cast<char*>(piece.data()) + offset, piece.size() - offset};
            bytes += piece.size() - offset;
            offset = 0;
          }
          offset = 0;
        }
        batch_data_end_ = pending_.front().seq + i;
      }
      if (!transfers_.empty() && data_allowed) {
        cut_chunks(/*released=*/false, batch_data_end_, bytes);
        for (size_t k = head_cuts_; k < cuts_.size(); ++k) add_cut(cuts_[k], count);
      }
    }
    if (count == 0) return Written::kAll;
    if (tls_ != nullptr) {
      if (const Written w = seal(iov, count); w != Written::kAll) return w;
      continue;  // the ciphertext goes at the top of the loop
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t n = sink_ != nullptr ? sink_->writev(iov, static_cast<int>(count))
                                       : ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == 0) return Written::kFull;  // a sink with no room (a socket never takes 0 bytes)
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Written::kFull;
      err = errno;
      return Written::kFailed;
    }
    wrote_since_tick_ = true;
    if (advance(static_cast<size_t>(n))) release_held();
    if (static_cast<size_t>(n) < bytes) return Written::kFull;  // the socket buffer is full
  }
}

bool StreamClientCore::advance(size_t n) {
  if (control_sent_ < control_.size()) {
    const size_t take = std::min(n, control_.size() - control_sent_);
    control_sent_ += take;
    n -= take;
    if (control_sent_ == control_.size()) {
      control_.clear();
      control_sent_ = 0;
    }
  }
  bool released = false;
  // A chunk: whether it was written whole (else it is the chunk cut in half now).
  auto take_cut = [&](ChunkCut c) {
    const size_t left = c.head.size() + c.len - c.done;
    if (n < left) {
      c.done += n;
      n = 0;
      cut_half_ = c;
      return false;
    }
    n -= left;
    Transfer* t = c.transfer;
    t->sent = c.offset + c.len;
    if (t->sent == t->size && !t->released) released = t->released = true;
    return true;
  };
  if (cut_half_ && n > 0) {
    ChunkCut c = *cut_half_;
    cut_half_.reset();
    if (!take_cut(c)) return released;
  }
  for (size_t k = 0; k < head_cuts_ && n > 0; ++k) {
    if (!take_cut(cuts_[k])) return released;
  }
  while (n > 0 && next_to_send_ < batch_data_end_) {
    const Pending& p = pending_[next_to_send_ - pending_.front().seq];
    const size_t left = p.frame.size() + p.payload_bytes - send_offset_;
    if (n < left) {
      send_offset_ += n;
      return released;
    }
    n -= left;
    send_offset_ = 0;
    ++next_to_send_;
    written_ = std::max(written_, next_to_send_);  // complete: the server may have it
  }
  for (size_t k = head_cuts_; k < cuts_.size() && n > 0; ++k) {
    if (!take_cut(cuts_[k])) return released;
  }
  return released;
}

void StreamClientCore::wait_writable() {
  waiting_writable_ = true;
  if (sink_ != nullptr) {
    sink_->when_writable([weak = weak_from_this(), &io = io_, gen = gen_] {
      boost::asio::post(io.context(), [weak, gen] {
        const std::shared_ptr<StreamClientCore> self = weak.lock();
        if (self == nullptr) return;
        absl::MutexLock lock(&self->io_mu_);
        if (gen != self->gen_ || self->closed()) return;
        self->waiting_writable_ = false;
        self->flush_writes();
      });
    });
    return;
  }
  socket_.async_wait(Socket::wait_write,
                     [self = shared_from_this(), gen = gen_](const boost::system::error_code& ec) {
                       absl::MutexLock lock(&self->io_mu_);
                       if (gen != self->gen_ || self->closed()) return;
                       self->waiting_writable_ = false;
                       if (ec) {
                         self->last_errno_ = errno_of(ec);
                         return self->link_failed(gen, os_error(ec));
                       }
                       self->flush_writes();
                     });
}

}  // namespace postal::routing::internal
