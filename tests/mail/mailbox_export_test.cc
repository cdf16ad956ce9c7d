// export_mailbox / import_mailbox for every store (mail_store_suite.h): a round trip is exact,
// and an import is all or nothing — a malformed, unreadable or too large file, or one the
// mailbox's bounds refuse, changes nothing stored (M-STORE-1, M-STORE-2).
#include "postal/mail/mailbox_export.h"

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "mail_store_suite.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail::testing {
namespace {

struct Kept {
  Priority priority;
  std::string body;
  bool operator==(const Kept&) const = default;
};

std::vector<Kept> contents(MailStore& store, const std::string& id) {
  absl::StatusOr<std::vector<StoredMessage>> all = store.read_all(id);
  EXPECT_TRUE(all.ok()) << all.status();
  std::vector<Kept> out;
  if (all.ok()) {
    for (const StoredMessage& m : *all) out.push_back({m.priority, m.body});
  }
  return out;
}

class MailboxExportTest : public MailStoreTest {
 protected:
  std::filesystem::path save(const std::string& name, const std::string& text) {
    const std::filesystem::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  // A mailbox of three priorities, with an empty and a binary body.
  std::string filled_export() {
    make("tasks@agents.example/queue",
         {.ttl = absl::Hours(1), .max_messages = 10, .max_message_bytes = 64, .durable_all = true});
    for (const auto& [p, body] : std::vector<std::pair<Priority, std::string>>{
             {Priority::kNormal, "n1"},
             {Priority::kCritical, ""},
             {Priority::kUrgent, std::string("\0\xff\x01", 3)},
             {Priority::kNormal, "n2"}}) {
      EXPECT_TRUE(store_->append("tasks@agents.example/queue", p, body).ok());
    }
    absl::StatusOr<std::string> text = export_mailbox(*store_, "tasks@agents.example/queue");
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }
};

TEST_P(MailboxExportTest, M_STORE_1_ExportThenImportRoundTripsAMailboxIntact) {
  const std::string text = filled_export();
  const std::string box = "tasks@agents.example/queue";
  const std::vector<Kept> before = contents(*store_, box);
  ASSERT_EQ(before.size(), 4u);
  const MailboxInfo info = *store_->mailbox(box);
  const std::filesystem::path file = save("export.json", text);
  ASSERT_TRUE(store_->remove(box).ok());
  absl::StatusOr<ImportResult> r = import_mailbox(*store_, file, clock_->now());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->messages, 4u);
  EXPECT_EQ(r->mailbox, box);
  EXPECT_EQ(contents(*store_, box), before) << "order, priorities and bodies byte for byte";
  const MailboxInfo again = *store_->mailbox(box);
  EXPECT_EQ(again.max_messages, info.max_messages);
  EXPECT_EQ(again.max_message_bytes, info.max_message_bytes);
  EXPECT_EQ(again.durable_all, info.durable_all);
  EXPECT_EQ(again.expires_at, info.expires_at) << "what was left of the TTL";
  if (store_->persistent()) {
    reopen();
    EXPECT_EQ(contents(*store_, box), before);
  }
}

TEST_P(MailboxExportTest, M_STORE_2_AMalformedExportImportsNothing) {
  const std::string good = filled_export();
  const std::string box = "tasks@agents.example/queue";
  ASSERT_TRUE(store_->remove(box).ok());
  const std::vector<std::string> malformed = {
      "",
      "not json",
      good.substr(0, good.size() / 2),  // truncated
      absl::StrReplaceAll(good, {{"postal.mailbox-export", "something-else"}}),
      absl::StrReplaceAll(good, {{"\"version\": 1", "\"version\": 2"}}),
      absl::StrReplaceAll(good, {{"\"priority\": \"normal\"", "\"priority\": \"highest\""}}),
      absl::StrReplaceAll(good, {{"\"durable_all\"", "\"durable\""}}),
      absl::StrReplaceAll(good, {{"\"max_messages\": 10", "\"max_messages\": -1"}}),
      absl::StrReplaceAll(good, {{"\"seq\"", "\"extra\": 1, \"seq\""}}),
      // The last message's body is not base64: the three before it must not be stored either.
      good.substr(0, good.rfind("\"body_base64\"")) + "\"body_base64\": \"!!!\"}]}",
  };
  for (size_t i = 0; i < malformed.size(); ++i) {
    absl::StatusOr<ImportResult> r =
        import_mailbox(*store_, save(absl::StrCat("bad", i, ".json"), malformed[i]), clock_->now());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << i << ": " << r.status();
    EXPECT_NE(r.status().message().find("nothing was imported"), std::string_view::npos)
        << r.status();
    EXPECT_TRUE(IsMailboxNotFound(store_->mailbox(box).status())) << i << ": nothing created";
  }
  EXPECT_TRUE(import_mailbox(*store_, save("good.json", good), clock_->now()).ok())
      << "the unbroken file imports";
}

TEST_P(MailboxExportTest, M_STORE_2_AnImportTheMailboxsBoundsRefuseImportsNothing) {
  const std::string text = filled_export();
  const std::string box = "tasks@agents.example/queue";
  const std::filesystem::path file = save("export.json", text);
  // Into the existing mailbox: 4 + 4 stored, past max_messages 10 at the third.
  ASSERT_TRUE(import_mailbox(*store_, file, clock_->now()).ok());
  EXPECT_EQ(*store_->count(box), 8u);
  absl::StatusOr<ImportResult> past = import_mailbox(*store_, file, clock_->now());
  EXPECT_TRUE(IsBudgetExhausted(past.status())) << past.status();
  EXPECT_EQ(*store_->count(box), 8u) << "not one of the four was stored";
  // Other bounds: MailboxConflict, nothing stored.
  ASSERT_TRUE(store_->remove(box).ok());
  make(box, {.max_messages = 99});
  absl::StatusOr<ImportResult> conflict = import_mailbox(*store_, file, clock_->now());
  EXPECT_TRUE(IsMailboxConflict(conflict.status())) << conflict.status();
  EXPECT_EQ(*store_->count(box), 0u);
  // Its TTL ended: nothing left to import, nothing created.
  ASSERT_TRUE(store_->remove(box).ok());
  clock_->advance(absl::Hours(2));
  absl::StatusOr<ImportResult> late = import_mailbox(*store_, file, clock_->now());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kInvalidArgument) << late.status();
  EXPECT_TRUE(IsMailboxNotFound(store_->mailbox(box).status()));
}

