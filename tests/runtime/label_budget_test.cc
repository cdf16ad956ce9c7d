// The label intern table under untrusted input (label.h; R-FLOW-4): network input may add at
// most a bounded number of labels to the process-wide table; past it a new label fails its
// decode with a clear error, labels already known keep decoding, and local parses are never
// refused.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "postal/runtime/address.h"
#include "postal/runtime/label.h"
#include "postal/runtime/location.h"
#include "postal/wire/untrusted_scope.h"
#include "postal/wire/codec.h"

namespace postal::runtime {
namespace {

class LabelBudget : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = Label::untrusted_budget(); }
  void TearDown() override { Label::set_untrusted_budget(saved_); }
  size_t saved_ = 0;
};

// An actor address as bytes from the network (cereal, as a channel carries it).
std::string wire_bytes(const std::string& text) {
  absl::StatusOr<ActorAddr> addr = ActorAddr::parse(text);
  EXPECT_TRUE(addr.ok()) << addr.status();
  return *wire::encode(*addr);
}

TEST_F(LabelBudget, R_FLOW_4_NetworkInputCannotGrowTheLabelTableWithoutBound) {
  // The bytes are made first: encoding parses (locally) labels that must not be in the table yet,
  // so make them with labels that exist, then swap their text for fresh ones of the same length.
  static int run = 0;  // fresh labels on every run (--gtest_repeat)
  const std::string stem = absl::StrCat("flood", ::getpid() % 100000, "r", run++);
  Label::set_untrusted_budget(Label::untrusted_count() + 5);
  const std::string known = wire_bytes("known.proc@tcp://127.0.0.1:1");
  int accepted = 0, refused = 0;
  std::string message;
  for (int i = 0; i < 20; ++i) {
    // A label no one parsed before, straight from "the network".
    const std::string fresh = absl::StrCat(stem, "x", 1000 + i);
    std::string bytes = known;
    const size_t at = bytes.find("known");
    ASSERT_NE(at, std::string::npos);
    // cereal writes the length before the text: rewrite both.
    std::string with_fresh = bytes.substr(0, at - 8);
    const uint64_t len = fresh.size();
    with_fresh.append(reinterpret_cast<const char*>(&len), 8);
    with_fresh += fresh + bytes.substr(at + 5);
    absl::StatusOr<ActorAddr> got = wire::decode<ActorAddr>(with_fresh);
    if (got.ok()) {
      ++accepted;
      EXPECT_EQ(got->id.uid.to_string().find(fresh), 0u);
    } else {
      ++refused;
      message = std::string(got.status().message());
    }
  }
  EXPECT_EQ(accepted, 5) << "exactly the budget's worth of new labels is taken";
  EXPECT_EQ(refused, 15);
  EXPECT_NE(message.find("used up"), std::string::npos) << message;
  // Known labels keep decoding, and a local parse of a new label is never refused.
  EXPECT_TRUE(wire::decode<ActorAddr>(known).ok());
  EXPECT_TRUE(Label::parse(absl::StrCat(stem, "local")).ok());
}

// The same bound for the location intern table (location.h): locations are interned since the
// Savina pass, and every payload's reply port and every DEFINE carries one from the network.
TEST(LocationBudget, R_FLOW_4_NetworkInputCannotGrowTheLocationTableWithoutBound) {
  const size_t saved = Location::untrusted_budget();
  Location::set_untrusted_budget(Location::untrusted_count() + 5);
  static int run = 0;  // fresh locations on every run (--gtest_repeat)
  const std::string stem = absl::StrCat("ipc:///tmp/flood-", ::getpid(), "-", run++, "-");
  ASSERT_TRUE(Location::parse(stem + "known").ok());  // a local parse: interned, not counted
  int accepted = 0, refused = 0;
  std::string message;
  {
    wire::UntrustedScope untrusted;
    for (int i = 0; i < 20; ++i) {
      absl::StatusOr<Location> got = Location::parse(absl::StrCat(stem, i));
      if (got.ok()) {
        ++accepted;
      } else {
        ++refused;
        EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted);
        message = std::string(got.status().message());
      }
    }
    EXPECT_TRUE(Location::parse(stem + "known").ok()) << "a known location keeps parsing";
    EXPECT_TRUE(Location::parse(stem + "0").ok()) << "so does one the budget took";
  }
  EXPECT_EQ(accepted, 5) << "exactly the budget's worth of new locations is taken";
  EXPECT_EQ(refused, 15);
  EXPECT_NE(message.find("used up"), std::string::npos) << message;
  EXPECT_TRUE(Location::parse(stem + "local").ok()) << "a local parse is never refused";
  Location::set_untrusted_budget(saved);
}

}  // namespace
}  // namespace postal::runtime
