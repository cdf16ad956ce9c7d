#include "gtest/gtest.h"
#include "postal/postal.h"

TEST(Smoke, Builds) { SUCCEED(); }
