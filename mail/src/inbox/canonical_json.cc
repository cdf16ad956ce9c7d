// The strict parser and canonical writer of canonical_json.h (M-INBOX-2). A recursive descent
// over the text that returns each value's canonical bytes; objects collect their members, check
// duplicates on the decoded keys and sort them by UTF-16 code units before joining.
#include "postal/mail/canonical_json.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "postal/mail/inbox_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

// Decimal exponent bounds of a finite, non-zero double in scientific notation (M-INBOX-2).
constexpr int64_t kMaxExponent = 308;
constexpr int64_t kMinExponent = -324;
// An exponent literal beyond this is out of range whatever its mantissa (no int64 overflow).
constexpr int64_t kExponentLiteralCap = 1'000'000'000;

struct Member {
  std::u16string order;  // the key in UTF-16 code units: the sort key (RFC 8785 §3.2.3)
  std::string key;       // the decoded key, UTF-8: the duplicate check
  std::string text;      // `"key":value`, canonical
};

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

void append_utf16(std::u16string& out, uint32_t cp) {
  if (cp < 0x10000) {
    out.push_back(static_cast<char16_t>(cp));
  } else {
    cp -= 0x10000;
    out.push_back(static_cast<char16_t>(0xD800 + (cp >> 10)));
    out.push_back(static_cast<char16_t>(0xDC00 + (cp & 0x3FF)));
  }
}

