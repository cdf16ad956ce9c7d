// Tests for the address module: Label, Uid, ids, ChannelAddr, Location and addresses (R-ADDR).
#include "postal/runtime/address.h"

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <cereal/archives/binary.hpp>
#include <cereal/archives/portable_binary.hpp>
#include <gtest/gtest.h>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "postal/runtime/ids.h"
#include "postal/runtime/label.h"
#include "postal/runtime/location.h"
#include "postal/runtime/uid.h"
#include "postal/wire/codec.h"
#include "support/must.h"

namespace postal::runtime {
namespace {

using test_support::must;

Label label(std::string_view text) { return must(Label::parse(text)); }

template <class T>
std::size_t hash_of(const T& value) {
  return absl::Hash<T>{}(value);
}

// --- R-ADDR-1: labels -------------------------------------------------------------------------

TEST(Label, R_ADDR_1_AcceptsValidLabels) {
  for (std::string text : {"a", "pinger", "gw1", "host-a", "proc_2", "a-b_c9", "z0"}) {
    absl::StatusOr<Label> parsed = Label::parse(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(parsed->str(), text);
  }
  const std::string longest = "a" + std::string(62, 'b');
  EXPECT_TRUE(Label::parse(longest).ok());
}

TEST(Label, R_ADDR_1_RejectsUppercaseAndBadEnds) {
  const std::vector<std::string> bad = {"",
                                        "Foo",
                                        "fOo",
                                        "1abc",
                                        "_a",
                                        "-a",
                                        "abc-",
                                        "abc_",
                                        "a.b",
                                        "a~b",
                                        "a b",
                                        "a:b",
                                        "a@b",
                                        std::string("a\0b", 3),
                                        "a" + std::string(63, 'b')};
  for (const std::string& text : bad) {
    absl::StatusOr<Label> parsed = Label::parse(text);
    ASSERT_FALSE(parsed.ok()) << "accepted " << text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("bad label"), std::string::npos) << parsed.status();
  }
  // The message names the problem and what to write instead.
  const std::string upper(Label::parse("Foo").status().message());
  EXPECT_NE(upper.find("lowercase"), std::string::npos) << upper;
  EXPECT_NE(upper.find("\"foo\""), std::string::npos) << upper;
  const std::string end(Label::parse("abc-").status().message());
  EXPECT_NE(end.find("ends with"), std::string::npos) << end;
}

TEST(Label, R_ADDR_1_CopiesArePointerCopiesOfInternedText) {
  static_assert(sizeof(Label) == sizeof(void*));
  const Label a = label("interned-once");
  const Label b = label(std::string("interned-") + "once");
  const Label copy = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.str().data(), b.str().data());  // One table entry for equal text.
  EXPECT_EQ(copy.str().data(), a.str().data());
  EXPECT_NE(label("interned-twice"), a);
  EXPECT_EQ(hash_of(a), hash_of(b));
}

TEST(Label, R_ADDR_1_InterningIsThreadSafe) {
  std::vector<const char*> seen(2 * 200);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([t, &seen] {
      for (int i = 0; i < 200; ++i) {
        seen[t * 200 + i] = must(Label::parse(absl::StrCat("race", i))).str().data();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < 200; ++i) EXPECT_EQ(seen[i], seen[200 + i]) << i;
}

TEST(Label, R_ADDR_1_OrderingIsLexicographic) {
  const Label b = label("order-b");  // Interned first, so pointer order would disagree.
  const Label a = label("order-a");
  EXPECT_LT(a, b);
  EXPECT_GT(b, a);
  EXPECT_EQ(a <=> label("order-a"), std::strong_ordering::equal);
}

// --- R-ADDR-2: uids ---------------------------------------------------------------------------

TEST(Uid, R_ADDR_2_Base58FlickrAlphabet) {
  const std::string_view alphabet = "123456789abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ";
  for (std::size_t i = 0; i < alphabet.size(); ++i) {
    EXPECT_EQ(base58_encode(i), std::string(1, alphabet[i]));
  }
  const std::vector<std::pair<std::uint64_t, std::string>> known = {{0, "1"},
                                                                    {1, "2"},
                                                                    {9, "a"},
                                                                    {57, "Z"},
                                                                    {58, "21"},
                                                                    {3363, "ZZ"},
                                                                    {3364, "211"},
                                                                    {4294967296, "7xwQ9h"},
                                                                    {123456789, "bUKpk"},
                                                                    {UINT64_MAX, "JPwcyDCgEup"}};
  for (const auto& [value, text] : known) {
    EXPECT_EQ(base58_encode(value), text) << value;
    absl::StatusOr<std::uint64_t> decoded = base58_decode(text);
    ASSERT_TRUE(decoded.ok()) << text << ": " << decoded.status();
    EXPECT_EQ(*decoded, value) << text;
  }
  for (std::string bad :
       {"", "0", "O", "I", "l", "a+b", "11", "1a", "JPwcyDCgEuq", "zzzzzzzzzzzz"}) {
    EXPECT_FALSE(base58_decode(bad).ok()) << "accepted " << bad;
  }
  EXPECT_NE(base58_decode("JPwcyDCgEuq").status().message().find("overflows 64 bits"),
            std::string::npos);
}

TEST(Uid, R_ADDR_2_InstanceEqualityIgnoresLabel) {
  const Uid plain = Uid::instance(497789);
  const Uid worker = Uid::instance(497789, label("worker"));
  const Uid other = Uid::instance(497789, label("other"));
  EXPECT_EQ(plain, worker);
  EXPECT_EQ(worker, other);
  EXPECT_EQ(hash_of(plain), hash_of(worker));
  EXPECT_EQ(hash_of(worker), hash_of(other));
  EXPECT_NE(worker, Uid::instance(497790, label("worker")));
  // The label is kept for display even though it does not count.
  EXPECT_EQ(worker.to_string(), "worker~3xYz");
  EXPECT_EQ(other.to_string(), "other~3xYz");
  EXPECT_EQ(plain.to_string(), "~3xYz");
}

TEST(Uid, R_ADDR_2_SingletonsCompareByLabelAndNeverEqualInstances) {
  EXPECT_EQ(Uid::singleton(label("host")), Uid::singleton(label("host")));
  EXPECT_NE(Uid::singleton(label("host")), Uid::singleton(label("hostb")));
  EXPECT_NE(Uid::singleton(label("host")), Uid::instance(0, label("host")));
  EXPECT_NE(Uid::singleton(label("host")), Uid::instance(0));
  EXPECT_EQ(hash_of(Uid::singleton(label("host"))), hash_of(Uid::singleton(label("host"))));
  EXPECT_TRUE(Uid::singleton(label("host")).is_singleton());
  EXPECT_FALSE(Uid::instance(3).is_singleton());
  EXPECT_EQ(Uid::singleton(label("host")).label(), label("host"));
  EXPECT_EQ(Uid::instance(3).label(), std::nullopt);
  EXPECT_EQ(Uid(), Uid::instance(0));  // Documented default.
  static_assert(sizeof(Uid) <= 24);
}

TEST(Uid, R_ADDR_2_TextFormsParseBack) {
  const Uid host = must(Uid::parse("host"));
  EXPECT_TRUE(host.is_singleton());
  EXPECT_EQ(host.label()->str(), "host");
  const Uid worker = must(Uid::parse("worker~3xYz"));
  EXPECT_FALSE(worker.is_singleton());
  EXPECT_EQ(worker.number(), 497789u);
  EXPECT_EQ(worker.label()->str(), "worker");
  const Uid bare = must(Uid::parse("~3xYz"));
  EXPECT_EQ(bare.label(), std::nullopt);
  EXPECT_EQ(bare, worker);
  for (std::string bad : {"", "Host", "~", "a~", "~0", "a~b~c", "~11", "-a~2", "a b"}) {
    absl::StatusOr<Uid> parsed = Uid::parse(bad);
    ASSERT_FALSE(parsed.ok()) << "accepted " << bad;
    EXPECT_NE(parsed.status().message().find("bad uid"), std::string::npos) << parsed.status();
  }
}

TEST(Uid, R_ADDR_2_RandomInstancesDifferAndKeepTheirLabel) {
  absl::flat_hash_set<Uid> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(Uid::random());
  EXPECT_EQ(seen.size(), 1000u);
  const Uid named = Uid::random(label("worker"));
  EXPECT_FALSE(named.is_singleton());
  EXPECT_EQ(named.label(), label("worker"));
}

// --- R-ADDR-3: ids ----------------------------------------------------------------------------

TEST(Ids, R_ADDR_3_TextForms) {
  const ActorId pinger{ProcId{Uid::singleton(label("host"))}, Uid::singleton(label("pinger"))};
  EXPECT_EQ(pinger.to_string(), "pinger.host");
  EXPECT_EQ(must(ActorId::parse("pinger.host")), pinger);
  EXPECT_EQ(must(ProcId::parse("host")), pinger.proc);

  EXPECT_EQ(Port::ephemeral(0).to_string(), "e0");
  EXPECT_EQ(Port::control(12).to_string(), "c12");
  EXPECT_EQ(Port::handler(0x00ff00ff00ff00ffULL).to_string(), "h00ff00ff00ff00ff");
  EXPECT_EQ(Port::handler(1).to_string(), "h0000000000000001");
  EXPECT_EQ(Port::ephemeral(UINT64_MAX).to_string(), "e18446744073709551615");

  const PortId port{pinger, Port::handler(0x00ff00ff00ff00ffULL)};
  EXPECT_EQ(port.to_string(), "pinger.host:h00ff00ff00ff00ff");
  EXPECT_EQ(must(PortId::parse("pinger.host:h00ff00ff00ff00ff")), port);
  EXPECT_EQ(must(PortId::parse("w~3xYz.~2:e7")).to_string(), "w~3xYz.~2:e7");
}

TEST(Ids, R_ADDR_3_PortKindsAreDistinct) {
  absl::flat_hash_set<Port> ports = {Port::ephemeral(5), Port::handler(5), Port::control(5)};
  EXPECT_EQ(ports.size(), 3u);
  EXPECT_NE(Port::ephemeral(5), Port::control(5));
  EXPECT_EQ(must(Port::parse("c5")).kind(), Port::Kind::kControl);
  EXPECT_EQ(must(Port::parse("h0000000000000005")).kind(), Port::Kind::kHandler);
  EXPECT_EQ(must(Port::parse("e5")).value(), 5u);
  EXPECT_EQ(Port(), Port::ephemeral(0));
}

TEST(Ids, R_ADDR_3_IdEqualityFollowsUidEquality) {
  // Identity is the uid: an instance's display label does not change who it is.
  EXPECT_EQ(must(ActorId::parse("a~3xYz.p~2")), must(ActorId::parse("~3xYz.q~2")));
  EXPECT_EQ(hash_of(must(ActorId::parse("a~3xYz.p~2"))),
            hash_of(must(ActorId::parse("~3xYz.q~2"))));
  EXPECT_NE(must(ActorId::parse("a.p")), must(ActorId::parse("p.a")));
  EXPECT_NE(must(PortId::parse("a.p:e1")), must(PortId::parse("a.p:c1")));
}

TEST(Ids, R_ADDR_3_ParseErrorsNameThePart) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"x1", "unknown port kind"},
      {"e", "empty"},
      {"e01", "leading zero"},
      {"e-1", "decimal"},
      {"h00FF00ff00ff00ff", "lowercase hex"},
      {"h123", "exactly 16"},
      {"e18446744073709551616", "out of range"},
      {"", "empty"}};
  for (const auto& [text, words] : cases) {
    absl::StatusOr<Port> parsed = Port::parse(text);
    ASSERT_FALSE(parsed.ok()) << "accepted " << text;
    EXPECT_NE(parsed.status().message().find(words), std::string::npos) << parsed.status();
  }
  EXPECT_NE(ActorId::parse("pinger").status().message().find("missing '.'"), std::string::npos);
  EXPECT_NE(ActorId::parse("a.b.c").status().message().find("more than one '.'"),
            std::string::npos);
  EXPECT_NE(PortId::parse("a.b").status().message().find("missing ':port'"), std::string::npos);
}

