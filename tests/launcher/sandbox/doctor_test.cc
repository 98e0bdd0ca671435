// cagent doctor's AppArmor probe: the restriction on unprivileged user namespaces of Ubuntu 23.10
// and later, read from a sysctl file the test writes itself, so every state is covered on any
// kernel.
#include "launcher/sandbox/doctor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace cagent::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class AppArmorUsernsProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-doctor-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    sysctl_ = (dir_ / "apparmor_restrict_unprivileged_userns").string();
    profile_ = (dir_ / "apparmor.d-cagent").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

  std::filesystem::path dir_;
  std::string sysctl_;
  std::string profile_;
};

// Debian 12: no such sysctl, nothing to fix.
TEST_F(AppArmorUsernsProbeTest, AbsentSysctlIsNoRestriction) {
  const Probe p = AppArmorUsernsProbe(sysctl_, false, profile_);
  EXPECT_EQ(p.status, "ok");
  EXPECT_THAT(p.detail, HasSubstr("no AppArmor restriction"));
}

TEST_F(AppArmorUsernsProbeTest, ZeroIsNotRestricted) {
  Write(sysctl_, "0\n");
  const Probe p = AppArmorUsernsProbe(sysctl_, true, profile_);
  EXPECT_EQ(p.status, "ok");
  EXPECT_THAT(p.detail, HasSubstr("=0: not restricted"));
}

// Ubuntu 24.04 with the package's profile loaded: the trial sandbox was built.
TEST_F(AppArmorUsernsProbeTest, RestrictedButAllowedIsOk) {
  Write(sysctl_, "1\n");
  const Probe p = AppArmorUsernsProbe(sysctl_, true, profile_);
  EXPECT_EQ(p.status, "ok");
  EXPECT_THAT(p.detail, HasSubstr("=1, and cagent may create user namespaces"));
}

// Restricted, no profile: both fixes are named, the profile first.
TEST_F(AppArmorUsernsProbeTest, RestrictedWithoutProfileNamesBothFixes) {
  Write(sysctl_, "1\n");
  const Probe p = AppArmorUsernsProbe(sysctl_, false, profile_);
  EXPECT_EQ(p.status, "missing");
  EXPECT_THAT(p.detail, HasSubstr("install the package's AppArmor profile"));
  EXPECT_THAT(p.detail, HasSubstr(profile_));
  EXPECT_THAT(p.detail, HasSubstr("sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0"));
}

// Restricted with the profile file present: it is not loaded, or this cagent is not the one it
// names; the fix is to load it, not to install it again.
TEST_F(AppArmorUsernsProbeTest, RestrictedWithProfileFileSaysLoadIt) {
  Write(sysctl_, "1\n");
  Write(profile_, "profile cagent /usr/bin/cagent flags=(unconfined) { userns, }\n");
  const Probe p = AppArmorUsernsProbe(sysctl_, false, profile_);
  EXPECT_EQ(p.status, "missing");
  EXPECT_THAT(p.detail, HasSubstr("sudo apparmor_parser -r " + profile_));
  EXPECT_THAT(p.detail, Not(HasSubstr("install the package's")));
}

}  // namespace
}  // namespace cagent::launcher