TEST_P(MailboxExportTest, M_STORE_1_AnImportReadsOnlyARegularFileOfAtMost64MiB) {
  const std::string text = filled_export();
  const std::string box = "tasks@agents.example/queue";
  ASSERT_TRUE(store_->remove(box).ok());
  const std::filesystem::path real = save("export.json", text);
  const std::filesystem::path link = dir_ / "link.json";
  std::filesystem::create_symlink(real, link);
  EXPECT_TRUE(IsIoFailed(import_mailbox(*store_, link, clock_->now()).status()));
  const std::filesystem::path big = save("big.json", text);
  std::filesystem::resize_file(big, (uint64_t{64} << 20) + 1);  // sparse, valid JSON prefix
  EXPECT_TRUE(IsIoFailed(import_mailbox(*store_, big, clock_->now()).status()));
  EXPECT_TRUE(IsMailboxNotFound(store_->mailbox(box).status()));
}

TEST_P(MailboxExportTest, APrivateMailboxIsNotExported) {
  absl::StatusOr<CreateResult> secret = store_->create({.is_public = false});
  ASSERT_TRUE(secret.ok());
  EXPECT_EQ(export_mailbox(*store_, secret->mailbox.id).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(IsMailboxNotFound(export_mailbox(*store_, "absent").status()));
}

INSTANTIATE_TEST_SUITE_P(Stores, MailboxExportTest,
                         ::testing::Values(MemStore(), SqliteStore(Durability::kOs)), StoreName);

}  // namespace
}  // namespace postal::mail::testing
