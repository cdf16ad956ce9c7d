// savina_bench: the Savina suite on postal (benchmarks/savina/workload.h; docs/benchmarks.md,
// "Savina suite").
//
//   savina_bench --workload pingpong --threads 2 --runs 5
//   savina_bench --workload all --runs 1 --small     every workload once, the test's parameters
//   savina_bench --list
//
// Each run's time and the median are logged on `postal.savina` (stderr). Exit status 1 when a
// run fails or its check does, 2 on a bad command line.
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "postal/runtime/logger.h"
#include "savina_runner.h"
#include "workload.h"

namespace {

using postal::savina::RunOptions;
using postal::savina::Workload;

const postal::runtime::Logger& log() { return postal::runtime::Logger::get("postal.savina"); }

int usage(std::string_view why) {
  std::string names;
  for (const Workload& w : postal::savina::workloads())
    absl::StrAppend(&names, " ", std::string(w.name));
  log().error(absl::StrCat(std::string(why),
                           "; usage: savina_bench --workload NAME|all [--threads N] ",
                           "[--runs N] [--small] | --list; workloads:", names));
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string name;
  RunOptions options;
  int runs = 5;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--workload" && has_value) {
      name = argv[++i];
    } else if (arg == "--threads" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &options.threads) || options.threads < 1) {
        return usage("--threads takes a positive number");
      }
    } else if (arg == "--runs" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &runs) || runs < 1) {
        return usage("--runs takes a positive number");
      }
    } else if (arg == "--small") {
      options.size = postal::savina::Size::kSmall;
    } else if (arg == "--list") {
      list = true;
    } else {
      return usage(absl::StrCat("unknown argument ", std::string(arg)));
    }
  }
  if (list) {
    for (const Workload& w : postal::savina::workloads()) {
      log().info(absl::StrCat(std::string(w.name), " (CAF: ", std::string(w.caf),
                              w.variant.empty() ? "" : "; ", std::string(w.variant), ")"));
    }
    return 0;
  }
  if (name.empty()) return usage("no --workload");
  std::vector<const Workload*> chosen;
  if (name == "all") {
    for (const Workload& w : postal::savina::workloads()) chosen.push_back(&w);
  } else if (const Workload* w = postal::savina::find_workload(name)) {
    chosen.push_back(w);
  } else {
    return usage(absl::StrCat("no workload named ", name));
  }
  for (const Workload* w : chosen) {
    absl::StatusOr<postal::savina::RunSummary> summary =
        postal::savina::run_workload(*w, options, runs);
    if (!summary.ok()) {
      log().error(summary.status().ToString());
      return 1;
    }
  }
  return 0;
}
