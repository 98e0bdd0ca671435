// End-to-end tests of `cagent log verify`: the real binary on an intact chain, a damaged one, a
// run directory, and the usage errors; exit codes 0 / 1 / 2 as documented.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// SHA-256 hex of `data` by coreutils' sha256sum (this binary links no crypto of its own).
std::string Sha256Of(const std::string& dir, const std::string& data) {
  const std::string tmp = dir + "/hash-input";
  std::ofstream(tmp, std::ios::binary) << data;
  FILE* p = popen(("sha256sum '" + tmp + "'").c_str(), "r");
  if (p == nullptr) return "";
  char buf[128] = {};
  const std::size_t n = fread(buf, 1, sizeof buf - 1, p);
  pclose(p);
  std::remove(tmp.c_str());
  return std::string(buf, n).substr(0, 64);
}

// The lines of a valid chain of `n` entries, built the way audit_log.h describes it.
std::vector<std::string> Chain(const std::string& dir, int n) {
  std::vector<std::string> lines;
  std::string prev(64, '0');
  for (int i = 0; i < n; ++i) {
    json j = {{"run", "run-e2e"},  {"seq", i},         {"time", "2024-05-01T12:00:00.000Z"},
              {"actor", "broker"}, {"event", "state"}, {"policy", ""},
              {"tool", ""},        {"args", ""},       {"verdict", ""},
              {"rule", ""},        {"result", ""},     {"detail", {{"i", i}}},
              {"prev", prev}};
    lines.push_back(j.dump());
    prev = Sha256Of(dir, lines.back());
  }
  return lines;
}

std::string Write(const std::string& path, const std::vector<std::string>& lines,
                  bool final_newline = true) {
  std::string content;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    content += lines[i];
    if (i + 1 < lines.size() || final_newline) content += "\n";
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  chmod(path.c_str(), 0644);
  return path;
}

class LogCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    dir_ = h_.MakeDir("log");
  }
  Harness& h_ = Harness::Get();
  std::string dir_;
};

TEST_F(LogCliTest, IntactChainVerifies) {
  const std::vector<std::string> lines = Chain(dir_, 3);
  const std::string path = Write(dir_ + "/events.jsonl", lines);
  const RunResult r = h_.Run({"log", "verify", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ok: 3 entries, run run-e2e, head " + Sha256Of(dir_, lines.back()) + "\n");

  // A run directory holding events.jsonl is accepted too.
  const RunResult d = h_.Run({"log", "verify", dir_});
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_THAT(d.out, HasSubstr("ok: 3 entries"));
}

TEST_F(LogCliTest, JsonReport) {
  const std::string path = Write(dir_ + "/events.jsonl", Chain(dir_, 2));
  const RunResult r = h_.Run({"log", "verify", "--json", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["entries"], 2);
  EXPECT_EQ(j["run"], "run-e2e");
  EXPECT_TRUE(j["first_bad_line"].is_null());
}

TEST_F(LogCliTest, DeletedLineExitsOneAndSaysWhere) {
  std::vector<std::string> lines = Chain(dir_, 4);
  lines.erase(lines.begin() + 1);
  const std::string path = Write(dir_ + "/events.jsonl", lines);
  const RunResult r = h_.Run({"log", "verify", path});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr(path + ":2: line 2: seq is 2, expected 1"));
  EXPECT_THAT(r.err, HasSubstr("does not verify"));

  const RunResult j = h_.Run({"log", "verify", "--json", path});
  EXPECT_EQ(j.exit_code, 1);
  const json report = json::parse(j.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << j.out;
  EXPECT_EQ(report["ok"], false);
  EXPECT_EQ(report["first_bad_line"], 2);
}

TEST_F(LogCliTest, TruncatedLogExitsOne) {
  std::vector<std::string> lines = Chain(dir_, 2);
  lines.back().resize(lines.back().size() / 2);
  const std::string path = Write(dir_ + "/events.jsonl", lines, /*final_newline=*/false);
  const RunResult r = h_.Run({"log", "verify", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("line 2: truncated final line"));
}

TEST_F(LogCliTest, UsageErrorsAndUnreadableFilesExitTwo) {
  const RunResult missing = h_.Run({"log", "verify", dir_ + "/nope.jsonl"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("cannot verify the audit log"));
  EXPECT_THAT(missing.err, HasSubstr("No such file or directory"));

  const RunResult no_file = h_.Run({"log", "verify"});
  EXPECT_EQ(no_file.exit_code, 2);
  const RunResult no_sub = h_.Run({"log"});
  EXPECT_EQ(no_sub.exit_code, 2);

  const std::string empty_dir = h_.MakeDir("empty");
  const RunResult dir = h_.Run({"log", "verify", empty_dir});
  EXPECT_EQ(dir.exit_code, 2);
  EXPECT_THAT(dir.err, HasSubstr("without an events.jsonl"));
}

TEST_F(LogCliTest, HelpExplainsTheChecksAndExitStatus) {
  const RunResult r = h_.Run({"log", "verify", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("SHA-256"));
  EXPECT_THAT(r.out, HasSubstr("EXIT STATUS"));
}

}  // namespace
}  // namespace cagent::testing
