// `postal inbox status FILE [--json]` and `postal inbox retry FILE [--consumer C]`: the
// operator's view of an inbox file (M-INBOX-1…3) — counts by consumer and status, the age of the
// oldest record not yet done — and the recovery of DEAD records with a fresh attempt budget.
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "postal/mail/inbox.h"
#include "postal/mail/system_headers.h"

namespace postal::tools {
namespace {

constexpr mail::InboxStatus kStatuses[] = {
    mail::InboxStatus::kPending, mail::InboxStatus::kProcessing, mail::InboxStatus::kCompleted,
    mail::InboxStatus::kRetryable, mail::InboxStatus::kDead};

int fail(const std::string& what) {
  std::fprintf(stderr, "postal inbox: %s\n", what.c_str());
  return 1;
}

int64_t count_of(const std::map<mail::InboxStatus, int64_t>& counts, mail::InboxStatus s) {
  auto it = counts.find(s);
  return it == counts.end() ? 0 : it->second;
}

int print_status(const std::string& file, const mail::InboxStatusReport& report, bool json) {
  const absl::Time now = absl::Now();
  if (json) {
    nlohmann::json out;
    out["file"] = file;
    out["consumers"] = nlohmann::json::object();
    for (const auto& [consumer, counts] : report.counts) {
      nlohmann::json& c = out["consumers"][consumer];
      for (mail::InboxStatus s : kStatuses)
        c[std::string(mail::to_string(s))] = count_of(counts, s);
    }
    if (report.oldest_pending) {
      out["oldest_pending_at"] = mail::format_iso8601(*report.oldest_pending);
      out["oldest_pending_age_ms"] = absl::ToInt64Milliseconds(now - *report.oldest_pending);
    } else {
      out["oldest_pending_at"] = nullptr;
      out["oldest_pending_age_ms"] = nullptr;
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("inbox %s\n", file.c_str());
  std::printf("%-32s %10s %10s %10s %10s %10s\n", "consumer", "PENDING", "PROCESSING", "COMPLETED",
              "RETRYABLE", "DEAD");
  for (const auto& [consumer, counts] : report.counts) {
    std::printf("%-32s", consumer.c_str());
    for (mail::InboxStatus s : kStatuses) {
      std::printf(" %10lld", static_cast<long long>(count_of(counts, s)));
    }
    std::printf("\n");
  }
  if (report.oldest_pending) {
    std::printf("oldest pending: %llds old (accepted %s)\n",
                static_cast<long long>(absl::ToInt64Seconds(now - *report.oldest_pending)),
                mail::format_iso8601(*report.oldest_pending).c_str());
  } else {
    std::printf("oldest pending: none\n");
  }
  return 0;
}

}  // namespace

int inbox_command(const InboxCommand& c) {
  if (c.verb != "status" && c.verb != "retry") {
    std::fprintf(stderr, "postal inbox: unknown verb '%s'; use status or retry\n", c.verb.c_str());
    return 2;
  }
  std::error_code ec;
  if (!std::filesystem::exists(c.file, ec)) {
    return fail(absl::StrCat("no inbox at '", c.file, "'; give the path of an inbox file"));
  }
  absl::StatusOr<std::unique_ptr<mail::Inbox>> inbox = mail::Inbox::open(c.file);
  if (!inbox.ok()) return fail(std::string(inbox.status().message()));
  if (c.verb == "retry") {
    absl::StatusOr<int64_t> moved = (*inbox)->retry_dead(c.consumer);
    if (!moved.ok()) return fail(std::string(moved.status().message()));
    std::printf("moved %lld DEAD record%s back to PENDING with a fresh attempt budget\n",
                static_cast<long long>(*moved), *moved == 1 ? "" : "s");
    return 0;
  }
  absl::StatusOr<mail::InboxStatusReport> report = (*inbox)->status();
  if (!report.ok()) return fail(std::string(report.status().message()));
  return print_status(c.file, *report, c.json);
}

}  // namespace postal::tools
