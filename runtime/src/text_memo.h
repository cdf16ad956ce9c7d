// TextMemo: a thread's few most recent text ⇄ value conversions (runtime internal).
//
// cereal stores uids and locations as text (uid.h, location.h), and a stream of messages names
// the same few of them again and again (a reply-to port, the sender's proc): parsing the text
// interns labels under a lock and allocates, rendering it allocates. A memo of the last N
// conversions per thread answers those repeats. It changes no result: parsing and rendering are
// pure functions of their input.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace postal::runtime::internal {

template <class Key, class Value, size_t N = 4>
class Memo {
 public:
  template <class K>
  const Value* find(const K& key) const {
    for (const Entry& e : entries_) {
      if (e.used && e.key == key) return &e.value;
    }
    return nullptr;
  }
  // Returns the stored copy (valid until this memo's N-th next put).
  template <class K>
  const Value& put(const K& key, const Value& value) {
    Entry& e = entries_[next_];
    next_ = (next_ + 1) % N;
    e.key = Key(key);
    e.value = value;
    e.used = true;
    return e.value;
  }

 private:
  struct Entry {
    Key key{};
    Value value{};
    bool used = false;
  };
  std::array<Entry, N> entries_{};
  size_t next_ = 0;
};

}  // namespace postal::runtime::internal