// --- R-ADDR-4: locations ----------------------------------------------------------------------

TEST(ChannelAddr, R_ADDR_4_TextForms) {
  const ChannelAddr inproc = must(ChannelAddr::parse("inproc://7"));
  EXPECT_EQ(inproc.transport(), ChannelAddr::Transport::kInproc);
  EXPECT_EQ(inproc.number(), 7u);

  const ChannelAddr path = must(ChannelAddr::parse("ipc:///tmp/x.sock"));
  EXPECT_EQ(path.transport(), ChannelAddr::Transport::kIpc);
  EXPECT_FALSE(path.is_abstract());
  EXPECT_EQ(path.path(), "/tmp/x.sock");

  const ChannelAddr abstract = must(ChannelAddr::parse("ipc://@postal-abstract"));
  EXPECT_TRUE(abstract.is_abstract());
  EXPECT_EQ(abstract.path(), "postal-abstract");
  EXPECT_NE(abstract, must(ChannelAddr::parse("ipc:///postal-abstract")));
  EXPECT_EQ(abstract.to_string(), "ipc://@postal-abstract");

  const ChannelAddr v4 = must(ChannelAddr::parse("tcp://127.0.0.1:4000"));
  EXPECT_EQ(v4.transport(), ChannelAddr::Transport::kTcp);
  EXPECT_EQ(v4.host(), "127.0.0.1");
  EXPECT_EQ(v4.port(), 4000);

  const ChannelAddr v6 = must(ChannelAddr::parse("tcp://[::1]:4000"));
  EXPECT_EQ(v6.host(), "::1");
  EXPECT_EQ(v6.to_string(), "tcp://[::1]:4000");
  EXPECT_EQ(must(ChannelAddr::parse("tcp://[0:0::1]:4000")), v6);  // Canonical IPv6.
  EXPECT_EQ(must(ChannelAddr::tcp("::1", 4000)), v6);

  EXPECT_EQ(must(ChannelAddr::parse("tcp://Example.ORG:0")).to_string(), "tcp://example.org:0");
  EXPECT_EQ(must(ChannelAddr::parse("tcp://h:65535")).port(), 65535);
  EXPECT_EQ(ChannelAddr(), ChannelAddr::inproc(0));
}

