// CREDIT: docs/wire.md §10.1 (R-FLOW-2).
#include "credit_frame.h"

#include "absl/strings/str_cat.h"
#include "frames_v2.h"
#include "le_bytes.h"
#include "postal/wire/absl_compat.h"

namespace postal::routing::internal::v2 {

void append(std::string& out, const Credit& f) {
  std::vector<std::string> texts;
  texts.reserve(f.entries.size());
  size_t body = 4;
  for (const CreditEntry& e : f.entries) {
    texts.push_back(e.actor.to_string());
    body += 4 + texts.back().size();
  }
  put<uint32_t>(out, static_cast<uint32_t>(body + 1));
  put<uint8_t>(out, static_cast<uint8_t>(Kind::kCredit));
  put<uint16_t>(out, static_cast<uint16_t>(f.entries.size()));
  put<uint16_t>(out, 0);
  for (size_t i = 0; i < f.entries.size(); ++i) {
    put<uint16_t>(out, static_cast<uint16_t>(f.entries[i].state));
    put<uint16_t>(out, static_cast<uint16_t>(texts[i].size()));
    out.append(texts[i]);
  }
}

absl::StatusOr<Credit> decode_credit(std::string_view body) {
  ByteReader r(body);
  auto error = [](std::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("CREDIT: ", sv(what)));
  };
  uint16_t count = 0;
  if (!(r.get(count) && r.reserved(2))) return error("truncated, or reserved bytes set");
  if (count > kMaxCreditEntries || count > r.left() / 5) {
    return error(absl::StrCat(count, " entries do not fit the body (at most ",
                              kMaxCreditEntries, ")"));
  }
  Credit c;
  c.entries.reserve(count);
  for (uint16_t i = 0; i < count; ++i) {
    uint16_t state = 0;
    uint16_t len = 0;
    std::string_view text;
    if (!(r.get(state) && r.get(len) && r.take(len, text))) return error("a truncated entry");
    if (state > static_cast<uint16_t>(CreditState::kPaused)) {
      return error(absl::StrCat("unknown state ", state));
    }
    if (len == 0 || len > kMaxCreditActorText) {
      return error(absl::StrCat("an actor text of ", len, " bytes (1 to ",
                                kMaxCreditActorText, ")"));
    }
    absl::StatusOr<runtime::ActorId> actor = runtime::ActorId::parse(text);
    if (!actor.ok()) return error(absl::StrCat("actor: ", actor.status().message()));
    c.entries.push_back({static_cast<CreditState>(state), *std::move(actor)});
  }
  if (r.left() != 0) return error("bytes after the last entry");
  return c;
}

}  // namespace postal::routing::internal::v2
