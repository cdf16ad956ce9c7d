// Test doubles for routing tests: a MailboxSender and a ReturnHandle that keep what they get.
// (They record; they do not imitate anything postal ships.)
#pragma once

#include <vector>

#include "postal/runtime/mailbox_sender.h"

namespace postal::routing::testing {

class Sink final : public runtime::MailboxSender {
 public:
  void post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle&) override {
    got.push_back(std::move(env));
  }
  std::vector<runtime::EnvelopePtr> got;
};

class Returns final : public runtime::ReturnHandle {
 public:
  void return_envelope(runtime::EnvelopePtr env) override { returned.push_back(std::move(env)); }
  void drop(runtime::EnvelopePtr env, runtime::DropCause) override {
    dropped.push_back(std::move(env));
  }
  std::vector<runtime::EnvelopePtr> returned;
  std::vector<runtime::EnvelopePtr> dropped;
};

}  // namespace postal::routing::testing
