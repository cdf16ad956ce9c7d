// mail_address.h — `MailAddress`, the URI that names a mailbox (M-ADDR-1…3).
//
// Forms (M-ADDR-1). Both spell the same mailbox:
//   scheme:user@host[/path]        e.g. mem:sales@example.com/inbox
//   scheme://user@host[/path]      e.g. mem://sales@example.com/inbox
//
// Canonical form `scheme://user@host/path`, computed once by `parse`:
//   * the scheme and the host are lowercased (both are case-insensitive); the user and the path
//     are kept as written (a mailbox's local part is case-sensitive);
//   * percent-encoding is normalized (RFC 3986 §6.2.2): hex digits uppercase, and unreserved
//     characters (`A-Z a-z 0-9 - . _ ~`) decoded — `%7euser` becomes `~user`, `%2f` becomes `%2F`;
//   * dot segments are removed from the path (RFC 3986 §5.2.4): `/a/./b/../c` becomes `/a/c`;
//   * an empty path and `/` are the same mailbox: the canonical form has no path then
//     (`mem://sales@example.com`). A trailing slash on a longer path is kept (`/inbox/` and
//     `/inbox` are two mailboxes, as RFC 3986 says).
// `parse(a.canonical())` is `a` again, and `canonical()` is what providers key mailboxes by.
//
// Identity (M-ADDR-3): `mailbox()` is `user@host`, the same across schemes; the scheme only picks
// the provider; `identity()` is `user@host/path`. `mem:a@b/x` and `post:a@b/x` are one logical
// mailbox reached two ways: `same_mailbox()` is true, `==` (canonical equality) is false.
//
// Characters. The user and host may hold unreserved characters, percent-encodings and RFC 3986
// sub-delimiters (`! $ & ' ( ) * + , ; =`); the path also `:` and `@`. Anything else (a space,
// non-ASCII, `" < > \ ^ ` { | }`) must be percent-encoded.
//
// Failure (M-ADDR-2). `parse` never throws and never crashes. Malformed input — a query (`?…`),
// a fragment (`#…`), a missing scheme or `@`, an empty user or host, a port (`host:25`), a bad
// percent-encoding, a character that must be encoded, more than 2048 bytes — returns the
// `InvalidMailboxAddress` error (mail_errors.h) quoting the input, naming what is wrong and what
// to write instead. A query or fragment is rejected rather than dropped: dropping it would
// silently merge two addresses into one mailbox.
#pragma once

#include <compare>
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace postal::mail {

class MailAddress {
 public:
  static constexpr size_t kMaxLength = 2048;

  static absl::StatusOr<MailAddress> parse(std::string_view text);

  const std::string& scheme() const { return scheme_; }  // lowercase, e.g. "mem"
  const std::string& user() const { return user_; }
  const std::string& host() const { return host_; }  // lowercase
  const std::string& path() const { return path_; }  // "" or starts with '/'

  // `user@host`: the mailbox identity across schemes (M-ADDR-3).
  std::string mailbox() const { return user_ + "@" + host_; }
  // `user@host/path`.
  std::string identity() const { return mailbox() + path_; }
  // `scheme://user@host/path`: the canonical text, what providers key mailboxes by.
  const std::string& canonical() const { return canonical_; }
  const std::string& to_string() const { return canonical_; }

  // Whether `other` names the same mailbox, whatever its scheme (M-ADDR-3).
  bool same_mailbox(const MailAddress& other) const {
    return user_ == other.user_ && host_ == other.host_ && path_ == other.path_;
  }

  // This address with `suffix` appended to the path (`/inbox` + `_dlq` = `/inbox_dlq`; an empty
  // path becomes `/_dlq`). Fails with InvalidMailboxAddress when the result does not parse, or
  // when canonicalization would rewrite the suffix (a non-canonical suffix would land in a
  // mailbox no address can name).
  absl::StatusOr<MailAddress> with_path_suffix(std::string_view suffix) const;

  friend bool operator==(const MailAddress& a, const MailAddress& b) {
    return a.canonical_ == b.canonical_;
  }
  friend std::strong_ordering operator<=>(const MailAddress& a, const MailAddress& b) {
    return a.canonical_ <=> b.canonical_;
  }
  template <class H>
  friend H AbslHashValue(H h, const MailAddress& a) {
    return H::combine(std::move(h), a.canonical_);
  }
  friend std::ostream& operator<<(std::ostream& os, const MailAddress& a) {
    return os << a.canonical_;
  }

 private:
  MailAddress(std::string scheme, std::string user, std::string host, std::string path);

  std::string scheme_, user_, host_, path_, canonical_;
};

}  // namespace postal::mail