TEST(ChannelAddr, R_ADDR_4_ParseErrorsListTheForms) {
  const std::string unknown(ChannelAddr::parse("udp://x:1").status().message());
  for (std::string word : {"unknown channel scheme \"udp\"", "inproc://N", "ipc:///absolute/path",
                           "ipc://@abstract-name", "tcp://host:port"}) {
    EXPECT_NE(unknown.find(word), std::string::npos) << unknown;
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tcp://host", "missing ':port'"},
      {"tcp://host:65536", "out of range"},
      {"tcp://[::1:80", "missing ']'"},
      {"tcp://[zz]:1", "IPv6"},
      {"tcp://1.2.3:4", "IPv4"},
      {"tcp://1.2.3.256:4", "IPv4"},
      {"tcp://a_b:1", "bad host"},
      {"tcp://-a:1", "bad host"},
      {"tcp://:1", "host is empty"},
      {"ipc://relative", "ipc:///absolute/path"},
      {"ipc://@", "empty"},
      {"ipc:///" + std::string(107, 'x'), "at most 107"},
      {"ipc:///a\nb", "control character"},
      {"inproc://-1", "decimal"},
      {"inproc://", "empty"},
      {"127.0.0.1:4000", "missing \"://\""}};
  for (const auto& [text, words] : cases) {
    absl::StatusOr<ChannelAddr> parsed = ChannelAddr::parse(text);
    ASSERT_FALSE(parsed.ok()) << "accepted " << text;
    EXPECT_NE(parsed.status().message().find(words), std::string::npos) << parsed.status();
  }
}

