// LatencyHistogram: a log-linear histogram of nanosecond durations, mergeable and serializable.
//
// Values below 2^kSubBits are counted exactly; above, each power of two is split into
// 2^kSubBits equal buckets, so a percentile is reported within 1/2^kSubBits (about 3 %) of the
// true value, whatever the range (1 ns to hours). Recording is a few arithmetic operations and
// an increment; the bucket array is allocated on first use.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "cereal/cereal.hpp"
#include "cereal/types/utility.hpp"
#include "cereal/types/vector.hpp"

namespace postal::routing {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 5;
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kBuckets = (64 - kSubBits + 1) * kSub;

  void record(int64_t ns) {
    if (counts_.empty()) counts_.assign(kBuckets, 0);
    uint64_t v = ns < 0 ? 0 : static_cast<uint64_t>(ns);
    ++counts_[bucket(v)];
    ++total_;
    max_ = std::max(max_, v);
    min_ = total_ == 1 ? v : std::min(min_, v);
  }

  void merge(const LatencyHistogram& other) {
    if (other.total_ == 0) return;
    if (counts_.empty()) counts_.assign(kBuckets, 0);
    for (size_t i = 0; i < other.counts_.size(); ++i) counts_[i] += other.counts_[i];
    min_ = total_ == 0 ? other.min_ : std::min(min_, other.min_);
    total_ += other.total_;
    max_ = std::max(max_, other.max_);
  }

  void clear() { *this = LatencyHistogram(); }

  uint64_t count() const { return total_; }
  uint64_t max() const { return max_; }
  uint64_t min() const { return min_; }

  // The value at quantile q in [0, 1]: the upper bound of the bucket holding it (never above max).
  uint64_t percentile(double q) const {
    if (total_ == 0) return 0;
    uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(total_ - 1)) + 1;
    uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::min(upper(i), max_);
    }
    return max_;
  }

  // Sparse on the wire: only the buckets that counted something.
  template <class Archive>
  void save(Archive& ar) const {
    std::vector<std::pair<uint32_t, uint64_t>> used;
    for (size_t i = 0; i < counts_.size(); ++i) {
      if (counts_[i] != 0) used.emplace_back(static_cast<uint32_t>(i), counts_[i]);
    }
    ar(used, total_, max_, min_);
  }
  template <class Archive>
  void load(Archive& ar) {
    std::vector<std::pair<uint32_t, uint64_t>> used;
    ar(used, total_, max_, min_);
    counts_.assign(kBuckets, 0);
    uint64_t sum = 0;
    for (const auto& [i, n] : used) {
      if (i >= static_cast<uint32_t>(kBuckets)) throw cereal::Exception("histogram bucket out of range");
      counts_[i] += n;
      sum += n;
    }
    if (sum != total_) throw cereal::Exception("histogram counts do not add up to its total");
  }

 private:
  static int bucket(uint64_t v) {
    if (v < kSub) return static_cast<int>(v);
    int exp = 63 - std::countl_zero(v);  // v in [2^exp, 2^(exp+1))
    int shift = exp - kSubBits;
    return (shift + 1) * kSub + static_cast<int>((v >> shift) & (kSub - 1));
  }
  static uint64_t upper(int b) {
    if (b < kSub) return static_cast<uint64_t>(b);
    int shift = b / kSub - 1;
    uint64_t base = (uint64_t{1} << (shift + kSubBits)) + (static_cast<uint64_t>(b % kSub) << shift);
    return base + (uint64_t{1} << shift) - 1;
  }

  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = 0;
};

}  // namespace postal::routing
