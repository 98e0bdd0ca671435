// ReadSmallFile: what cagent reads back from a directory others may write to (result.json, session
// records, batch results) is a regular file, not a link, and small.
#include "common/small_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace cagent {
namespace {

using ::testing::HasSubstr;

class SmallFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/small-file-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
  }
  std::string dir_;
};

TEST_F(SmallFileTest, ReadsARegularFileUpToTheLimit) {
  Write("r.json", std::string(100, 'x'));
  auto text = ReadSmallFile(dir_ + "/r.json", 100);
  ASSERT_TRUE(text.ok()) << text.error().Message();
  EXPECT_EQ(*text, std::string(100, 'x'));
  auto over = ReadSmallFile(dir_ + "/r.json", 99);
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.error().Message(), HasSubstr("is larger than 99 bytes"));
  Write("empty", "");
  auto empty = ReadSmallFile(dir_ + "/empty", 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
}

TEST_F(SmallFileTest, ASymlinkIsNotFollowed) {
  Write("secret", "the target's bytes");
  ASSERT_EQ(::symlink((dir_ + "/secret").c_str(), (dir_ + "/result.json").c_str()), 0);
  // The twin: the same path opened the ordinary way reads the link's target.
  std::string via_link;
  std::getline(std::ifstream(dir_ + "/result.json"), via_link);
  ASSERT_EQ(via_link, "the target's bytes");
  auto text = ReadSmallFile(dir_ + "/result.json", 1024);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().err, ELOOP);
}

// A FIFO is refused at once: opened without O_NONBLOCK it would wait for a writer forever (the
// test would hang rather than fail, so that twin is not run).
TEST_F(SmallFileTest, AFifoOrADirectoryIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  auto fifo = ReadSmallFile(dir_ + "/fifo", 1024);
  ASSERT_FALSE(fifo.ok());
  EXPECT_THAT(fifo.error().Message(), HasSubstr("is not a regular file"));
  auto directory = ReadSmallFile(dir_, 1024);
  ASSERT_FALSE(directory.ok());
  EXPECT_THAT(directory.error().Message(), HasSubstr("is not a regular file"));
  auto missing = ReadSmallFile(dir_ + "/none", 1024);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().err, ENOENT);
}

}  // namespace
}  // namespace cagent
