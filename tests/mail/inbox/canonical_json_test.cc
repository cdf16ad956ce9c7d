// M-INBOX-2: the canonical JSON form and the fingerprint — what is one payload, what is two,
// and what is refused.
#include "postal/mail/canonical_json.h"

#include <string>

#include <gtest/gtest.h>

#include "inbox/sha256.h"
#include "postal/mail/inbox_errors.h"
#include "postal/mail/inbox_fingerprint.h"

namespace postal::mail {
namespace {

std::string canon(std::string_view json) {
  absl::StatusOr<std::string> c = canonical_json(json);
  EXPECT_TRUE(c.ok()) << json << ": " << c.status();
  return c.ok() ? *c : std::string();
}

std::string fp(std::string_view json, std::string_view type = "order.created", int64_t v = 1) {
  absl::StatusOr<std::string> f = inbox_fingerprint(type, v, json);
  EXPECT_TRUE(f.ok()) << json << ": " << f.status();
  return f.ok() ? *f : std::string();
}

void expect_rejected(std::string_view json, std::string_view why, const JsonLimits& limits = {}) {
  absl::StatusOr<std::string> c = canonical_json(json, limits);
  ASSERT_FALSE(c.ok()) << "accepted " << json << " as " << *c;
  EXPECT_TRUE(IsInvalidPayload(c.status())) << c.status();
  EXPECT_NE(std::string(c.status().message()).find(why), std::string::npos) << c.status();
}

TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(inbox::sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(inbox::sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(inbox::sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(CanonicalJson, M_INBOX_2_ObjectKeyOrderIsIgnored) {
  EXPECT_EQ(canon(R"({"b": 1, "a": {"y": [1], "x": null}})"), R"({"a":{"x":null,"y":[1]},"b":1})");
  EXPECT_EQ(fp(R"({"orderId": 7, "tenant": "t"})"), fp(R"({ "tenant":"t","orderId":7 })"));
}

TEST(CanonicalJson, M_INBOX_2_ArrayOrderIsKept) {
  EXPECT_EQ(canon("[2, 1]"), "[2,1]");
  EXPECT_NE(fp("[1,2]"), fp("[2,1]"));
}

TEST(CanonicalJson, M_INBOX_2_KeysSortByUtf16CodeUnitsNotUtf8Bytes) {
  // U+FF61 is EF BD A1 in UTF-8 and 0xFF61 in UTF-16; U+1F600 is F0 9F 98 80 and D83D DE00.
  // By UTF-8 bytes the emoji sorts last; by UTF-16 code units (RFC 8785) it sorts first.
  EXPECT_EQ(canon(R"({"｡": 1, "😀": 2})"), R"({"😀":2,"｡":1})");
  EXPECT_EQ(canon(R"({"b":1,"a":2,"A":3,"":4})"), R"({"":4,"A":3,"a":2,"b":1})");
}

TEST(CanonicalJson, M_INBOX_2_NumbersHaveOneForm) {
  EXPECT_EQ(canon("1.0"), "1");
  EXPECT_EQ(canon("10e-1"), "1");
  EXPECT_EQ(canon("1E2"), "100");
  EXPECT_EQ(canon("-0"), "0");
  EXPECT_EQ(canon("-0.0e7"), "0");
  EXPECT_EQ(canon("0.5"), "0.5");
  EXPECT_EQ(canon("-12.50"), "-12.5");
  EXPECT_EQ(canon("0.000001"), "0.000001");
  EXPECT_EQ(canon("1e-7"), "1e-7");
  EXPECT_EQ(canon("15e-8"), "1.5e-7");
  EXPECT_EQ(canon("1e21"), "1e+21");
  EXPECT_EQ(canon("123456789012345678901"), "123456789012345678901");
  EXPECT_EQ(fp(R"({"n":1})"), fp(R"({"n":1.0})"));
  EXPECT_EQ(fp(R"({"n":0})"), fp(R"({"n":-0})"));
  EXPECT_NE(fp(R"({"n":1})"), fp(R"({"n":"1"})"));
  EXPECT_NE(fp(R"({"n":0.1})"), fp(R"({"n":0.10000000000000001})"));
}

TEST(CanonicalJson, M_INBOX_2_IntegersBeyondTwoToThe53AreKeptExact) {
  // As doubles, 2^53 and 2^53+1 are the same number: RFC 8785 would give them one fingerprint.
  EXPECT_EQ(canon("9007199254740993"), "9007199254740993");
  EXPECT_NE(fp("9007199254740992"), fp("9007199254740993"));
  EXPECT_NE(fp("18446744073709551616"), fp("18446744073709551617"));
}

TEST(CanonicalJson, M_INBOX_2_UnicodeEscapesEqualLiteralCharacters) {
  EXPECT_EQ(canon(R"("\u00e9")"), "\"é\"");
  EXPECT_EQ(canon(R"("\ud83d\ude00")"), "\"😀\"");
  EXPECT_EQ(canon(R"("\/\u0041\n\u0001")"), R"("/A\n\u0001")");
  EXPECT_EQ(fp(R"({"name":"caf\u00e9"})"), fp(R"({"name":"café"})"));
  EXPECT_EQ(fp(R"({"\u0061":1})"), fp(R"({"a":1})"));
}

TEST(CanonicalJson, M_INBOX_2_TypeAndSchemaVersionAreInTheFingerprint) {
  EXPECT_NE(fp("{}", "order.created", 1), fp("{}", "order.created", 2));
  EXPECT_NE(fp("{}", "order.created", 1), fp("{}", "order.updated", 1));
  // The framing keeps the type's end unambiguous.
  EXPECT_NE(fingerprint_canonical("a", 1, "1"), fingerprint_canonical("a\n1", 1, ""));
}

TEST(CanonicalJson, M_INBOX_2_DuplicateKeysAreRejected) {
  expect_rejected(R"({"a":1,"a":1})", "duplicate object key");
  expect_rejected(R"({"a":1,"\u0061":2})", "duplicate object key");
}

TEST(CanonicalJson, M_INBOX_2_LoneSurrogatesAreRejected) {
  expect_rejected(R"("\ud800")", "lone high surrogate");
  expect_rejected(R"("\ud800\u0041")", "lone high surrogate");
  expect_rejected(R"("\udc00")", "lone low surrogate");
  expect_rejected("\"\xed\xa0\x80\"", "invalid UTF-8");  // a surrogate encoded in UTF-8
  expect_rejected("\"\xc0\xaf\"", "invalid UTF-8");      // an overlong '/'
}

TEST(CanonicalJson, M_INBOX_2_NonFiniteNumbersAreRejected) {
  expect_rejected("NaN", "non-finite");
  expect_rejected("[Infinity]", "non-finite");
  expect_rejected("-Infinity", "non-finite");
  expect_rejected("1e309", "finite double");
  expect_rejected("1e-400", "finite double");
  expect_rejected("1e99999999999999999999", "finite double");
}

TEST(CanonicalJson, M_INBOX_2_ExcessiveDepthIsRejected) {
  const JsonLimits limits{.max_depth = 8};
  EXPECT_TRUE(canonical_json(std::string(8, '[') + std::string(8, ']'), limits).ok());
  expect_rejected(std::string(9, '[') + std::string(9, ']'), "nesting deeper than 8", limits);
  expect_rejected(std::string(100000, '['), "nesting deeper than 64");
}

TEST(CanonicalJson, M_INBOX_2_OversizePayloadsAreRejectedNotTruncated) {
  const JsonLimits limits{.max_bytes = 16};
  EXPECT_TRUE(canonical_json(R"("0123456789abcd")", limits).ok());  // 16 bytes
  expect_rejected(R"("0123456789abcde")", "more than the limit of 16", limits);
}

TEST(CanonicalJson, M_INBOX_2_NonJsonIsRejected) {
  for (const char* bad : {"", " ", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "+1", "'a'", "[1] x",
                          "{a:1}", "\"\t\"", "\xef\xbb\xbf{}", "tru", "[1 2]", "\"\\x\""}) {
    EXPECT_FALSE(canonical_json(bad).ok()) << "accepted: " << bad;
  }
}

TEST(CanonicalJson, CanonicalFormIsAFixedPoint) {
  for (const char* json : {R"({"b":[1.50,{"d":-0,"c":"\u00e9"}],"a":1e21})", "[1e-7,0.1,true]"}) {
    const std::string once = canon(json);
    EXPECT_EQ(canon(once), once);
  }
}

}  // namespace
}  // namespace postal::mail
