// The MailStore suite: one set of tests (mail_store_*_test.cc) run against every store
// (mail_store_test.cc instantiates it for MemMailStore and SqliteMailStore at both tiers).
//
// Each test gets a fresh folder under /tmp for the store file (support/scratch_dir.h), a
// ManualClock and a store; tests of durability call `reopen()` and skip on a store that is not
// persistent. The NATS store runs on a real nats-server of the test's own (NatsStore below).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "postal/mail/clock.h"
#include "postal/mail/mail_store.h"
#include "postal/mail/mem_mail_store.h"
#include "postal/mail/nats_mail_store.h"
#include "postal/mail/sqlite_mail_store.h"
#include "support/nats_server.h"
#include "support/scratch_dir.h"

namespace postal::mail::testing {

struct StoreFactory {
  std::string name;
  std::function<absl::StatusOr<std::unique_ptr<MailStore>>(
      const std::filesystem::path& file, std::shared_ptr<Clock> clock, StoreLimits limits)>
      open;
};

// gtest prints the parameter by its name, not its bytes.
inline void PrintTo(const StoreFactory& factory, std::ostream* os) { *os << factory.name; }

class MailStoreTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override { open_store(); }
  void TearDown() override { store_.reset(); }
  // (Re)opens the store at the same file; the old one is closed first.
  void open_store(StoreLimits limits = {}) {
    store_.reset();
    absl::StatusOr<std::unique_ptr<MailStore>> s = GetParam().open(file(), clock_, limits);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = *std::move(s);
  }
  void reopen() { open_store(); }
  std::filesystem::path file() const { return dir_ / "mail.db"; }

  // Creates a public mailbox with the given bounds; fails the test when it cannot.
  MailboxInfo make(const std::string& name, MailboxSpec spec = {}) {
    spec.name = name;
    absl::StatusOr<CreateResult> r = store_->create(spec);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->mailbox : MailboxInfo{};
  }

  test_support::ScratchDir scratch_;  // first: removed after the store closed
  const std::filesystem::path& dir_ = scratch_.path();
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::unique_ptr<MailStore> store_;
};

inline StoreFactory MemStore() {
  return {"mem",
          [](const std::filesystem::path&, std::shared_ptr<Clock> clock,
             StoreLimits limits) -> absl::StatusOr<std::unique_ptr<MailStore>> {
            return MemMailStore::create({.clock = std::move(clock), .limits = limits});
          }};
}

inline StoreFactory SqliteStore(Durability durability) {
  return {std::string("sqlite_") + std::string(to_string(durability)),
          [durability](const std::filesystem::path& file, std::shared_ptr<Clock> clock,
                       StoreLimits limits) {
            return SqliteMailStore::open(
                file, {.durability = durability, .clock = std::move(clock), .limits = limits});
          }};
}

// The NATS store on a nats-server of the test's own, storing in the test's folder. A reopen kills
// that server (kill -9) and starts it again on the same folder, so what survives a reopen
// survived a crash of the server, not only a new store object.
inline StoreFactory NatsStore() {
  return {"nats",
          [](const std::filesystem::path& file, std::shared_ptr<Clock> clock,
             StoreLimits limits) -> absl::StatusOr<std::unique_ptr<MailStore>> {
            if (test_support::NatsServer::binary().empty()) {
              return absl::FailedPreconditionError(test_support::NatsServer::kMissing);
            }
            static std::unique_ptr<test_support::NatsServer> server;  // the running test's
            const std::filesystem::path dir = file.parent_path() / "nats";
            if (server != nullptr && server->dir() == dir) {
              server->restart();
            } else {
              server.reset();
              server = std::make_unique<test_support::NatsServer>(dir);
            }
            if (!server->ready()) {
              return absl::UnavailableError(absl::StrCat(
                  "nats-server did not start; its log: ", server->log().string()));
            }
            return NatsMailStore::open(
                {.url = server->url(), .clock = std::move(clock), .limits = limits});
          }};
}

inline std::string StoreName(const ::testing::TestParamInfo<StoreFactory>& info) {
  return info.param.name;
}

}  // namespace postal::mail::testing