// RFC 8785 §3.2.2.2 string escaping of decoded UTF-8.
void write_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out.push_back(kHex[u >> 4]);
          out.push_back(kHex[u & 15]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

class Parser {
 public:
  Parser(std::string_view text, const JsonLimits& limits) : text_(text), limits_(limits) {}

  absl::StatusOr<std::string> document() {
    skip_ws();
    absl::StatusOr<std::string> v = value(0);
    if (!v.ok()) return v;
    skip_ws();
    if (pos_ != text_.size()) return fail("unexpected data after the JSON value");
    return v;
  }

 private:
  absl::Status fail(std::string_view problem) const {
    return InvalidPayloadError(absl::StrCat(
        sv(problem), " at byte ", pos_,
        "; the payload must be strict JSON (RFC 8259) with finite numbers, unique object keys "
        "and no lone surrogates, nothing was stored"));
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }
  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::StatusOr<std::string> value(int depth) {
    if (at_end()) return fail("a value is missing");
    const char c = peek();
    if (c == '{' || c == '[') {
      if (depth >= limits_.max_depth) {
        return fail(absl::StrCat("nesting deeper than ", limits_.max_depth, " levels"));
      }
      return c == '{' ? object(depth + 1) : array(depth + 1);
    }
    if (c == '"') {
      std::string decoded;
      if (absl::Status s = string(decoded, nullptr); !s.ok()) return s;
      std::string out;
      write_string(out, decoded);
      return out;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    if (literal("true")) return std::string("true");
    if (literal("false")) return std::string("false");
    if (literal("null")) return std::string("null");
    if (literal("NaN") || literal("Infinity") || literal("-Infinity")) {
      return fail("a non-finite number (NaN or Infinity)");
    }
    return fail("an invalid value");
  }

  absl::StatusOr<std::string> array(int depth) {
    ++pos_;  // '['
    std::string out = "[";
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return out + "]";
    }
    while (true) {
      skip_ws();
      absl::StatusOr<std::string> v = value(depth);
      if (!v.ok()) return v;
      out += *v;
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        out.push_back(',');
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return out + "]";
      }
      return fail("expected ',' or ']' in an array");
    }
  }

  absl::StatusOr<std::string> object(int depth) {
    ++pos_;  // '{'
    std::vector<Member> members;
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return std::string("{}");
    }
    while (true) {
      skip_ws();
      if (peek() != '"') return fail("expected a string key in an object");
      Member m;
      const size_t key_at = pos_;
      if (absl::Status s = string(m.key, &m.order); !s.ok()) return s;
      skip_ws();
      if (peek() != ':') return fail("expected ':' after an object key");
      ++pos_;
      skip_ws();
      absl::StatusOr<std::string> v = value(depth);
      if (!v.ok()) return v;
      write_string(m.text, m.key);
      m.text.push_back(':');
      m.text += *v;
      for (const Member& other : members) {
        if (other.key == m.key) {
          pos_ = key_at;
          return fail("a duplicate object key");
        }
      }
      members.push_back(std::move(m));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        break;
      }
      return fail("expected ',' or '}' in an object");
    }
    std::sort(members.begin(), members.end(),
              [](const Member& a, const Member& b) { return a.order < b.order; });
    std::string out = "{";
    for (size_t i = 0; i < members.size(); ++i) {
      if (i > 0) out.push_back(',');
      out += members[i].text;
    }
    return out + "}";
  }

  absl::StatusOr<uint32_t> hex4() {
    if (text_.size() - pos_ < 4) return fail("a truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        return fail("an invalid \\u escape");
    }
    return v;
  }

  // One UTF-8 sequence starting at pos_, validated strictly (no overlongs, no surrogates,
  // nothing past U+10FFFF).
  absl::StatusOr<uint32_t> utf8() {
    const auto b0 = static_cast<unsigned char>(text_[pos_]);
    int n = 0;
    uint32_t cp = 0, min = 0;
    if (b0 < 0x80) return ++pos_, b0;
    if ((b0 & 0xE0) == 0xC0)
      n = 1, cp = b0 & 0x1F, min = 0x80;
    else if ((b0 & 0xF0) == 0xE0)
      n = 2, cp = b0 & 0x0F, min = 0x800;
    else if ((b0 & 0xF8) == 0xF0)
      n = 3, cp = b0 & 0x07, min = 0x10000;
    else
      return fail("invalid UTF-8");
    if (text_.size() - pos_ <= static_cast<size_t>(n)) return fail("truncated UTF-8");
    for (int i = 1; i <= n; ++i) {
      const auto b = static_cast<unsigned char>(text_[pos_ + i]);
      if ((b & 0xC0) != 0x80) return fail("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return fail("invalid UTF-8 (overlong, surrogate or out of range)");
    }
    pos_ += n + 1;
    return cp;
  }

  // A string at pos_ (at its '"'), decoded into `out` (UTF-8) and, when asked, `utf16`.
  absl::Status string(std::string& out, std::u16string* utf16) {
    ++pos_;  // '"'
    while (true) {
      if (at_end()) return fail("an unterminated string");
      const char c = peek();
      uint32_t cp = 0;
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (static_cast<unsigned char>(c) < 0x20) return fail("a raw control character in a string");
      if (c == '\\') {
        ++pos_;
        if (at_end()) return fail("an unterminated escape");
        const char e = text_[pos_++];
        switch (e) {
          case '"':
            cp = '"';
            break;
          case '\\':
            cp = '\\';
            break;
          case '/':
            cp = '/';
            break;
          case 'b':
            cp = '\b';
            break;
          case 'f':
            cp = '\f';
            break;
          case 'n':
            cp = '\n';
            break;
          case 'r':
            cp = '\r';
            break;
          case 't':
            cp = '\t';
            break;
          case 'u': {
            absl::StatusOr<uint32_t> u = hex4();
            if (!u.ok()) return u.status();
            cp = *u;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("a lone low surrogate");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (text_.substr(pos_, 2) != "\\u") return fail("a lone high surrogate");
              pos_ += 2;
              absl::StatusOr<uint32_t> low = hex4();
              if (!low.ok()) return low.status();
              if (*low < 0xDC00 || *low > 0xDFFF) return fail("a lone high surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (*low - 0xDC00);
            }
            break;
          }
          default:
            --pos_;
            return fail("an invalid escape");
        }
      } else {
        absl::StatusOr<uint32_t> u = utf8();
        if (!u.ok()) return u.status();
        cp = *u;
      }
      append_utf8(out, cp);
      if (utf16 != nullptr) append_utf16(*utf16, cp);
    }
  }

  size_t digits(std::string* into) {
    const size_t start = pos_;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      if (into != nullptr) into->push_back(peek());
      ++pos_;
    }
    return pos_ - start;
  }

  // An exact decimal: sign, significant digits, exponent — written in one form (see the header).
  absl::StatusOr<std::string> number() {
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (literal("Infinity")) return fail("a non-finite number (-Infinity)");
    std::string mantissa;
    if (peek() == '0') {
      mantissa.push_back('0');
      ++pos_;
      if (peek() >= '0' && peek() <= '9') return fail("a number with a leading zero");
    } else if (digits(&mantissa) == 0) {
      return fail("a '-' without digits");
    }
    int64_t exponent = 0;
    if (peek() == '.') {
      ++pos_;
      const size_t n = digits(&mantissa);
      if (n == 0) return fail("a '.' without digits");
      exponent -= static_cast<int64_t>(n);
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      bool minus = false;
      if (peek() == '+' || peek() == '-') minus = text_[pos_++] == '-';
      int64_t e = 0;
      size_t n = 0;
      while (!at_end() && peek() >= '0' && peek() <= '9') {
        e = std::min(kExponentLiteralCap, e * 10 + (peek() - '0'));
        ++pos_;
        ++n;
      }
      if (n == 0) return fail("an exponent without digits");
      exponent += minus ? -e : e;
    }
    // Significant digits: no leading zeros; trailing zeros move into the exponent.
    const size_t first = mantissa.find_first_not_of('0');
    if (first == std::string::npos) return std::string("0");  // 0, -0, 0.0e5: one zero
    mantissa.erase(0, first);
    const size_t last = mantissa.find_last_not_of('0');
    exponent += static_cast<int64_t>(mantissa.size() - 1 - last);
    mantissa.erase(last + 1);
    const int64_t k = static_cast<int64_t>(mantissa.size());
    const int64_t n = k + exponent;  // the decimal point sits after n digits
    if (n - 1 > kMaxExponent || n - 1 < kMinExponent) {
      return fail("a number outside the range of a finite double");
    }
    std::string out = negative ? "-" : "";
    if (exponent >= 0 && n <= 21) {
      out += mantissa;
      out.append(static_cast<size_t>(exponent), '0');
    } else if (n > 0 && n <= 21) {
      out += mantissa.substr(0, n);
      out.push_back('.');
      out += mantissa.substr(n);
    } else if (n <= 0 && n > -6) {
      out += "0.";
      out.append(static_cast<size_t>(-n), '0');
      out += mantissa;
    } else {
      out.push_back(mantissa[0]);
      if (k > 1) absl::StrAppend(&out, ".", mantissa.substr(1));
      absl::StrAppend(&out, "e", n - 1 >= 0 ? "+" : "-", n - 1 >= 0 ? n - 1 : 1 - n);
    }
    return out;
  }

  std::string_view text_;
  const JsonLimits& limits_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::string> canonical_json(std::string_view json, const JsonLimits& limits) {
  if (json.size() > limits.max_bytes) {
    return InvalidPayloadError(absl::StrCat("the payload has ", json.size(),
                                            " bytes, more than the limit of ", limits.max_bytes,
                                            "; it was not truncated, nothing was stored"));
  }
  return Parser(json, limits).document();
}

}  // namespace postal::mail
