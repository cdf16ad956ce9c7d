// mq9_subject.cc — see mq9_subject.h.
#include "mq9_subject.h"

#include <charconv>

#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::mq9 {
namespace {

bool bad_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  return u <= ' ' || u == 0x7f;
}

// The next token of `s` from `pos` (advances past the dot).
std::string_view next_token(std::string_view s, size_t& pos) {
  size_t dot = s.find('.', pos);
  std::string_view tok = s.substr(pos, dot == std::string_view::npos ? s.npos : dot - pos);
  pos = dot == std::string_view::npos ? s.size() + 1 : dot + 1;
  return tok;
}

std::optional<Priority> priority_token(std::string_view tok) {
  if (tok == "critical") return Priority::kCritical;
  if (tok == "urgent") return Priority::kUrgent;
  return std::nullopt;
}

std::string_view last_token(std::string_view s) {
  size_t dot = s.rfind('.');
  return dot == std::string_view::npos ? s : s.substr(dot + 1);
}

std::string_view drop_last_token(std::string_view s) {
  size_t dot = s.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : s.substr(0, dot);
}

}  // namespace

bool valid_subject(std::string_view subject, bool wildcards) {
  if (subject.empty()) return false;
  size_t pos = 0;
  while (pos <= subject.size()) {
    std::string_view tok = next_token(subject, pos);
    if (tok.empty()) return false;
    for (char c : tok) {
      if (bad_byte(c)) return false;
    }
    bool is_wild = tok == "*" || tok == ">";
    // Inside a longer token NATS takes them literally; postal refuses them (no look-alikes).
    if (!is_wild && tok.find_first_of("*>") != tok.npos) return false;
    if (is_wild && !wildcards) return false;
    if (tok == ">" && pos <= subject.size()) return false;  // `>` only last
  }
  return true;
}

bool subject_matches(std::string_view pattern, std::string_view subject) {
  size_t pp = 0, sp = 0;
  while (pp <= pattern.size()) {
    std::string_view pt = next_token(pattern, pp);
    if (pt == ">") return sp <= subject.size();  // at least one more token
    if (sp > subject.size()) return false;
    std::string_view st = next_token(subject, sp);
    if (pt != "*" && pt != st) return false;
  }
  return sp > subject.size();
}

Mq9Subject parse_mq9_subject(std::string_view subject) {
  Mq9Subject out;
  if (!subject.starts_with(kSpacePrefix)) return out;
  out.verb = Mq9Verb::kUnknown;
  if (subject == kCreateSubject) {
    out.verb = Mq9Verb::kCreate;
  } else if (subject == kListSubject) {
    out.verb = Mq9Verb::kList;
  } else if (subject.starts_with(kMsgPrefix)) {
    std::string_view rest = subject.substr(kMsgPrefix.size());
    std::string_view last = last_token(rest);
    if (last == "*" || last == ">") {
      out.wildcard = true;
      rest = drop_last_token(rest);
    } else if (auto p = priority_token(last)) {
      out.priority = p;
      rest = drop_last_token(rest);
    }
    if (rest.empty() || !valid_subject(rest, /*wildcards=*/false)) return out;
    out.verb = Mq9Verb::kMsg;
    out.mailbox = rest;
  } else if (subject.starts_with(kDeletePrefix)) {
    std::string_view rest = subject.substr(kDeletePrefix.size());
    std::string_view id = last_token(rest);
    rest = drop_last_token(rest);
    auto [p, ec] = std::from_chars(id.data(), id.data() + id.size(), out.msg_id);
    if (id.empty() || ec != std::errc() || p != id.data() + id.size()) return out;
    if (rest.empty() || !valid_subject(rest, false)) return out;
    out.verb = Mq9Verb::kDelete;
    out.mailbox = rest;
  }
  return out;
}

absl::Status valid_mailbox_name(std::string_view name) {
  if (name.empty() || name.size() > 255) {
    return absl::InvalidArgumentError("mq9: a public mailbox name is 1-255 bytes");
  }
  if (!valid_subject(name, false)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mq9: mailbox name \"", sv(name),
        "\" is not a NATS subject without wildcards (dot-separated, non-empty tokens, no spaces, "
        "no * or >)"));
  }
  if (priority_token(last_token(name))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mq9: mailbox name \"", sv(name),
        "\" ends in a priority token (critical, urgent), which the MSG subject reserves"));
  }
  return absl::OkStatus();
}

std::string message_subject(std::string_view mailbox, Priority priority) {
  if (priority == Priority::kNormal) return absl::StrCat(sv(kMsgPrefix), sv(mailbox));
  return absl::StrCat(sv(kMsgPrefix), sv(mailbox), ".", sv(to_string(priority)));
}

std::string delete_subject(std::string_view mailbox, uint64_t msg_id) {
  return absl::StrCat(sv(kDeletePrefix), sv(mailbox), ".", msg_id);
}

}  // namespace postal::mail::mq9