TEST(Location, R_ADDR_4_ViasOutermostFirst) {
  const ChannelAddr tcp = must(ChannelAddr::parse("tcp://127.0.0.1:4000"));
  const Uid gw1 = Uid::singleton(label("gw1"));
  const Uid gw2 = Uid::singleton(label("gw2"));
  const Location loc = Location::via(gw1, Location::via(gw2, Location::addr(tcp)));
  EXPECT_EQ(loc.to_string(), "gw1.gw2.tcp://127.0.0.1:4000");
  EXPECT_EQ(loc.vias(), (std::vector<Uid>{gw1, gw2}));
  EXPECT_TRUE(loc.is_via());
  EXPECT_EQ(loc.via_uid(), gw1);
  EXPECT_EQ(loc.inner().to_string(), "gw2.tcp://127.0.0.1:4000");
  EXPECT_EQ(loc.inner().via_uid(), gw2);
  EXPECT_FALSE(loc.inner().inner().is_via());
  EXPECT_EQ(loc.inner().inner(), Location::addr(tcp));
  EXPECT_EQ(loc.channel(), tcp);

  EXPECT_EQ(must(Location::parse("gw1.gw2.tcp://127.0.0.1:4000")), loc);
  EXPECT_NE(must(Location::parse("gw2.gw1.tcp://127.0.0.1:4000")), loc);  // Order matters.
  EXPECT_NE(Location::addr(tcp), loc);
  EXPECT_EQ(hash_of(must(Location::parse("gw1.gw2.tcp://127.0.0.1:4000"))), hash_of(loc));

  const Location mixed = must(Location::parse("~3xYz.gw~2.ipc://@a.b://c"));
  EXPECT_EQ(mixed.vias(), (std::vector<Uid>{Uid::instance(497789), Uid::instance(1)}));
  EXPECT_EQ(mixed.channel().path(), "a.b://c");
  EXPECT_EQ(must(Location::parse("tcp.inproc://3")).via_uid(), Uid::singleton(label("tcp")));
}

