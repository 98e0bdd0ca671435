#include "launcher/run/last_resort.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cagent::launcher::run {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class LastResortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-last-resort-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    DisarmLastResortRecord();
    fs::remove_all(dir_);
  }
  std::string dir_;
};

TEST_F(LastResortTest, WritesTheArmedRecordOnce) {
  ArmLastResortRecord(dir_, "{\"status\": \"failed\"}\n");
  EXPECT_TRUE(WriteLastResortRecord());
  EXPECT_EQ(Slurp(dir_ + "/result.json"), "{\"status\": \"failed\"}\n");
  EXPECT_FALSE(WriteLastResortRecord()) << "a written record is disarmed";
}

TEST_F(LastResortTest, NeverOverwritesTheRunsOwnResult) {
  std::ofstream(dir_ + "/result.json") << "{\"status\": \"completed\"}\n";
  ArmLastResortRecord(dir_, "{\"status\": \"failed\"}\n");
  EXPECT_FALSE(WriteLastResortRecord());
  EXPECT_EQ(Slurp(dir_ + "/result.json"), "{\"status\": \"completed\"}\n");
}

TEST_F(LastResortTest, DisarmedWritesNothing) {
  ArmLastResortRecord(dir_, "{}\n");
  DisarmLastResortRecord();
  EXPECT_FALSE(WriteLastResortRecord());
  EXPECT_FALSE(fs::exists(dir_ + "/result.json"));
}

TEST_F(LastResortTest, TheLatestArmingWins) {
  ArmLastResortRecord(dir_, "{\"state\": \"preparing\"}\n");
  ArmLastResortRecord(dir_, "{\"state\": \"running\"}\n");
  EXPECT_TRUE(WriteLastResortRecord());
  EXPECT_EQ(Slurp(dir_ + "/result.json"), "{\"state\": \"running\"}\n");
}

// std::terminate (an exception escaping a thread, a throw through noexcept) used to end cagent
// without result.json. With the handler installed the record is written before the abort; the
// twin without the handler leaves nothing.
TEST_F(LastResortTest, TerminateWritesTheRecordWhenTheHandlerIsInstalled) {
  // "fast" (fork at the statement): the child writes into this test's directory.
  GTEST_FLAG_SET(death_test_style, "fast");
  const std::string with = dir_ + "/with";
  const std::string without = dir_ + "/without";
  fs::create_directories(with);
  fs::create_directories(without);
  EXPECT_DEATH(
      {
        InstallLastResortHandler();
        ArmLastResortRecord(with, "{\"status\": \"failed\"}\n");
        std::terminate();
      },
      "the run is recorded as failed");
  EXPECT_EQ(Slurp(with + "/result.json"), "{\"status\": \"failed\"}\n");
  EXPECT_DEATH(
      {
        std::set_terminate([] { std::abort(); });
        ArmLastResortRecord(without, "{\"status\": \"failed\"}\n");
        std::terminate();
      },
      "");
  EXPECT_FALSE(fs::exists(without + "/result.json"));
}

}  // namespace
}  // namespace cagent::launcher::run
