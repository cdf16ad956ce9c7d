#include "postal/mail/mail_address.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

constexpr std::string_view kForms =
    "write scheme:user@host[/path] or scheme://user@host[/path], e.g. "
    "mem:sales@example.com/inbox";

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}
char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// RFC 3986 §2.3.
bool is_unreserved(char c) {
  return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}
// RFC 3986 §2.2.
bool is_sub_delim(char c) {
  return std::string_view("!$&'()*+,;=").find(c) != std::string_view::npos;
}

enum class Part { kUser, kHost, kPath };

std::string_view part_name(Part part) {
  switch (part) {
    case Part::kUser:
      return "user";
    case Part::kHost:
      return "host";
    case Part::kPath:
      return "path";
  }
  return "?";
}

bool allowed(Part part, char c) {
  if (is_unreserved(c) || is_sub_delim(c)) return true;
  return part == Part::kPath && (c == ':' || c == '@' || c == '/');
}

std::string describe(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u >= 0x7f) return absl::StrFormat("byte 0x%02X", u);
  if (c == ' ') return "a space";
  return absl::StrCat("'", std::string(1, c), "'");
}

// Normalizes one component's percent-encoding (RFC 3986 §6.2.2.1-2); lowercases when asked.
absl::StatusOr<std::string> normalize(std::string_view input, std::string_view s, Part part,
                                      bool lowercase) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) {
        return InvalidMailboxAddressError(
            input,
            absl::StrCat("truncated percent-encoding at the end of the ", sv(part_name(part))),
            "a '%' must be followed by two hex digits; write a literal '%' as %25");
      }
      if (!is_hex(s[i + 1]) || !is_hex(s[i + 2])) {
        return InvalidMailboxAddressError(
            input,
            absl::StrCat("bad percent-encoding '", sv(s.substr(i, 3)), "' in the ",
                         sv(part_name(part))),
            "a '%' must be followed by two hex digits; write a literal '%' as %25");
      }
      char decoded = static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      if (is_unreserved(decoded)) {
        out.push_back(lowercase ? lower(decoded) : decoded);
      } else {
        absl::StrAppendFormat(&out, "%%%02X", static_cast<unsigned char>(decoded));
      }
      i += 2;
      continue;
    }
    if (!allowed(part, c)) {
      std::string fix = absl::StrFormat("percent-encode it (%s is %%%02X)", describe(c),
                                        static_cast<unsigned char>(c));
      if (part == Part::kHost && c == ':') {
        fix = "a port is not part of a mailbox address; write user@host without ':port'";
      } else if (part == Part::kUser && c == ':') {
        fix = "credentials are not part of a mailbox address; percent-encode a literal ':' as %3A";
      } else if (part == Part::kHost && (c == '[' || c == ']')) {
        fix = "IP literals are not supported; use a host name";
      }
      return InvalidMailboxAddressError(
          input, absl::StrCat(describe(c), " is not allowed in the ", sv(part_name(part))), fix);
    }
    out.push_back(lowercase ? lower(c) : c);
  }
  return out;
}

// RFC 3986 §5.2.4, for an absolute path (starts with '/').
std::string remove_dot_segments(std::string_view in) {
  std::vector<std::string_view> segments;
  size_t pos = 1;  // skip the leading '/'
  bool trailing_slash = false;
  while (true) {
    size_t slash = in.find('/', pos);
    std::string_view seg = in.substr(pos, slash == std::string_view::npos ? in.npos : slash - pos);
    bool last = slash == std::string_view::npos;
    if (seg == ".") {
      trailing_slash = last;
    } else if (seg == "..") {
      if (!segments.empty()) segments.pop_back();
      trailing_slash = last;
    } else {
      segments.push_back(seg);
      trailing_slash = false;
    }
    if (last) break;
    pos = slash + 1;
  }
  std::string out;
  for (std::string_view seg : segments) absl::StrAppend(&out, "/", sv(seg));
  if (trailing_slash || out.empty()) out.push_back('/');
  return out;
}

}  // namespace

MailAddress::MailAddress(std::string scheme, std::string user, std::string host, std::string path)
    : scheme_(std::move(scheme)),
      user_(std::move(user)),
      host_(std::move(host)),
      path_(std::move(path)) {
  canonical_ = absl::StrCat(scheme_, "://", user_, "@", host_, path_);
}

