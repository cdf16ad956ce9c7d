// Headers: a flat map of typed attributes carried by every envelope.
//
// A header is declared once, with its name and type, and used through that declaration:
//
//   inline constexpr wire::HeaderKey<uint64_t> kAttempt{"mbx-attempt"};
//   headers.set(kAttempt, 2);
//   std::optional<uint64_t> n = headers.get(kAttempt);
//
// Values are one of bool, int64_t, uint64_t, double, std::string. Reading a header through a key
// of another type yields nullopt (never a silent conversion). Storage is a small vector kept in
// insertion order, allocated by the first `set`: envelopes carry few headers (most none) and a
// scan beats hashing at that size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "cereal/types/string.hpp"
#include "cereal/types/utility.hpp"
#include "cereal/types/variant.hpp"
#include "cereal/types/vector.hpp"

namespace postal::wire {

using HeaderValue = std::variant<bool, int64_t, uint64_t, double, std::string>;

template <class T>
struct HeaderKey {
  static_assert(std::is_constructible_v<HeaderValue, T>, "header values are bool, int64_t, "
                                                         "uint64_t, double or std::string");
  std::string_view name;
};

class Headers {
 public:
  using Item = std::pair<std::string, HeaderValue>;

  Headers() = default;
  Headers(const Headers& o) : items_(o.items_ ? std::make_unique<Items>(*o.items_) : nullptr) {}
  Headers& operator=(const Headers& o) {
    if (this != &o) items_ = o.items_ ? std::make_unique<Items>(*o.items_) : nullptr;
    return *this;
  }
  Headers(Headers&&) noexcept = default;
  Headers& operator=(Headers&&) noexcept = default;

  template <class T>
  void set(HeaderKey<T> key, T value) {
    set_value(key.name, HeaderValue(std::in_place_type<T>, std::move(value)));
  }

  template <class T>
  std::optional<T> get(HeaderKey<T> key) const {
    const HeaderValue* v = find(key.name);
    if (v == nullptr || !std::holds_alternative<T>(*v)) return std::nullopt;
    return std::get<T>(*v);
  }

  void set_value(std::string_view name, HeaderValue value) {
    if (!items_) items_ = std::make_unique<Items>();
    for (auto& [k, v] : *items_) {
      if (k == name) {
        v = std::move(value);
        return;
      }
    }
    items_->emplace_back(std::string(name), std::move(value));
  }

  const HeaderValue* find(std::string_view name) const {
    for (const auto& [k, v] : *this) {
      if (k == name) return &v;
    }
    return nullptr;
  }

  bool contains(std::string_view name) const { return find(name) != nullptr; }

  // Removes `name`; returns whether it was present.
  bool erase(std::string_view name) {
    if (!items_) return false;
    for (auto it = items_->begin(); it != items_->end(); ++it) {
      if (it->first == name) {
        items_->erase(it);
        return true;
      }
    }
    return false;
  }

  // Removes every header whose name starts with `prefix`; returns how many.
  size_t erase_prefix(std::string_view prefix) {
    if (!items_) return 0;
    auto gone = std::remove_if(items_->begin(), items_->end(),
                               [&](const auto& kv) { return kv.first.starts_with(prefix); });
    const size_t n = static_cast<size_t>(items_->end() - gone);
    items_->erase(gone, items_->end());
    return n;
  }

  size_t size() const { return items_ ? items_->size() : 0; }
  bool empty() const { return size() == 0; }
  const Item* begin() const { return items_ ? items_->data() : nullptr; }
  const Item* end() const { return items_ ? items_->data() + items_->size() : nullptr; }

  bool operator==(const Headers& o) const {
    return size() == o.size() && std::equal(begin(), end(), o.begin());
  }

  // cereal: a vector of (name, value) pairs.
  template <class Archive>
  void save(Archive& ar) const {
    ar(std::vector<Item>(begin(), end()));
  }
  template <class Archive>
  void load(Archive& ar) {
    std::vector<Item> items;
    ar(items);
    items_ = items.empty() ? nullptr
                           : std::make_unique<Items>(std::make_move_iterator(items.begin()),
                                                     std::make_move_iterator(items.end()));
  }

 private:
  // Most envelopes carry no header, and most of the rest one (a request's reply port): one
  // pointer, and one allocation holding the first header.
  using Items = absl::InlinedVector<Item, 1>;
  std::unique_ptr<Items> items_;
};

}  // namespace postal::wire