TEST(Location, R_ADDR_4_DefaultIsInproc0AndCopiesShareTheRep) {
  EXPECT_EQ(Location(), Location::addr(ChannelAddr::inproc(0)));
  EXPECT_EQ(Location().to_string(), "inproc://0");
  EXPECT_FALSE(Location().is_via());

  static_assert(sizeof(Location) == sizeof(void*));
  const Location loc = must(Location::parse("gw.tcp://127.0.0.1:4000"));
  const Location copy = loc;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(&copy.channel(), &loc.channel());
  EXPECT_EQ(copy.vias().data(), loc.vias().data());
  // Interned: an equal location made any other way shares the same representation too.
  const Location again = Location::via(Uid::singleton(label("gw")),
                                       must(Location::parse("tcp://127.0.0.1:4000")));
  EXPECT_EQ(&again.channel(), &loc.channel());
  EXPECT_EQ(&must(Location::parse("gw.tcp://127.0.0.1:4000")).channel(), &loc.channel());
}

TEST(LocationDeathTest, R_ADDR_4_PeelingWithoutAViaAborts) {
  const Location loc = must(Location::parse("tcp://127.0.0.1:4000"));
  EXPECT_DEATH((void)loc.via_uid(), "without a via");
  EXPECT_DEATH((void)loc.inner(), "without a via");
}

TEST(Address, R_ADDR_4_TextFormsAndHelpers) {
  const ActorAddr worker = must(ActorAddr::parse("worker~3xYz.host@gw.tcp://127.0.0.1:4000"));
  EXPECT_EQ(worker.id.uid, Uid::instance(497789));
  EXPECT_EQ(worker.id.uid.label(), label("worker"));
  EXPECT_EQ(worker.id.proc.uid, Uid::singleton(label("host")));
  EXPECT_EQ(worker.location.via_uid(), Uid::singleton(label("gw")));
  EXPECT_EQ(worker.to_string(), "worker~3xYz.host@gw.tcp://127.0.0.1:4000");

  const PortAddr port = must(PortAddr::parse("pinger.procone:h00ff00ff00ff00ff@ipc:///tmp/x.sock"));
  EXPECT_EQ(port.id.port, Port::handler(0x00ff00ff00ff00ffULL));
  EXPECT_EQ(port.location.channel().path(), "/tmp/x.sock");
  EXPECT_EQ(port.to_string(), "pinger.procone:h00ff00ff00ff00ff@ipc:///tmp/x.sock");

  const ProcAddr proc = must(ProcAddr::parse("host@ipc://@ab@c"));  // '@' inside the location.
  EXPECT_EQ(proc.location.channel().path(), "ab@c");

  EXPECT_EQ(worker.proc_addr().to_string(), "host@gw.tcp://127.0.0.1:4000");
  EXPECT_EQ(worker.port(Port::ephemeral(3)).to_string(),
            "worker~3xYz.host:e3@gw.tcp://127.0.0.1:4000");
  EXPECT_EQ(port.actor_addr().to_string(), "pinger.procone@ipc:///tmp/x.sock");
  EXPECT_EQ(proc.actor(Uid::singleton(label("a"))).to_string(), "a.host@ipc://@ab@c");
  // Same id, different location: different addresses (the location is part of the address).
  EXPECT_NE(must(ProcAddr::parse("host@inproc://1")), must(ProcAddr::parse("host@inproc://2")));
}

// --- R-ADDR-5: round trips and errors ---------------------------------------------------------

// Generates random valid addresses of every shape from a fixed seed.
class AddressGenerator {
 public:
  explicit AddressGenerator(std::uint64_t seed) : rng_(seed) {}

  std::uint64_t below(std::uint64_t n) { return rng_() % n; }

