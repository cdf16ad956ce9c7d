// Test doubles that record: a MailboxSender that keeps every envelope posted to it, and a
// ReturnHandle that keeps every envelope returned or dropped (with the drop's cause).
//
// They record; they do not imitate anything postal ships. Not thread-safe: for tests that post
// from one thread.
#pragma once

#include <vector>

#include <gtest/gtest.h>

#include "postal/runtime/mailbox_sender.h"

namespace postal::test_support {

// A MailboxSender whose mechanism just keeps the envelope.
class RecordingSender final : public runtime::MailboxSender {
 public:
  void post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle&) override {
    got.push_back(std::move(env));
  }
  std::vector<runtime::EnvelopePtr> got;
};

// A ReturnHandle that keeps what it is given.
class RecordingReturn final : public runtime::ReturnHandle {
 public:
  void return_envelope(runtime::EnvelopePtr env) override { returned.push_back(std::move(env)); }
  void drop(runtime::EnvelopePtr env, runtime::DropCause cause) override {
    dropped.push_back(std::move(env));
    causes.push_back(cause);
  }
  // The root failure of the only returned envelope (the test fails when there is not exactly one).
  runtime::DeliveryFailure only_root() const {
    EXPECT_EQ(returned.size(), 1u);
    if (returned.empty() || returned.back()->root_failure() == nullptr) return {};
    return *returned.back()->root_failure();
  }
  std::vector<runtime::EnvelopePtr> returned;
  std::vector<runtime::EnvelopePtr> dropped;
  std::vector<runtime::DropCause> causes;
};

}  // namespace postal::test_support
