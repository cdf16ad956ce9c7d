#include "postal/mail/mail_status.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "postal/mail/system_headers.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string json_value(const StatusValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return absl::StrCat(*i);
  if (const double* d = std::get_if<double>(&v)) return absl::StrCat(*d);
  return json_string(std::get<std::string>(v));
}

}  // namespace

std::optional<std::string> MailboxStatus::last_activity_iso() const {
  if (!last_activity_time.has_value()) return std::nullopt;
  return format_iso8601(*last_activity_time);
}

std::optional<int64_t> MailboxStatus::extension_int(std::string_view key) const {
  auto it = extensions.find(std::string(key));
  if (it == extensions.end()) return std::nullopt;
  if (const int64_t* i = std::get_if<int64_t>(&it->second)) return *i;
  return std::nullopt;
}

std::string MailboxStatus::to_json() const {
  std::optional<std::string> iso = last_activity_iso();
  std::string out = absl::StrCat(
      "{\"address\":", json_string(address), ",\"state\":", json_string(to_string(state)),
      ",\"exists\":", exists.has_value() ? (*exists ? "true" : "false") : "null",
      ",\"unreadCount\":", unread_count, ",\"inFlightCount\":", in_flight_count,
      ",\"lastActivityTime\":", iso.has_value() ? json_string(*iso) : "null");
  for (const auto& [key, value] : extensions) {
    absl::StrAppend(&out, ",", json_string(key), ":", json_value(value));
  }
  out.push_back('}');
  return out;
}

}  // namespace postal::mail
