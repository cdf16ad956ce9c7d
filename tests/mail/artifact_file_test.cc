// read_artifact_file (M-STORE-1): the one guarded reader of host-state JSON artifacts. Symlinks,
// FIFOs and other non-regular files are refused without blocking; a file over 64 MiB is refused
// by its size, before a byte is read.
#include "postal/mail/artifact_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>

#include <gtest/gtest.h>

#include "postal/mail/mail_errors.h"
#include "support/scratch_dir.h"

namespace postal::mail {
namespace {

namespace fs = std::filesystem;

class ArtifactFile : public ::testing::Test {
 protected:
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir_.path() / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  test_support::ScratchDir dir_;
};

TEST_F(ArtifactFile, M_STORE_1_ARegularFileIsReadWhole) {
  const std::string text =
      std::string("{\"a\": 1}\n") + std::string(10000, ' ') + std::string("\0end", 4);
  absl::StatusOr<std::string> got = read_artifact_file(write("a.json", text), "an artifact");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, text);
  EXPECT_EQ(*read_artifact_file(write("empty.json", ""), "an artifact"), "");
}

TEST_F(ArtifactFile, M_STORE_1_ASymlinkIsRefused) {
  const fs::path target = write("real.json", "{}");
  const fs::path link = dir_.path() / "link.json";
  fs::create_symlink(target, link);
  absl::StatusOr<std::string> got = read_artifact_file(link, "a mailbox export");
  EXPECT_TRUE(IsIoFailed(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("symlink"), std::string_view::npos) << got.status();
  EXPECT_NE(got.status().message().find("a mailbox export"), std::string_view::npos);
}

TEST_F(ArtifactFile, M_STORE_1_AFifoIsRefusedWithoutBlocking) {
  const fs::path fifo = dir_.path() / "pipe.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // No writer ever opens it: a plain open would block forever.
  std::future<absl::StatusOr<std::string>> read =
      std::async(std::launch::async, [&] { return read_artifact_file(fifo, "an artifact"); });
  if (read.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    const int unblock = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // let the reader go
    read.wait();
    if (unblock >= 0) ::close(unblock);
    FAIL() << "reading a FIFO blocked";
  }
  absl::StatusOr<std::string> got = read.get();
  EXPECT_TRUE(IsIoFailed(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("a FIFO"), std::string_view::npos) << got.status();
}

TEST_F(ArtifactFile, M_STORE_1_ADirectoryIsRefused) {
  absl::StatusOr<std::string> got = read_artifact_file(dir_.path(), "an artifact");
  EXPECT_TRUE(IsIoFailed(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("a directory"), std::string_view::npos) << got.status();
}

TEST_F(ArtifactFile, M_STORE_1_AFileOverSixtyFourMiBIsRefusedByItsSize) {
  EXPECT_EQ(kMaxArtifactBytes, 67'108'864u);
  // Sparse: 64 MiB + 1 costs no disk and must cost no read either.
  const fs::path big = dir_.path() / "big.json";
  { std::ofstream(big) << ""; }
  fs::resize_file(big, kMaxArtifactBytes + 1);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> got = read_artifact_file(big, "a mailbox export");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_TRUE(IsIoFailed(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("67108865 bytes, over the ceiling of 67108864"),
            std::string_view::npos)
      << got.status();
  // Exactly the ceiling is read.
  fs::resize_file(big, kMaxArtifactBytes);
  absl::StatusOr<std::string> at_limit = read_artifact_file(big, "a mailbox export");
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_EQ(at_limit->size(), kMaxArtifactBytes);
}

TEST_F(ArtifactFile, M_STORE_1_AMissingFileSaysSo) {
  absl::StatusOr<std::string> got = read_artifact_file(dir_.path() / "nope.json", "an artifact");
  EXPECT_TRUE(IsIoFailed(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("No such file"), std::string_view::npos) << got.status();
}

}  // namespace
}  // namespace postal::mail
