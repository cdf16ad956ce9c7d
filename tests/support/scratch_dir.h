// A fresh folder of its own under /tmp for each test, removed afterwards.
//
// `ScratchDirTest` is a fixture; `ScratchDir` is the same folder for fixtures that derive from
// something else (parameterized suites). The folder is named after the process and the test
// ('/' of a parameterized name becomes '_'), so parallel test binaries never share one.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace postal::test_support {

class ScratchDir {
 public:
  ScratchDir() {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    path_ = std::filesystem::path("/tmp") / ("postal-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = scratch_.path(); }
  ScratchDir scratch_;
  std::filesystem::path dir_;
};

}  // namespace postal::test_support