  std::string label_text() {
    static constexpr std::string_view kFirst = "abcdefghijklmnopqrstuvwxyz";
    static constexpr std::string_view kLast = "abcdefghijklmnopqrstuvwxyz0123456789";
    static constexpr std::string_view kMiddle = "abcdefghijklmnopqrstuvwxyz0123456789_-";
    const std::size_t len = below(10) == 0 ? 1 + below(63) : 1 + below(8);
    std::string out(1, kFirst[below(kFirst.size())]);
    for (std::size_t i = 1; i + 1 < len; ++i) out += kMiddle[below(kMiddle.size())];
    if (len > 1) out += kLast[below(kLast.size())];
    return out;
  }
  std::uint64_t number() {
    switch (below(4)) {
      case 0:
        return below(100);
      case 1:
        return UINT64_MAX - below(3);
      default:
        return rng_();
    }
  }
  Uid uid() {
    switch (below(3)) {
      case 0:
        return Uid::singleton(label(label_text()));
      case 1:
        return Uid::instance(number(), label(label_text()));
      default:
        return Uid::instance(number());
    }
  }
  Port port() {
    switch (below(3)) {
      case 0:
        return Port::ephemeral(number());
      case 1:
        return Port::handler(number());
      default:
        return Port::control(number());
    }
  }
  std::string printable(std::size_t len) {
    std::string out;
    for (std::size_t i = 0; i < len; ++i) out += static_cast<char>(0x20 + below(0x7f - 0x20));
    return out;
  }
  std::string hostname() {
    static constexpr std::string_view kChars =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-";
    std::string out;
    const std::size_t parts = 1 + below(4);
    for (std::size_t p = 0; p < parts; ++p) {
      if (p > 0) out += '.';
      out += static_cast<char>('a' + below(26));
      for (std::size_t i = below(6); i > 0; --i) out += kChars[below(kChars.size())];
      out += static_cast<char>('0' + below(10));
    }
    return out;
  }
  ChannelAddr channel() {
    const auto port = static_cast<std::uint16_t>(below(65536));
    switch (below(6)) {
      case 0:
        return ChannelAddr::inproc(number());
      case 1:
        return must(ChannelAddr::ipc("/" + printable(below(ChannelAddr::kMaxIpcPath))));
      case 2:
        return must(ChannelAddr::ipc_abstract(printable(1 + below(ChannelAddr::kMaxIpcPath))));
      case 3:
        return must(ChannelAddr::tcp(hostname(), port));
      case 4:
        return must(ChannelAddr::tcp(
            absl::StrCat(below(256), ".", below(256), ".", below(256), ".", below(256)), port));
      default: {
        std::string v6;
        for (int g = 0; g < 8; ++g)
          absl::StrAppend(&v6, g ? ":" : "", absl::Hex(below(4) ? 0 : below(65536)));
        return must(ChannelAddr::tcp(v6, port));
      }
    }
  }
  Location location() {
    Location loc = Location::addr(channel());
    for (std::size_t i = below(4); i > 0; --i) loc = Location::via(uid(), loc);
    return loc;
  }
  ProcId proc_id() { return ProcId{uid()}; }
  ActorId actor_id() { return ActorId{proc_id(), uid()}; }

 private:
  std::mt19937_64 rng_;
};

template <class T>
::testing::AssertionResult round_trips(const T& value) {
  const std::string text = value.to_string();
  absl::StatusOr<T> parsed = T::parse(text);
  if (!parsed.ok()) return ::testing::AssertionFailure() << text << ": " << parsed.status();
  if (!(*parsed == value)) return ::testing::AssertionFailure() << text << " parsed unequal";
  if (parsed->to_string() != text) {
    return ::testing::AssertionFailure() << text << " reprinted as " << parsed->to_string();
  }
  if (absl::Hash<T>{}(*parsed) != absl::Hash<T>{}(value)) {
    return ::testing::AssertionFailure() << text << " hashes differently after parsing";
  }
  return ::testing::AssertionSuccess();
}

TEST(Address, R_ADDR_5_RoundTripRandomized) {
  AddressGenerator gen(20240601);
  for (int i = 0; i < 10000; ++i) {
    switch (i % 3) {
      case 0:
        ASSERT_TRUE(round_trips(ProcAddr{gen.proc_id(), gen.location()})) << i;
        break;
      case 1:
        ASSERT_TRUE(round_trips(ActorAddr{gen.actor_id(), gen.location()})) << i;
        break;
      default:
        ASSERT_TRUE(round_trips(PortAddr{PortId{gen.actor_id(), gen.port()}, gen.location()})) << i;
    }
  }
}

