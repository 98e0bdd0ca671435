// A long session of the real agent, in the real sandbox, against a simulated OpenAI-compatible
// server that caches the longest prefix a request shares with an earlier one (as OpenAI does):
// the requests cagent sends keep their prefix byte for byte until the agent compacts its
// conversation, compaction is rare, and the system prompt and the task stay the cached prefix
// even across compactions.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/harness.h"
#include "tests/launcher/model/fake_provider_util.h"
#include "tests/launcher/model/simulated_server_util.h"

namespace cagent::testing {
namespace {

using nlohmann::json;

constexpr int kReads = 30;

TEST(ModelSession, ThePrefixStaysByteIdenticalUntilTheFirstCompaction) {
  auto& h = Harness::Get();
  if (!h.skip_reason().empty()) GTEST_SKIP() << h.skip_reason();
  const std::string dir = h.MakeDir("model-session");
  const std::string ws = dir + "/ws";
  std::filesystem::create_directories(ws);
  // Thirty files of about 4 KB each: every read adds about a thousand tokens.
  std::vector<ScriptedTurn> script;
  for (int i = 1; i <= kReads; ++i) {
    std::string text;
    for (int line = 0; text.size() < 4000; ++line) {
      text += "file " + std::to_string(i) + " line " + std::to_string(line) + ": some code here\n";
    }
    WriteFile(ws + "/part_" + std::to_string(i) + ".txt", text);
    script.push_back({"Reading part " + std::to_string(i) + ".",
                      {{"read_file", {{"path", "part_" + std::to_string(i) + ".txt"}}}}});
  }
  script.push_back({"", {{"finish", {{"summary", "Read every part."}}}}});
  WriteFile(dir + "/task.md", "# Read the parts\n\nRead every part_N.txt, in order.\n");
  // A small window, so that thirty reads must be compacted: it triggers at 75% of 16000 - 1000.
  WriteFile(dir + "/models.toml",
            "[model.\"openai:sim-model\"]\ncontext_window = 16000\nmax_output_tokens = 1000\n");
  ASSERT_EQ(std::system(("chown -R " + std::to_string(h.run_uid()) + ":" +
                         std::to_string(h.run_gid()) + " " + dir)
                            .c_str()),
            0);

  auto sim = std::make_shared<SimulatedModelServer>(script);
  FakeProvider::Options o;
  o.responder = [sim](const RecordedRequest& r) { return sim->Answer(r); };
  FakeProvider server(o);

  RunOptions run;
  run.extra_env = {"XDG_STATE_HOME=" + dir + "/state", "OPENAI_API_KEY="};
  run.timeout = std::chrono::seconds(110);
  const RunResult r =
      h.Run({"agent", "--profile", "backend", "--workspace", ws, "--model", "openai:sim-model",
             "--model-url", server.BaseUrl("/v1"), "--models-config", dir + "/models.toml",
             "--approve", "never", "--json", dir + "/task.md"},
            run);
  SCOPED_TRACE(r.err);
  ASSERT_EQ(r.exit_code, 0) << r.out;

  const auto requests = server.Requests();
  ASSERT_EQ(requests.size(), static_cast<std::size_t>(kReads + 1));
  std::vector<json> bodies;
  for (const auto& req : requests) bodies.push_back(req.Json());
  // Where a request does not begin with the previous one's messages, the agent compacted.
  std::vector<std::size_t> breaks;
  for (std::size_t i = 1; i < bodies.size(); ++i) {
    const json& before = bodies[i - 1]["messages"];
    const json& now = bodies[i]["messages"];
    bool extends = now.size() > before.size();
    for (std::size_t m = 0; extends && m < before.size(); ++m) {
      extends = now[m].dump() == before[m].dump();
    }
    if (!extends) breaks.push_back(i);
    // The system prompt and the task are never rewritten: they stay the cached prefix.
    EXPECT_EQ(now[0].dump(), bodies[0]["messages"][0].dump()) << "request " << i + 1;
    EXPECT_EQ(now[1].dump(), bodies[0]["messages"][1].dump()) << "request " << i + 1;
    EXPECT_EQ(bodies[i]["tools"].dump(), bodies[0]["tools"].dump());
  }
  // Thirty reads of a thousand tokens do not fit in 11,250: the agent compacted, but rarely.
  ASSERT_FALSE(breaks.empty()) << "the session was expected to need compaction";
  EXPECT_LE(breaks.size(), 6U);
  for (std::size_t i = 1; i + 1 < breaks.size(); ++i) {
    EXPECT_GE(breaks[i] - breaks[i - 1], 3U)
        << "compactions at requests " << breaks[i - 1] + 1 << " and " << breaks[i] + 1;
  }
  // Until the first compaction every request after the first read its prefix from the cache.
  const auto seen = sim->Seen();
  for (std::size_t i = 1; i < breaks.front(); ++i) {
    EXPECT_GT(seen[i].cache_read, 0U) << "request " << i + 1;
  }
  const json out = json::parse(r.out.substr(r.out.find('{')), nullptr, false);
  ASSERT_TRUE(out.is_object()) << r.out;
  EXPECT_EQ(out["status"], "finished");
  EXPECT_GT(out["usage"]["cache_read_tokens"].get<std::uint64_t>(), 0U);
}

}  // namespace
}  // namespace cagent::testing
