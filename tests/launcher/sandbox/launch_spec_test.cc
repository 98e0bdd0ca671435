#include "launcher/sandbox/launch_spec.h"

#include "gtest/gtest.h"

namespace cagent::launcher {
namespace {

TEST(LaunchSpecTest, DefaultsAreValid) {
  const LaunchSpec spec = DefaultLaunchSpec("/tmp", {"true"});
  EXPECT_TRUE(ValidateLaunchSpec(spec).ok());
  EXPECT_EQ(spec.cwd, "/tmp");
  EXPECT_TRUE(spec.disabled.Empty());
}

// A refused spec is the caller's mistake: Error::Code::kInvalidInput (exit status usage).
void ExpectInvalid(const Status& s) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Error::Code::kInvalidInput) << s.error().Message();
}

TEST(LaunchSpecTest, RejectsUnsafeOrMalformedSpecs) {
  auto with = [](auto mutate) {
    LaunchSpec spec = DefaultLaunchSpec("/srv/ws", {"true"});
    mutate(spec);
    return ValidateLaunchSpec(spec);
  };
  ExpectInvalid(with([](LaunchSpec& s) { s.argv.clear(); }));
  ExpectInvalid(with([](LaunchSpec& s) { s.workspace = "/"; }));
  ExpectInvalid(with([](LaunchSpec& s) { s.workspace = "relative/dir"; }));
  ExpectInvalid(with([](LaunchSpec& s) { s.workspace = "/srv/../etc"; }));
  ExpectInvalid(with([](LaunchSpec& s) { s.read_only_paths.push_back("/usr/./lib"); }));
  ExpectInvalid(with([](LaunchSpec& s) { s.hidden_paths.push_back("/"); }));
  ExpectInvalid(with([](LaunchSpec& s) { s.env_set.push_back({"A=B", "c"}); }));
  ExpectInvalid(with([](LaunchSpec& s) { s.keep_fds.push_back(1); }));
  ExpectInvalid(with([](LaunchSpec& s) { s.env_override.push_back({"", "x"}); }));
  // Home files: below HOME only, permission bits only, never inside a directory bind.
  ExpectInvalid(with([](LaunchSpec& s) { s.home_files.push_back({"/etc/x", "", 0600}); }));
  ExpectInvalid(with([](LaunchSpec& s) { s.home_files.push_back({s.home, "", 0600}); }));
  ExpectInvalid(with([](LaunchSpec& s) { s.home_files.push_back({s.home + "/../x", "", 0600}); }));
  ExpectInvalid(with([](LaunchSpec& s) { s.home_files.push_back({s.home + "/x", "", 04755}); }));
  ExpectInvalid(with([](LaunchSpec& s) {
    s.dir_binds.push_back({"/var/cache/x", s.home + "/.cache/x", false, false});
    s.home_files.push_back({s.home + "/.cache/x/token", "", 0600});
  }));
  EXPECT_TRUE(with([](LaunchSpec& s) {
                s.home_files.push_back({s.home + "/.config/tool/token", "x", 0400});
              }).ok());
  ExpectInvalid(with([](LaunchSpec& s) { s.keep_fds.assign(40, 5); }));
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
  EXPECT_EQ(bad.error().code, Error::Code::kInvalidInput);
  const auto mode = ParseNetworkMode("wide-open");
  ASSERT_FALSE(mode.ok());
  EXPECT_EQ(mode.error().code, Error::Code::kInvalidInput);
}

TEST(LaunchSpecTest, CanonicalDirectory) {
  EXPECT_EQ(*CanonicalDirectory("/usr/../usr/bin/.."), "/usr");
  EXPECT_FALSE(CanonicalDirectory("/nonexistent-xyz").ok());
  EXPECT_EQ(CanonicalDirectory("/etc/passwd").error().err, ENOTDIR);
}

}  // namespace
}  // namespace cagent::launcher
