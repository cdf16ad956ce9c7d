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
// insertion order: envelopes carry few headers and a scan beats hashing at that size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

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
    for (auto& [k, v] : items_) {
      if (k == name) {
        v = std::move(value);
        return;
      }
    }
    items_.emplace_back(std::string(name), std::move(value));
  }

  const HeaderValue* find(std::string_view name) const {
    for (const auto& [k, v] : items_) {
      if (k == name) return &v;
    }
    return nullptr;
  }

  bool contains(std::string_view name) const { return find(name) != nullptr; }

  // Removes `name`; returns whether it was present.
  bool erase(std::string_view name) {
    for (auto it = items_.begin(); it != items_.end(); ++it) {
      if (it->first == name) {
        items_.erase(it);
        return true;
      }
    }
    return false;
  }

  // Removes every header whose name starts with `prefix`; returns how many.
  size_t erase_prefix(std::string_view prefix) {
    return std::erase_if(items_, [&](const auto& kv) { return kv.first.starts_with(prefix); });
  }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  bool operator==(const Headers&) const = default;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(items_);
  }

 private:
  std::vector<std::pair<std::string, HeaderValue>> items_;
};

}  // namespace postal::wire