TEST(Address, R_ADDR_5_ParseErrorsNameTheProblem) {
  enum Kind { kProc, kActor, kPort };
  struct Case {
    Kind kind;
    std::string input;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {kProc, "host", {"missing '@'", "id@location"}},
      {kActor, "pinger.host", {"missing '@'"}},
      {kPort, "pinger.host:e0 tcp://h:1", {"missing '@'"}},
      {kProc, "Host@inproc://1", {"bad label \"Host\"", "[a-z0-9_-]", "lowercase"}},
      {kActor, "pinger.host-@inproc://1", {"bad label \"host-\"", "ends with"}},
      {kActor, "pinger@inproc://1", {"bad actor id", "missing '.'", "actoruid.procuid"}},
      {kActor, "w~0x.host@inproc://1", {"bad uid \"w~0x\"", "Flickr alphabet"}},
      {kPort, "a.b:z1@inproc://1", {"bad port \"z1\"", "e<decimal>"}},
      {kPort, "a.b@inproc://1", {"missing ':port'"}},
      {kProc, "host@", {"bad location", "missing a channel URL"}},
      {kProc,
       "host@udp://h:1",
       {"bad location", "unknown channel scheme \"udp\"", "tcp://host:port"}},
      {kProc, "host@gw..tcp://h:1", {"bad location", "bad via \"\""}},
      {kProc, "host@GW.tcp://h:1", {"bad via \"GW\"", "bad label"}},
      {kActor, "a.b@tcp://h", {"bad channel address", "missing ':port'"}},
      {kActor, "a.b@tcp://h:99999", {"the tcp port \"99999\"", "out of range"}},
  };
  for (const Case& c : cases) {
    absl::Status status;
    switch (c.kind) {
      case kProc:
        status = ProcAddr::parse(c.input).status();
        break;
      case kActor:
        status = ActorAddr::parse(c.input).status();
        break;
      case kPort:
        status = PortAddr::parse(c.input).status();
        break;
    }
    ASSERT_FALSE(status.ok()) << "accepted " << c.input;
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.input;
    for (const std::string& word : c.words) {
      EXPECT_NE(status.message().find(word), std::string::npos)
          << c.input << " → " << status.message() << "\n  (expected to contain: " << word << ")";
    }
  }
}

TEST(Address, R_ADDR_5_GarbageAndMutationsNeverCrash) {
  AddressGenerator gen(7);
  for (int i = 0; i < 5000; ++i) {
    std::string text = PortAddr{PortId{gen.actor_id(), gen.port()}, gen.location()}.to_string();
    for (std::size_t n = 1 + gen.below(3); n > 0; --n) {
      text[gen.below(text.size())] = static_cast<char>(gen.below(256));
    }
    absl::StatusOr<PortAddr> port = PortAddr::parse(text);
    if (port.ok()) {
      ASSERT_TRUE(round_trips(*port)) << text;
    } else {
      EXPECT_LT(port.status().message().size(), 2000u) << "unbounded message for " << text;
    }
    if (absl::StatusOr<ActorAddr> actor = ActorAddr::parse(text); actor.ok()) {
      ASSERT_TRUE(round_trips(*actor));
    }
    if (absl::StatusOr<ProcAddr> proc = ProcAddr::parse(text); proc.ok()) {
      ASSERT_TRUE(round_trips(*proc));
    }
  }
}

TEST(Address, R_ADDR_5_ErrorMessagesAreBounded) {
  // Every layer quotes its input; quotes are cut so that nesting cannot blow the message up,
  // even for bytes that escape to four characters each.
  const std::string junk(4000, '\xff');
  const std::vector<std::string> inputs = {
      junk,
      junk + "." + junk + ":e0@" + junk,
      "a~" + junk + ".b:e0@inproc://1",
      "a.b:h" + junk + "@inproc://1",
      "a.b:e0@" + junk + "." + junk + ".tcp://h:1",
      "a.b:e0@gw.tcp://" + junk + ":1",
      "a.b:e0@gw.ipc://" + junk,
  };
  for (const std::string& input : inputs) {
    const absl::Status status = PortAddr::parse(input).status();
    ASSERT_FALSE(status.ok());
    EXPECT_LT(status.message().size(), 1500u) << status.message();
  }
}

TEST(Address, R_ADDR_5_CerealBinaryRoundTrip) {
  AddressGenerator gen(99);
  for (int i = 0; i < 200; ++i) {
    const PortAddr port{PortId{gen.actor_id(), gen.port()}, gen.location()};
    const ActorAddr actor{gen.actor_id(), gen.location()};
    const ProcAddr proc{gen.proc_id(), gen.location()};
    const Label name = label(gen.label_text());
    const ChannelAddr channel = gen.channel();
    std::stringstream buffer;
    {
      cereal::BinaryOutputArchive out(buffer);
      out(port, actor, proc, name, channel, port.location, port.id.port);
    }
    PortAddr port2;
    ActorAddr actor2;
    ProcAddr proc2;
    Label name2 = label("placeholder");
    ChannelAddr channel2;
    Location location2;
    Port port_kind2;
    {
      cereal::BinaryInputArchive in(buffer);
      in(port2, actor2, proc2, name2, channel2, location2, port_kind2);
    }
    ASSERT_EQ(port2, port);
    ASSERT_EQ(actor2, actor);
    ASSERT_EQ(proc2, proc);
    ASSERT_EQ(name2, name);
    ASSERT_EQ(channel2, channel);
    ASSERT_EQ(location2, port.location);
    ASSERT_EQ(port_kind2, port.id.port);
    // Display labels survive too, although equality ignores them.
    ASSERT_EQ(actor2.to_string(), actor.to_string());
  }
}

