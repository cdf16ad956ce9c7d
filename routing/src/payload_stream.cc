#include "payload_stream.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace postal::routing::internal {

namespace {

std::atomic<uint64_t> g_held{0};
std::atomic<uint64_t> g_peak{0};

void note_held(uint64_t held) {
  uint64_t peak = g_peak.load(std::memory_order_relaxed);
  while (held > peak && !g_peak.compare_exchange_weak(peak, held, std::memory_order_relaxed)) {
  }
}

// What an envelope holds: the stream, and the promise to give up for it when it goes.
class Reader final : public wire::ByteStream {
 public:
  explicit Reader(std::shared_ptr<PayloadStream> stream) : stream_(std::move(stream)) {}
  ~Reader() override { stream_->give_up(); }
  uint64_t size() const override { return stream_->size(); }
  bool hand_back(uint8_t reason, std::string_view detail) override {
    return stream_->hand_back(reason, detail);
  }
  const std::shared_ptr<PayloadStream>& stream() const { return stream_; }

 private:
  std::shared_ptr<PayloadStream> stream_;
};

}  // namespace

PayloadStream::~PayloadStream() {
  absl::MutexLock lock(&mu_);
  g_held.fetch_sub(end_ - base_, std::memory_order_relaxed);
}

wire::Any PayloadStream::make_reader(uint64_t type_hash) {
  return wire::Any::from_stream(type_hash, std::make_shared<Reader>(shared_from_this()));
}

std::shared_ptr<PayloadStream> PayloadStream::of(const wire::Any& any) {
  const auto* reader = dynamic_cast<const Reader*>(any.stream().get());
  return reader != nullptr ? reader->stream() : nullptr;
}

void PayloadStream::set_producer_wake(std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  producer_wake_ = std::move(wake);
}

void PayloadStream::set_consumer_wake(std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  consumer_wake_ = std::move(wake);
}

void PayloadStream::wake(std::function<void()> PayloadStream::*which) {
  std::function<void()> f;
  {
    absl::MutexLock lock(&mu_);
    f = this->*which;
  }
  if (f) f();
}

void PayloadStream::append(std::string_view bytes) {
  if (bytes.empty()) return;
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kFlowing) return;
    const uint64_t n = std::min<uint64_t>(bytes.size(), size_ - end_);
    pieces_.emplace_back(bytes.substr(0, n));
    end_ += n;
    note_held(g_held.fetch_add(n, std::memory_order_relaxed) + n);
    peak_ = std::max(peak_, end_ - base_);
  }
  wake(&PayloadStream::consumer_wake_);
}

void PayloadStream::abort() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kFlowing || end_ == size_) return;
    state_ = State::kAborted;
  }
  wake(&PayloadStream::consumer_wake_);
}

std::string_view PayloadStream::slice(uint64_t offset, size_t max) const {
  absl::MutexLock lock(&mu_);
  uint64_t at = base_;
  for (const std::string& piece : pieces_) {
    if (offset < at + piece.size()) {
      const size_t skip = static_cast<size_t>(offset - at);
      return std::string_view(piece).substr(skip, std::min(max, piece.size() - skip));
    }
    at += piece.size();
  }
  return {};
}

void PayloadStream::release(uint64_t upto) {
  {
    absl::MutexLock lock(&mu_);
    if (upto <= released_) return;
    released_ = std::min(upto, end_);
    while (!pieces_.empty() && base_ + pieces_.front().size() <= released_) {
      base_ += pieces_.front().size();
      g_held.fetch_sub(pieces_.front().size(), std::memory_order_relaxed);
      pieces_.pop_front();
    }
  }
  wake(&PayloadStream::producer_wake_);
}

void PayloadStream::give_up() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kFlowing || released_ == size_) return;
    state_ = State::kAbandoned;  // the bytes stay until the stream goes: a write may cut them
  }
  wake(&PayloadStream::producer_wake_);
}

bool PayloadStream::hand_back(uint8_t reason, std::string_view detail) {
  {
    absl::MutexLock lock(&mu_);
    if (taken_whole_ || state_ != State::kFlowing || released_ == size_) return false;
    state_ = State::kAbandoned;
    if (reason != 0) failure_reason_ = reason;  // kNone (not a transport failure): closed
    failure_detail_.assign(detail.substr(0, 1024));
  }
  wake(&PayloadStream::producer_wake_);
  return true;
}

void PayloadStream::taken_whole() {
  absl::MutexLock lock(&mu_);
  taken_whole_ = true;
}

uint8_t PayloadStream::failure_reason() const {
  absl::MutexLock lock(&mu_);
  return failure_reason_;
}

std::string PayloadStream::failure_detail() const {
  absl::MutexLock lock(&mu_);
  return failure_detail_;
}

PayloadStream::State PayloadStream::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

uint64_t PayloadStream::end() const {
  absl::MutexLock lock(&mu_);
  return end_;
}

uint64_t PayloadStream::released() const {
  absl::MutexLock lock(&mu_);
  return released_;
}

uint64_t PayloadStream::held() const {
  absl::MutexLock lock(&mu_);
  return end_ - base_;
}

uint64_t PayloadStream::peak_held() const {
  absl::MutexLock lock(&mu_);
  return peak_;
}

uint64_t PayloadStream::held_in_process() { return g_held.load(std::memory_order_relaxed); }
uint64_t PayloadStream::peak_in_process() { return g_peak.load(std::memory_order_relaxed); }
void PayloadStream::reset_peak_in_process() { g_peak.store(held_in_process()); }

}  // namespace postal::routing::internal
