// A Proc with one Client attached: the fixture of runtime and actor tests that send from outside
// an actor and watch what comes back.
//
// `ProcWithClient` is the plain pair (any ProcOptions, any client name). `ProcClientTest` is the
// GoogleTest fixture most runtime tests derive from: a deterministic proc, the client "alice",
// and helpers for envelopes that came back to it.
#pragma once

#include <memory>
#include <string_view>
#include <utility>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/runtime/client.h"
#include "postal/runtime/proc.h"
#include "support/must.h"

namespace postal::test_support {

struct ProcWithClient {
  ProcWithClient(runtime::ProcOptions options, std::string_view client_name)
      : proc(std::move(options)), client(must(runtime::Client::attach(proc, client_name))) {}

  runtime::Proc proc;
  std::unique_ptr<runtime::Client> client;
};

class ProcClientTest : public ::testing::Test {
 protected:
  // How long a helper waits for an envelope that should come back.
  static constexpr absl::Duration kReturnDeadline = absl::Seconds(10);

  ProcClientTest()
      : proc_(runtime::ProcOptions::deterministic()),
        client_(must(runtime::Client::attach(proc_, "alice"))) {}

  // The root failure of the next envelope of ours that came back (the test fails, and the
  // failure is empty, when none comes back within kReturnDeadline).
  runtime::DeliveryFailure next_failure() {
    absl::StatusOr<runtime::EnvelopePtr> back = client_->next_undeliverable(kReturnDeadline);
    EXPECT_TRUE(back.ok()) << back.status();
    if (!back.ok() || (*back)->root_failure() == nullptr) return {};
    return *(*back)->root_failure();
  }

  // Whether nothing of ours has come back, right now.
  bool no_returns() {
    return client_->next_undeliverable(absl::ZeroDuration()).status().code() ==
           absl::StatusCode::kDeadlineExceeded;
  }

  runtime::Proc proc_;
  std::unique_ptr<runtime::Client> client_;
};

}  // namespace postal::test_support