TEST(Address, R_ADDR_5_CerealLoadOfInvalidContentThrows) {
  const auto load_from_string = [](const std::string& text, auto& value) {
    std::stringstream buffer;
    {
      cereal::BinaryOutputArchive out(buffer);
      out(text);
    }
    cereal::BinaryInputArchive in(buffer);
    in(value);
  };
  Uid uid;
  EXPECT_THROW(load_from_string("Bad~", uid), cereal::Exception);
  Location location;
  EXPECT_THROW(load_from_string("gw.udp://x:1", location), cereal::Exception);
  ChannelAddr channel;
  EXPECT_THROW(load_from_string("tcp://h", channel), cereal::Exception);
  Label name = label("placeholder");
  EXPECT_THROW(load_from_string("-x", name), cereal::Exception);
  EXPECT_EQ(name, label("placeholder"));  // A failed load leaves the value unchanged.

  std::stringstream buffer;
  {
    cereal::BinaryOutputArchive out(buffer);
    out(std::uint8_t{7}, std::uint64_t{1});  // Port kind 7 does not exist.
  }
  Port port;
  cereal::BinaryInputArchive in(buffer);
  EXPECT_THROW(in(port), cereal::Exception);
}

// The wire archive memoizes a thread's recent port addresses (address.h): the bytes stay those
// of cereal's portable binary archive, every value decodes back equal however the memo is hit or
// cycled, and bytes that differ from a memoized address in one place are decoded afresh — or
// refused — never answered from the memo.
TEST(Address, R_ADDR_5_WireArchiveMemoKeepsBytesAndValues) {
  AddressGenerator gen(7);
  std::vector<PortAddr> ports;
  for (int i = 0; i < 12; ++i) ports.push_back(PortAddr{PortId{gen.actor_id(), gen.port()}, gen.location()});
  ports.push_back(PortAddr{});  // the empty address an unset PortRef holds
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < ports.size(); ++i) {
      for (int repeat = 0; repeat < 3; ++repeat) {  // repeats hit the memo, the cycle evicts it
        const PortAddr& port = ports[(i * 5 + round) % ports.size()];
        const std::string bytes = must(wire::encode(port));
        std::ostringstream portable;
        {
          cereal::PortableBinaryOutputArchive out(portable);
          out(port.id, port.location);
        }
        ASSERT_EQ(bytes, portable.str()) << port;
        ASSERT_EQ(must(wire::decode<PortAddr>(bytes)), port);
      }
    }
  }

  const PortAddr known = must(PortAddr::parse("pinger.procone:h000000000000002a@ipc:///tmp/x.sock"));
  const std::string bytes = must(wire::encode(known));
  ASSERT_EQ(must(wire::decode<PortAddr>(bytes)), known);  // now memoized
  std::string other = bytes;
  other[other.rfind('x')] = 'y';  // the same length, another socket
  EXPECT_EQ(must(wire::decode<PortAddr>(other)),
            must(PortAddr::parse("pinger.procone:h000000000000002a@ipc:///tmp/y.sock")));
  std::string bad = bytes;
  bad[bad.find("ipc")] = 'x';  // no such transport
  EXPECT_FALSE(wire::decode<PortAddr>(bad).ok());
  EXPECT_FALSE(wire::decode<PortAddr>(bytes.substr(0, bytes.size() - 1)).ok());
  EXPECT_EQ(must(wire::decode<PortAddr>(bytes)), known);
}

// Every location is interned, so equality and the hash are the representation's; the default
// location and the interned `inproc://0` are one.
TEST(Location, R_ADDR_4_EqualLocationsHashAlikeHoweverMade) {
  EXPECT_EQ(hash_of(Location()), hash_of(Location::addr(ChannelAddr::inproc(0))));
  EXPECT_EQ(hash_of(Location()), hash_of(must(Location::parse("inproc://0"))));
  const Location via = must(Location::parse("a.b.tcp://127.0.0.1:4000"));
  EXPECT_EQ(via.inner(), must(Location::parse("b.tcp://127.0.0.1:4000")));
  EXPECT_EQ(hash_of(via.inner()), hash_of(must(Location::parse("b.tcp://127.0.0.1:4000"))));
  EXPECT_EQ(via.inner(), via.inner());  // the second is the memoized one
  EXPECT_EQ(via.inner().inner(), must(Location::parse("tcp://127.0.0.1:4000")));
  EXPECT_NE(via.inner(), via);
  EXPECT_NE(hash_of(via.inner()), hash_of(via));
}

}  // namespace
}  // namespace postal::runtime
