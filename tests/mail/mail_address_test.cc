// MailAddress: both spellings, canonical form, identity, rejection (M-ADDR-1, M-ADDR-2, M-ADDR-3).
#include "postal/mail/mail_address.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

std::string canonical(std::string_view text) {
  absl::StatusOr<MailAddress> a = MailAddress::parse(text);
  EXPECT_TRUE(a.ok()) << text << ": " << a.status();
  return a.ok() ? a->canonical() : "";
}

TEST(MailAddress, M_ADDR_1_BothSpellingsNameTheSameMailbox) {
  absl::StatusOr<MailAddress> opaque = MailAddress::parse("mem:sales@example.com/inbox");
  absl::StatusOr<MailAddress> slashes = MailAddress::parse("mem://sales@example.com/inbox");
  ASSERT_TRUE(opaque.ok() && slashes.ok());
  EXPECT_EQ(*opaque, *slashes);
  EXPECT_EQ(opaque->canonical(), "mem://sales@example.com/inbox");
  EXPECT_EQ(opaque->scheme(), "mem");
  EXPECT_EQ(opaque->user(), "sales");
  EXPECT_EQ(opaque->host(), "example.com");
  EXPECT_EQ(opaque->path(), "/inbox");
}

// The 2,048-byte cap holds for the canonical form, which adds "//" to the opaque spelling: what
// parse accepts parses back from its canonical form, and nothing longer is accepted.
TEST(MailAddress, M_ADDR_2_TheLengthCapHoldsForTheCanonicalForm) {
  const std::string head = "mem:u@h/";
  const std::string at_cap(MailAddress::kMaxLength - head.size(), 'p');
  absl::StatusOr<MailAddress> too_long = MailAddress::parse(head + at_cap);  // 2,048 → 2,050
  EXPECT_TRUE(IsInvalidMailboxAddress(too_long.status())) << too_long.status();
  EXPECT_NE(too_long.status().message().find("canonical form"), absl::string_view::npos)
      << too_long.status();
  const std::string fits = head + at_cap.substr(2);  // 2,046 bytes, canonical 2,048
  absl::StatusOr<MailAddress> a = MailAddress::parse(fits);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->canonical().size(), MailAddress::kMaxLength);
  absl::StatusOr<MailAddress> again = MailAddress::parse(a->canonical());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *a);
  EXPECT_TRUE(IsInvalidMailboxAddress(a->with_path_suffix("_dlq").status()));
}

TEST(MailAddress, M_ADDR_1_SchemeAndHostLowercasedUserAndPathKept) {
  EXPECT_EQ(canonical("MeM:Sales@Example.COM/InBox"), "mem://Sales@example.com/InBox");
}

TEST(MailAddress, M_ADDR_1_PercentEncodingNormalized) {
  EXPECT_EQ(canonical("mem:%7euser@ex%41mple.com/a%2fb"), "mem://~user@example.com/a%2Fb");
  EXPECT_EQ(canonical("mem:u@h/%e6%ad%bb"), "mem://u@h/%E6%AD%BB");
  EXPECT_EQ(canonical("mem:u@h/%41%2D%5f%7E"), "mem://u@h/A-_~");
  EXPECT_EQ(canonical("mem:u%40x@h"), "mem://u%40x@h");  // a reserved character stays encoded
}

TEST(MailAddress, M_ADDR_1_DotSegmentsRemoved) {
  EXPECT_EQ(canonical("mem:u@h/a/./b/../c"), "mem://u@h/a/c");
  EXPECT_EQ(canonical("mem:u@h/../../x"), "mem://u@h/x");
  EXPECT_EQ(canonical("mem:u@h/a/%2E%2e/b"), "mem://u@h/b");  // decoded first, then removed
  EXPECT_EQ(canonical("mem:u@h/a/b/.."), "mem://u@h/a/");
  EXPECT_EQ(canonical("mem:u@h/..."), "mem://u@h/...");  // not a dot segment
}

TEST(MailAddress, M_ADDR_1_EmptyPathAndSlashAreOneMailboxTrailingSlashIsAnother) {
  EXPECT_EQ(canonical("mem:u@h"), "mem://u@h");
  EXPECT_EQ(canonical("mem:u@h/"), "mem://u@h");
  EXPECT_EQ(canonical("mem:u@h/a/.."), "mem://u@h");
  EXPECT_NE(canonical("mem:u@h/inbox/"), canonical("mem:u@h/inbox"));
}

TEST(MailAddress, M_ADDR_1_CanonicalFormParsesBackEqual) {
  for (const char* text : {"mem:u@h", "post://a.b@c-d.e/x/y:z@w", "x+y.z-1:~u@h/%20"}) {
    absl::StatusOr<MailAddress> a = MailAddress::parse(text);
    ASSERT_TRUE(a.ok()) << text << ": " << a.status();
    absl::StatusOr<MailAddress> b = MailAddress::parse(a->canonical());
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(*a, *b);
    EXPECT_EQ(a->canonical(), b->canonical());
  }
}

