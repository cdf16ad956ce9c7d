// letter.h — `Letter`, one message of the mail layer, and `Body`, its immutable payload.
//
// A Letter is what a sender posts and what a consumer receives:
//   id       the sender-chosen message id. It may repeat (content hashes, a sender retrying
//            its own send); the mail layer never keys bookkeeping by it (M-ACK-2, M-ACK-5).
//            Left empty, `post` mints a random one.
//   from     optional: who sent it (free text, usually a mail address).
//   to       the canonical address it was posted to; set by `post`, whatever the sender wrote.
//   headers  user headers plus the system headers the mail layer mints (system_headers.h);
//            system headers a sender supplies are stripped at the send boundary (M-RETRY-3).
//   body     the payload.
//
// Copies are cheap and independent: copying a Letter copies its strings and headers and shares
// the Body, which is immutable. A consumer mutating its copy can never touch the queue.
//
// Body holds a registered message type (wire/type_registry.h) either as the typed value (posted
// in this process; never serialized) or as bytes (received from another process). `get<T>()`
// reads the typed value; `as<T>()` copies it out, decoding bytes when needed; `bytes()` is the
// serialized form a provider that crosses processes sends. For plain text use `Text`:
//   Letter::of(mail::Text{"hello"})   /   letter.body.text()  → "hello"
// Body is thread-safe: deliveries of one letter to several subscribers share it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "postal/wire/absl_compat.h"
#include "postal/wire/any.h"
#include "postal/wire/codec.h"
#include "postal/wire/headers.h"
#include "postal/wire/type_registry.h"

namespace postal::mail {

// A text payload.
struct Text {
  std::string value;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(value);
  }
};

}  // namespace postal::mail

POSTAL_MESSAGE(postal::mail::Text, "postal.mail.Text");

namespace postal::mail {

class Body {
 public:
  Body() = default;  // empty

  template <wire::RegisteredMessage T>
  static Body of(T value) {
    Body b;
    b.shared_ = std::make_shared<Shared>(wire::Any::make(std::move(value)));
    return b;
  }
  static Body from_bytes(uint64_t type_hash, std::string bytes) {
    Body b;
    b.shared_ = std::make_shared<Shared>(wire::Any::from_bytes(type_hash, std::move(bytes)));
    return b;
  }

  bool empty() const { return shared_ == nullptr; }
  uint64_t type_hash() const { return shared_ ? shared_->any.type_hash() : 0; }
  template <wire::RegisteredMessage T>
  bool is() const {
    return type_hash() == wire::type_hash<T>();
  }

  // The typed value when this body holds a T posted in this process; nullptr otherwise.
  template <wire::RegisteredMessage T>
  const T* get() const {
    return shared_ ? shared_->any.get<T>() : nullptr;
  }

  // A copy of the value as T, decoding bytes when needed. Another type → FailedPrecondition;
  // undecodable bytes → DataLoss; empty → FailedPrecondition.
  template <wire::RegisteredMessage T>
  absl::StatusOr<T> as() const {
    if (const T* v = get<T>()) return *v;
    if (!shared_) return absl::FailedPreconditionError("the letter has no body");
    if (!is<T>()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the body is ", wire::TypeRegistry::global().name_of(type_hash()), ", not ",
                       sv(wire::type_name<T>())));
    }
    absl::StatusOr<std::string> b = bytes();
    if (!b.ok()) return b.status();
    return wire::decode<T>(*b, wire::type_name<T>());
  }

  // The text of a `Text` body; nullopt for any other body.
  std::optional<std::string> text() const {
    absl::StatusOr<Text> t = as<Text>();
    if (!t.ok()) return std::nullopt;
    return std::move(t->value);
  }

  // The serialized size, 0 for an empty body (a byte bound's measure: fetch max_bytes).
  size_t byte_size() const {
    absl::StatusOr<std::string> b = bytes();
    return b.ok() ? b->size() : 0;
  }
  // The serialized form (computed once, then cached).
  absl::StatusOr<std::string> bytes() const {
    if (!shared_) return absl::FailedPreconditionError("the letter has no body");
    absl::MutexLock lock(&shared_->mu);
    absl::StatusOr<std::string_view> b = shared_->any.bytes();
    if (!b.ok()) return b.status();
    return std::string(*b);
  }

 private:
  struct Shared {
    explicit Shared(wire::Any a) : any(std::move(a)) {}
    absl::Mutex mu;  // guards the lazily cached bytes inside `any`
    wire::Any any;
  };
  std::shared_ptr<Shared> shared_;
};

struct Letter {
  std::string id;
  std::string from;
  std::string to;
  wire::Headers headers;
  Body body;

  template <wire::RegisteredMessage T>
  static Letter of(T value, std::string id = {}) {
    Letter l;
    l.id = std::move(id);
    l.body = Body::of(std::move(value));
    return l;
  }
  static Letter text(std::string_view text, std::string id = {}) {
    return of(Text{std::string(text)}, std::move(id));
  }
};

}  // namespace postal::mail
