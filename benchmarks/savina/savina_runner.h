// The runner: one workload, `runs` iterations, each timed on its own (wall clock, from building
// the proc to destroying it, as the CAF port's runner times `run_iteration`), each checked.
// Every run and the summary are logged on the `postal.savina` logger.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "workload.h"

namespace postal::savina {

struct RunSummary {
  std::vector<double> millis;  // per run, in order
  double median_millis = 0;
  std::string check;  // what the last run checked
};

// The first failed run's error ("fib run 2: …"), or every run's time.
absl::StatusOr<RunSummary> run_workload(const Workload& workload, const RunOptions& options,
                                        int runs);

// The median (the mean of the two middle values for an even count); 0 for none.
double median(std::vector<double> values);

}  // namespace postal::savina