TEST(MailAddress, M_ADDR_2_QueryAndFragmentRejectedWithWhatToWrite) {
  for (const char* text : {"mem:sales@example.com/inbox?thread=1", "mem:sales@example.com?x",
                           "mem:sales@example.com/inbox#top", "mem://a@b/c?"}) {
    absl::StatusOr<MailAddress> a = MailAddress::parse(text);
    ASSERT_FALSE(a.ok()) << text;
    EXPECT_TRUE(IsInvalidMailboxAddress(a.status())) << a.status();
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(a.status().message(), "InvalidMailboxAddress:")) << a.status();
    EXPECT_TRUE(absl::StrContains(a.status().message(), "in the path")) << a.status();
    EXPECT_TRUE(absl::StrContains(a.status().message(), text)) << a.status();
  }
}

TEST(MailAddress, M_ADDR_2_MalformedInputRejectedNamingTheProblem) {
  struct Case {
    std::string text;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"", "empty"},
      {"mem", "scheme is missing"},
      {":u@h", "scheme is missing"},
      {"1mem:u@h", "does not start with a letter"},
      {"m_m:u@h", "not allowed in the scheme"},
      {"mem:uh", "'@'"},
      {"mem://", "'@'"},
      {"mem:@h", "user is empty"},
      {"mem:u@", "host is empty"},
      {"mem:u@h@i", "more than one '@'"},
      {"mem:u@h:25", "port"},
      {"mem:u:p@h", "credentials"},
      {"mem:u@[::1]", "IP literals"},
      {"mem:u@h/a b", "a space"},
      {"mem:u@h/\xC3\xA9", "byte 0xC3"},
      {"mem:u@h/a\"b", "'\"'"},
      {"mem:u@h/%G1", "bad percent-encoding"},
      {"mem:u@h/%4", "truncated percent-encoding"},
      {"mem:u@h/" + std::string(3000, 'a'), "bytes long"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<MailAddress> a = MailAddress::parse(c.text);
    ASSERT_FALSE(a.ok()) << c.text;
    EXPECT_TRUE(IsInvalidMailboxAddress(a.status())) << a.status();
    EXPECT_TRUE(absl::StrContains(a.status().message(), c.says))
        << "'" << c.text << "' → " << a.status() << " should say " << c.says;
  }
}

TEST(MailAddress, M_ADDR_3_IdentityIsUserAtHostAcrossSchemes) {
  absl::StatusOr<MailAddress> mem = MailAddress::parse("mem:api@myservice.com/utils/greeter");
  absl::StatusOr<MailAddress> post = MailAddress::parse("POST://api@MyService.com/utils/greeter");
  ASSERT_TRUE(mem.ok() && post.ok());
  EXPECT_EQ(mem->mailbox(), "api@myservice.com");
  EXPECT_EQ(mem->identity(), "api@myservice.com/utils/greeter");
  EXPECT_TRUE(mem->same_mailbox(*post));
  EXPECT_NE(*mem, *post);  // the scheme picks the provider: two routes to one mailbox
  EXPECT_FALSE(mem->same_mailbox(*MailAddress::parse("mem:api@myservice.com/other")));
}

TEST(MailAddress, WithPathSuffixAppendsOnlyCanonicalSuffixes) {
  absl::StatusOr<MailAddress> a = MailAddress::parse("mem:u@h/inbox");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->with_path_suffix("_dlq")->canonical(), "mem://u@h/inbox_dlq");
  EXPECT_EQ(a->with_path_suffix(".dlq")->canonical(), "mem://u@h/inbox.dlq");
  EXPECT_EQ(a->with_path_suffix("_%E6%AD%BB")->canonical(), "mem://u@h/inbox_%E6%AD%BB");
  EXPECT_EQ(MailAddress::parse("mem:u@h")->with_path_suffix("_dlq")->canonical(), "mem://u@h/_dlq");
  for (const char* bad :
       {"", "_\xE6\xAD\xBB", "_%e6", "%5Fdlq", "/dlq", "..", ".", "_dlq?x", "<dlq>", "_{x}"}) {
    absl::StatusOr<MailAddress> r = a->with_path_suffix(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' gave " << (r.ok() ? r->canonical() : "");
    EXPECT_TRUE(IsInvalidMailboxAddress(r.status())) << r.status();
  }
}

// ---- randomized round trip ----------------------------------------------------------------

// Builds one address two ways: a noisy spelling (random case where it does not matter, random
// percent-encoding of unreserved characters, dot segments, either form) and, independently, the
// canonical text the noisy spelling must normalize to.
class AddressGenerator {
 public:
  explicit AddressGenerator(uint32_t seed) : rng_(seed) {}

  struct Sample {
    std::string noisy, other_form, expected, identity;
  };

