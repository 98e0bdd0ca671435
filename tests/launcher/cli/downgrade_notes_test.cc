// Acknowledged downgrades (launcher/cli/downgrade_notes.h): the file doctor --acknowledge writes,
// what exec, run and agent leave off the terminal because of it, and what they still print.
#include "launcher/cli/downgrade_notes.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace cagent::launcher::cli {
namespace {

class DowngradeNotesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-downgrades-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const char* old = std::getenv("CAGENT_CONFIG_DIR");
    if (old != nullptr) saved_ = old;
    had_ = old != nullptr;
    ::setenv("CAGENT_CONFIG_DIR", (dir_ + "/config").c_str(), 1);
  }
  void TearDown() override {
    if (had_) {
      ::setenv("CAGENT_CONFIG_DIR", saved_.c_str(), 1);
    } else {
      ::unsetenv("CAGENT_CONFIG_DIR");
    }
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  std::string saved_;
  bool had_ = false;
};

TEST_F(DowngradeNotesTest, TheLayerIsTheTextBeforeTheFirstColon) {
  EXPECT_EQ(DowngradeLayer("cgroup: memory and pids not enforced: memory is bound to v1"),
            "cgroup");
  EXPECT_EQ(DowngradeLayer("landlock ABI 5 < 6: scopes not enforced"), "landlock ABI 5 < 6");
  EXPECT_EQ(DowngradeLayer("  no colon here "), "no colon here");
}

TEST_F(DowngradeNotesTest, AcknowledgedLayersAreLeftOffAndTheOthersStillPrinted) {
  const std::vector<std::string> downgrades = {"cgroup: memory not enforced",
                                               "landlock ABI 5 < 6: scopes not enforced"};
  // Nothing acknowledged: nothing is left off.
  EXPECT_TRUE(AcknowledgedDowngrades("/nonexistent-home").empty());
  EXPECT_EQ(WarnDowngrades(downgrades, "/nonexistent-home"), 0U);

  ASSERT_TRUE(AcknowledgeDowngrades("/nonexistent-home", {"cgroup"}));
  const std::string file = AcknowledgedDowngradesFile("/nonexistent-home");
  EXPECT_EQ(file, dir_ + "/config/acknowledged-downgrades");
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  EXPECT_EQ(AcknowledgedDowngrades("/nonexistent-home"), std::set<std::string>{"cgroup"});
  // The cgroup warning is left off; the landlock one is not.
  EXPECT_EQ(WarnDowngrades(downgrades, "/nonexistent-home"), 1U);

  // Acknowledging again keeps the earlier ones, once each.
  ASSERT_TRUE(AcknowledgeDowngrades("/nonexistent-home", {"landlock ABI 5 < 6", "cgroup"}));
  EXPECT_EQ(AcknowledgedDowngrades("/nonexistent-home"),
            (std::set<std::string>{"cgroup", "landlock ABI 5 < 6"}));
  EXPECT_EQ(WarnDowngrades(downgrades, "/nonexistent-home"), 2U);
}

TEST_F(DowngradeNotesTest, ALayerMustBeOneLineOfPrintableText) {
  const auto bad = AcknowledgeDowngrades("/nonexistent-home", {"cgroup\n# injected"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Error::Code::kInvalidInput);
  EXPECT_FALSE(AcknowledgeDowngrades("/nonexistent-home", {""}));
  EXPECT_FALSE(AcknowledgeDowngrades("/nonexistent-home", {std::string(200, 'x')}));
  // A hand-edited file with junk lines: only plain layers count.
  std::filesystem::create_directories(dir_ + "/config");
  std::ofstream(dir_ + "/config/acknowledged-downgrades")
      << "# comment\n\ncgroup\n\x1b[31mred\n  landlock ABI 5 < 6  \n";
  EXPECT_EQ(AcknowledgedDowngrades("/nonexistent-home"),
            (std::set<std::string>{"cgroup", "landlock ABI 5 < 6"}));
}

}  // namespace
}  // namespace cagent::launcher::cli
