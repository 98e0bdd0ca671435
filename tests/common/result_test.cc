#include "common/result.h"

#include "gtest/gtest.h"

namespace cagent {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return PlainError("halve " + std::to_string(x), "odd number");
  return x / 2;
}

TEST(ResultTest, CarriesValueOrError) {
  auto ok = Half(4);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 2);
  auto bad = Half(3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().Message(), "halve 3: odd number");
}

TEST(ResultTest, ContextIsPrefixedOutermostFirst) {
  Result<int> r = ErrnoError("open /x", ENOENT);
  r = std::move(r).Context("read config");
  r = std::move(r).Context("start");
  EXPECT_EQ(r.error().Message(), "start: read config: open /x: No such file or directory");
}

TEST(ResultTest, ErrnoWithDetail) {
  Error e = ErrnoError("clone", EPERM);
  e.detail = "user namespaces disabled";
  EXPECT_EQ(e.Message(), "clone: Operation not permitted (user namespaces disabled)");
}

}  // namespace
}  // namespace cagent
