// Tests for text fields (wire/text_field.h): the bytes are cereal's own for a std::string, so
// payloads written before and after are the same; the wire archive reads them in place.
#include "postal/wire/text_field.h"

#include <cstdint>
#include <sstream>
#include <string>

#include <cereal/archives/binary.hpp>
#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/string.hpp>
#include <gtest/gtest.h>

#include "postal/wire/wire_archive.h"

namespace postal::wire {
namespace {

constexpr std::string_view kText = "orders-7@ipc:///tmp/shop.sock/prices";  // past the SSO

TEST(TextField, WritesTheBytesCerealWritesForAString) {
  std::string as_string;
  std::string as_text;
  {
    WireOutputArchive out(as_string);
    out(std::string(kText), uint32_t{7});
  }
  {
    WireOutputArchive out(as_text);
    save_text(out, kText);
    out(uint32_t{7});
  }
  EXPECT_EQ(as_text, as_string);

  std::ostringstream binary_string;
  std::ostringstream binary_text;
  {
    cereal::BinaryOutputArchive out(binary_string);
    out(std::string(kText));
  }
  {
    cereal::BinaryOutputArchive out(binary_text);
    save_text(out, kText);
  }
  EXPECT_EQ(binary_text.str(), binary_string.str());
}

TEST(TextField, TheWireArchiveReadsTheTextInPlaceOtherArchivesThroughABuffer) {
  std::string bytes;
  {
    WireOutputArchive out(bytes);
    out(std::string(kText), uint32_t{7});
  }
  WireInputArchive in(bytes);
  const std::string_view text = load_text(in);
  EXPECT_EQ(text, kText);
  EXPECT_GE(text.data(), bytes.data());  // a view of the input, not a copy
  EXPECT_LE(text.data() + text.size(), bytes.data() + bytes.size());
  uint32_t after = 0;
  in(after);
  EXPECT_EQ(after, 7u);

  std::stringstream binary;
  {
    cereal::BinaryOutputArchive out(binary);
    out(std::string(kText));
  }
  cereal::BinaryInputArchive binary_in(binary);
  EXPECT_EQ(load_text(binary_in), kText);
}

TEST(TextField, R_FLOW_4_ATextLongerThanTheBytesLeftIsRefused) {
  std::string bytes;
  {
    WireOutputArchive out(bytes);
    out(std::string(kText));
  }
  bytes.resize(bytes.size() - 1);  // one byte short
  WireInputArchive in(bytes);
  EXPECT_THROW(load_text(in), cereal::Exception);
}

// The wire archive's own bound, under the size tag's: a view is never taken past the input.
TEST(TextField, R_FLOW_4_TakeRefusesMoreThanTheBytesLeft) {
  std::string bytes;
  {
    WireOutputArchive out(bytes);
    out(uint32_t{7});
  }
  WireInputArchive in(bytes);
  EXPECT_THROW(in.take(bytes.size()), cereal::Exception);  // the byte-order mark was read
  EXPECT_EQ(in.take(4).size(), 4u);
  EXPECT_THROW(in.take(1), cereal::Exception);
}

// The output archive writes through a cursor into room it keeps past its bytes: what the string
// held before stays, and when the archive ends the string holds exactly the value's bytes after
// it — small fields, a large one (appended with slack), and small ones after that — the same
// bytes cereal's portable archive writes.
TEST(TextField, TheWireArchiveAppendsExactlyTheValueAfterWhatTheStringHeld) {
  const std::string large(5000, 'L');
  std::string bytes = "prefix";
  {
    WireOutputArchive out(bytes);
    out(uint8_t{1}, std::string(kText), large, uint64_t{42});
    for (int i = 0; i < 100; ++i) out(uint32_t(i));  // past the first room
  }
  std::ostringstream portable;
  {
    cereal::PortableBinaryOutputArchive out(portable);
    out(uint8_t{1}, std::string(kText), large, uint64_t{42});
    for (int i = 0; i < 100; ++i) out(uint32_t(i));
  }
  EXPECT_EQ(bytes, "prefix" + portable.str());
}

}  // namespace
}  // namespace postal::wire
