#include "launcher/launch_spec.h"

#include "gtest/gtest.h"

namespace cagent::launcher {
namespace {

TEST(LaunchSpecTest, DefaultsAreValid) {
  const LaunchSpec spec = DefaultLaunchSpec("/tmp", {"true"});
  EXPECT_TRUE(ValidateLaunchSpec(spec).ok());
  EXPECT_EQ(spec.cwd, "/tmp");
  EXPECT_TRUE(spec.disabled.Empty());
}

TEST(LaunchSpecTest, RejectsUnsafeOrMalformedSpecs) {
  auto with = [](auto mutate) {
    LaunchSpec spec = DefaultLaunchSpec("/srv/ws", {"true"});
    mutate(spec);
    return ValidateLaunchSpec(spec);
  };
  EXPECT_FALSE(with([](LaunchSpec& s) { s.argv.clear(); }).ok());
  EXPECT_FALSE(with([](LaunchSpec& s) { s.workspace = "/"; }).ok());
  EXPECT_FALSE(with([](LaunchSpec& s) { s.workspace = "relative/dir"; }).ok());
  EXPECT_FALSE(with([](LaunchSpec& s) { s.workspace = "/srv/../etc"; }).ok());
  EXPECT_FALSE(with([](LaunchSpec& s) { s.read_only_paths.push_back("/usr/./lib"); }).ok());
  EXPECT_FALSE(with([](LaunchSpec& s) { s.hidden_paths.push_back("/"); }).ok());
  EXPECT_FALSE(with([](LaunchSpec& s) { s.env_set.push_back({"A=B", "c"}); }).ok());
  EXPECT_FALSE(with([](LaunchSpec& s) { s.keep_fds.push_back(1); }).ok());
  EXPECT_FALSE(with([](LaunchSpec& s) { s.keep_fds.assign(40, 5); }).ok());
  EXPECT_EQ(with([](LaunchSpec& s) { s.workspace = "/"; }).error().Message(),
            "invalid launch spec: workspace must be an absolute, normalised path other than / "
            "(got '/')");
}

TEST(LaunchSpecTest, LayerNamesRoundTrip) {
  for (size_t i = 0; i < static_cast<size_t>(Layer::kCount); ++i) {
    const auto l = static_cast<Layer>(i);
    EXPECT_EQ(*ParseLayer(LayerName(l)), l);
  }
  const auto bad = ParseLayer("seccomp-but-misspelt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().Message().find("valid layers: fs, pid, net"), std::string::npos);
}

TEST(LaunchSpecTest, CanonicalDirectory) {
  EXPECT_EQ(*CanonicalDirectory("/usr/../usr/bin/.."), "/usr");
  EXPECT_FALSE(CanonicalDirectory("/nonexistent-xyz").ok());
  EXPECT_EQ(CanonicalDirectory("/etc/passwd").error().err, ENOTDIR);
}

}  // namespace
}  // namespace cagent::launcher