  Sample next() {
    Sample s;
    std::string scheme = pick_scheme();
    auto [user_in, user_out] = component(1 + below(8), /*host=*/false, /*path=*/false);
    auto [host_in, host_out] = component(1 + below(12), /*host=*/true, /*path=*/false);
    std::string path_in, path_out;
    size_t segments = below(4);
    for (size_t i = 0; i < segments; ++i) {
      if (coin()) path_in += coin() ? "/." : (coin() ? "/%2E" : "/junk/..");  // removed noise
      auto [seg_in, seg_out] = component(1 + below(6), false, true);
      path_in += "/" + seg_in;
      path_out += "/" + seg_out;
    }
    if (segments > 0 && below(4) == 0) {
      path_in += "/";
      path_out += "/";
    }
    std::string mixed_scheme = random_case(scheme);
    bool opaque = coin();
    s.noisy = absl::StrCat(mixed_scheme, opaque ? ":" : "://", user_in, "@", host_in, path_in);
    s.other_form = absl::StrCat(scheme, opaque ? "://" : ":", user_in, "@", host_in, path_in);
    s.expected = absl::StrCat(scheme, "://", user_out, "@", host_out, path_out);
    s.identity = absl::StrCat(user_out, "@", host_out, path_out);
    return s;
  }

 private:
  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool coin() { return below(2) == 0; }
  std::string random_case(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
      if (c >= 'a' && c <= 'z' && coin()) c = static_cast<char>(c - 'a' + 'A');
    }
    return out;
  }
  std::string pick_scheme() {
    static constexpr std::string_view kTail = "abcdefghijklmnopqrstuvwxyz0123456789+-.";
    std::string s(1, static_cast<char>('a' + below(26)));
    for (size_t i = below(6); i > 0; --i) s.push_back(kTail[below(kTail.size())]);
    return s;
  }
  std::string pct(unsigned char b) {
    return coin() ? absl::StrFormat("%%%02X", b) : absl::StrFormat("%%%02x", b);
  }
  // One component: returns {noisy spelling, canonical spelling}.
  std::pair<std::string, std::string> component(size_t n, bool host, bool path) {
    static constexpr std::string_view kUnreserved =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~";
    static constexpr std::string_view kSubDelims = "!$&'()*+,;=";
    std::string in, out;
    for (size_t i = 0; i < n; ++i) {
      switch (below(path ? 4 : 3)) {
        case 0: {  // unreserved: literal or encoded, canonical literal
          char c = kUnreserved[below(kUnreserved.size())];
          char canon = host && c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
          in += coin() ? std::string(1, c) : pct(static_cast<unsigned char>(c));
          out += canon;
          break;
        }
        case 1: {  // sub-delimiter, literal
          char c = kSubDelims[below(kSubDelims.size())];
          in += c;
          out += c;
          break;
        }
        case 2: {  // a byte that must stay encoded: canonical uppercase hex
          static constexpr std::string_view kReserved = " /?#[]@:%\"<>\\^`{|}";
          unsigned char b = coin() ? static_cast<unsigned char>(kReserved[below(kReserved.size())])
                                   : static_cast<unsigned char>(0x80 + below(0x80));
          in += pct(b);
          out += absl::StrFormat("%%%02X", b);
          break;
        }
        default: {  // ':' and '@' are literal in a path
          char c = coin() ? ':' : '@';
          in += c;
          out += c;
        }
      }
    }
    // A segment made only of dots would be a dot segment: keep the sample unambiguous.
    if (path && out.find_first_not_of('.') == std::string::npos) {
      in += "x";
      out += "x";
    }
    return {in, out};
  }

  std::mt19937 rng_;
};

TEST(MailAddress, M_ADDR_1_RandomizedRoundTrip) {
  uint32_t seed = std::random_device{}();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  AddressGenerator gen(seed);
  for (int i = 0; i < 5000; ++i) {
    AddressGenerator::Sample s = gen.next();
    absl::StatusOr<MailAddress> a = MailAddress::parse(s.noisy);
    ASSERT_TRUE(a.ok()) << s.noisy << ": " << a.status();
    ASSERT_EQ(a->canonical(), s.expected) << "from " << s.noisy;
    EXPECT_EQ(a->identity(), s.identity);
    absl::StatusOr<MailAddress> again = MailAddress::parse(a->canonical());
    ASSERT_TRUE(again.ok()) << a->canonical() << ": " << again.status();
    ASSERT_EQ(*again, *a);
    absl::StatusOr<MailAddress> other = MailAddress::parse(s.other_form);
    ASSERT_TRUE(other.ok()) << s.other_form;
    ASSERT_EQ(*other, *a) << s.other_form << " vs " << s.noisy;
    ASSERT_FALSE(MailAddress::parse(s.noisy + "?q").ok());
    ASSERT_FALSE(MailAddress::parse(s.noisy + "#f").ok());
  }
}

TEST(MailAddress, M_ADDR_2_RandomBytesNeverCrash) {
  std::mt19937 rng(42);
  for (int i = 0; i < 20000; ++i) {
    std::string text = "mem:";
    for (size_t n = rng() % 24; n > 0; --n) text.push_back(static_cast<char>(rng() % 256));
    absl::StatusOr<MailAddress> a = MailAddress::parse(text);
    if (a.ok()) {
      EXPECT_EQ(*MailAddress::parse(a->canonical()), *a) << text;
    } else {
      EXPECT_TRUE(IsInvalidMailboxAddress(a.status())) << a.status();
    }
  }
}

}  // namespace
}  // namespace postal::mail
