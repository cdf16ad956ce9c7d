#include "savina_runner.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "postal/runtime/logger.h"

namespace postal::savina {
namespace {

const runtime::Logger& log() { return runtime::Logger::get("postal.savina"); }

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

absl::StatusOr<RunSummary> run_workload(const Workload& workload, const RunOptions& options,
                                        int runs) {
  RunSummary summary;
  for (int i = 1; i <= runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::string> check = workload.run(options);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!check.ok()) {
      return absl::Status(check.status().code(), absl::StrCat(std::string(workload.name), " run ",
                                                              i, ": ", check.status().message()));
    }
    summary.millis.push_back(ms);
    summary.check = *std::move(check);
    log().info(absl::StrFormat("%s run %d/%d: %.1f ms (%s)", std::string(workload.name), i, runs,
                               ms, summary.check));
  }
  summary.median_millis = median(summary.millis);
  log().info(absl::StrFormat(
      "%s median of %d: %.1f ms (threads %d; runs %s ms; vs CAF %s)", std::string(workload.name),
      runs, summary.median_millis, options.threads,
      absl::StrJoin(summary.millis, " ",
                    [](std::string* out, double ms) { absl::StrAppendFormat(out, "%.1f", ms); }),
      std::string(workload.caf)));
  return summary;
}

}  // namespace postal::savina