absl::StatusOr<MailAddress> MailAddress::parse(std::string_view text) {
  if (text.empty()) return InvalidMailboxAddressError(text, "the address is empty", kForms);
  if (text.size() > kMaxLength) {
    return InvalidMailboxAddressError(text.substr(0, 64),
                                      absl::StrCat("the address is ", text.size(), " bytes long"),
                                      absl::StrCat("keep it within ", kMaxLength, " bytes"));
  }
  // M-ADDR-2: a query or fragment would silently merge two mailboxes; reject it.
  if (size_t q = text.find_first_of("?#"); q != std::string_view::npos) {
    bool query = text[q] == '?';
    return InvalidMailboxAddressError(
        text,
        absl::StrCat("the address has a ", query ? "query ('?" : "fragment ('#",
                     sv(text.substr(q + 1, 24)), "')"),
        "queries and fragments are not part of a mailbox address; put what distinguishes the "
        "mailbox in the path, e.g. mem:sales@example.com/inbox/thread-1");
  }
  size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidMailboxAddressError(text, "the scheme is missing", kForms);
  }
  std::string_view scheme = text.substr(0, colon);
  if (!is_alpha(scheme[0])) {
    return InvalidMailboxAddressError(
        text, absl::StrCat("the scheme '", sv(scheme), "' does not start with a letter"), kForms);
  }
  for (char c : scheme) {
    if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.') {
      return InvalidMailboxAddressError(
          text, absl::StrCat(describe(c), " is not allowed in the scheme"),
          "a scheme is a letter followed by letters, digits, '+', '-' or '.'");
    }
  }
  std::string_view rest = text.substr(colon + 1);
  if (rest.starts_with("//")) rest.remove_prefix(2);
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  size_t at = authority.find('@');
  if (at == std::string_view::npos) {
    return InvalidMailboxAddressError(text, "the '@' between user and host is missing", kForms);
  }
  std::string_view user = authority.substr(0, at);
  std::string_view host = authority.substr(at + 1);
  if (host.find('@') != std::string_view::npos) {
    return InvalidMailboxAddressError(text, "there is more than one '@' before the path",
                                      "percent-encode an '@' inside the user as %40");
  }
  if (user.empty()) return InvalidMailboxAddressError(text, "the user is empty", kForms);
  if (host.empty()) return InvalidMailboxAddressError(text, "the host is empty", kForms);

  std::string lower_scheme(scheme);
  for (char& c : lower_scheme) c = lower(c);
  absl::StatusOr<std::string> u = normalize(text, user, Part::kUser, false);
  if (!u.ok()) return u.status();
  absl::StatusOr<std::string> h = normalize(text, host, Part::kHost, true);
  if (!h.ok()) return h.status();
  std::string p;
  if (!path.empty()) {
    absl::StatusOr<std::string> normalized = normalize(text, path, Part::kPath, false);
    if (!normalized.ok()) return normalized.status();
    p = remove_dot_segments(*normalized);
    if (p == "/") p.clear();  // the empty path and "/" name the same mailbox
  }
  MailAddress address(std::move(lower_scheme), *std::move(u), *std::move(h), std::move(p));
  // The cap holds for the canonical form too, which can be longer than the text (the opaque
  // form gains "//"): every address this returns parses back from its canonical form.
  if (address.canonical().size() > kMaxLength) {
    return InvalidMailboxAddressError(
        text.substr(0, 64),
        absl::StrCat("its canonical form (scheme://user@host/path) is ", address.canonical().size(),
                     " bytes long"),
        absl::StrCat("keep the canonical form within ", kMaxLength, " bytes"));
  }
  return address;
}

absl::StatusOr<MailAddress> MailAddress::with_path_suffix(std::string_view suffix) const {
  if (suffix.empty()) {
    return InvalidMailboxAddressError(canonical_, "the path suffix is empty",
                                      "use a non-empty suffix such as _dlq");
  }
  if (suffix.find_first_not_of('.') == std::string_view::npos) {
    return InvalidMailboxAddressError(
        canonical_, absl::StrCat("the path suffix '", sv(suffix), "' is made of dots only"),
        "a suffix of dots can form a '.' or '..' segment; use e.g. _dlq");
  }
  if (suffix.find('/') != std::string_view::npos) {
    return InvalidMailboxAddressError(
        canonical_, absl::StrCat("the path suffix '", sv(suffix), "' contains '/'"),
        "a suffix extends the last path segment; use e.g. _dlq");
  }
  std::string text = absl::StrCat(canonical_, path_.empty() ? "/" : "", sv(suffix));
  absl::StatusOr<MailAddress> parsed = parse(text);
  if (!parsed.ok()) return parsed.status();
  if (parsed->canonical() != text) {
    return InvalidMailboxAddressError(
        text,
        absl::StrCat("the path suffix '", sv(suffix), "' is not in canonical form (it becomes '",
                     parsed->canonical(), "')"),
        "write the suffix in canonical form: plain ASCII, unreserved characters unencoded, "
        "others percent-encoded with uppercase hex (e.g. _%E6%AD%BB%E4%BF%A1)");
  }
  return parsed;
}

}  // namespace postal::mail
