// Remote spawn by registered type name, and the status reporter.
#include "postal/actors/system_actors.h"

#include "gtest/gtest.h"
#include "postal/postal.h"

namespace {

struct Tick {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

}  // namespace

POSTAL_MESSAGE(Tick, "test.system.Tick");

namespace postal::actors {
namespace {

class Greeter : public Actor, public Handles<Tick> {
 public:
  static absl::StatusOr<std::unique_ptr<Greeter>> create(const SpawnParams& p) {
    static constexpr wire::HeaderKey<int64_t> kCount{"count"};
    std::optional<int64_t> count = p.get(kCount);
    if (!count || *count < 0) {
      return absl::InvalidArgumentError("param \"count\" (a non-negative integer) is required");
    }
    return std::make_unique<Greeter>(*count);
  }
  explicit Greeter(int64_t count) : count_(count) {}
  absl::Status handle(Context&, Tick) override { return absl::OkStatus(); }

 private:
  int64_t count_;
};
POSTAL_ACTOR(Greeter, "test.Greeter");

TEST(SystemActors, SpawnRemoteByRegisteredTypeName) {
  Proc proc(ProcOptions::threads(1));
  ASSERT_TRUE(install_system_actors(proc).ok());
  auto client = *Client::attach(proc, "test");
  SpawnParams params;
  params.set(wire::HeaderKey<int64_t>{"count"}, int64_t{3});
  auto addr = spawn_remote(*client, proc.addr(), "test.Greeter", "greeter", params,
                           absl::Seconds(5));
  ASSERT_TRUE(addr.ok()) << addr.status();
  EXPECT_EQ(addr->id.uid.to_string(), "greeter");
  ASSERT_NE(proc.lookup(addr->id), nullptr);

  auto status = query_status(*client, proc.addr(), absl::Seconds(5));
  ASSERT_TRUE(status.ok()) << status.status();
  bool found = false;
  for (const auto& a : status->actors) found |= a.id == addr->id.to_string();
  EXPECT_TRUE(found);
  EXPECT_GE(status->actors.size(), 3u);  // spawner, status reporter, greeter
}

TEST(SystemActors, SpawnRemoteErrorsSayWhatToDo) {
  Proc proc(ProcOptions::threads(1));
  ASSERT_TRUE(install_system_actors(proc).ok());
  auto client = *Client::attach(proc, "test");
  auto unknown = spawn_remote(*client, proc.addr(), "no.Such", "x", {}, absl::Seconds(5));
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("POSTAL_ACTOR"), absl::string_view::npos);
  auto bad_params = spawn_remote(*client, proc.addr(), "test.Greeter", "g", {}, absl::Seconds(5));
  EXPECT_FALSE(bad_params.ok());
  EXPECT_NE(bad_params.status().message().find("count"), absl::string_view::npos);
  auto bad_name = spawn_remote(*client, proc.addr(), "test.Greeter", "Bad Name", {},
                               absl::Seconds(5));
  EXPECT_FALSE(bad_name.ok());
}

}  // namespace
}  // namespace postal::actors
