// The broker in a served session (cagent mcp serve): next_call hands the client's calls to the
// agent as a turn; every call handed out gets exactly one answer through the CallSource, whatever
// the agent does; cancel reaches the agent; the session's end answers what is left.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/launcher/broker/broker_test_util.h"

namespace cagent::launcher::broker {
namespace {

using nlohmann::json;
using testing::Harness;
using testing::HarnessOptions;
using ::testing::HasSubstr;

// A CallSource driven by the test: calls are queued with Push, answers recorded by call id.
class FakeSource : public CallSource {
 public:
  void Next(std::function<void(std::vector<ServedCall>)> ready) override {
    ++nexts;
    ready_ = std::move(ready);
    Deliver();
  }
  void Answer(const std::string& call_id, CallAnswer answer) override {
    ++answer_count[call_id];
    answers[call_id] = std::move(answer);
  }
  void Cancel() override {
    ++cancels;
    ready_ = nullptr;
  }
  void Push(std::string id, std::string tool, json args) {
    queue_.push_back(ServedCall{std::move(id), std::move(tool), std::move(args)});
    Deliver();
  }
  void End() {
    ended_ = true;
    Deliver();
  }

  std::map<std::string, CallAnswer> answers;
  std::map<std::string, int> answer_count;
  int nexts = 0;
  int cancels = 0;

 private:
  void Deliver() {
    if (!ready_ || (queue_.empty() && !ended_)) return;
    auto ready = std::move(ready_);
    ready_ = nullptr;
    std::vector<ServedCall> batch = std::move(queue_);
    queue_.clear();
    ready(std::move(batch));
  }
  std::function<void(std::vector<ServedCall>)> ready_;
  std::vector<ServedCall> queue_;
  bool ended_ = false;
};

struct Served {
  explicit Served(std::string profile = testing::kTestProfile) {
    HarnessOptions o;
    o.profile = std::move(profile);
    o.with_model = false;
    o.calls = &source;
    h = std::make_unique<Harness>(o);
  }
  FakeSource source;
  std::unique_ptr<Harness> h;
};

// next_call, with the calls already queued: the model_result listing them.
json NextCall(Harness& h) {
  auto reply = h.Request(h.Msg("next_call"));
  EXPECT_TRUE(reply.has_value());
  return reply ? *reply : json();
}

TEST(BrokerServe, WelcomeSaysServeAndTheClientIsTheModel) {
  Served s;
  const json w = s.h->Hello();
  EXPECT_EQ(w["mode"], "serve");
  EXPECT_EQ(w["model"]["provider"], "mcp");
  EXPECT_EQ(w["model"]["name"], "test-client");
  EXPECT_EQ(w["task"], "");
}

TEST(BrokerServe, ModelCallIsRefusedAndNextCallOutsideServeToo) {
  Served s;
  s.h->Hello();
  auto reply = s.h->Request(s.h->Msg("model_call", {{"messages", json::array()}}));
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["type"], "error");
  EXPECT_THAT((*reply)["message"].get<std::string>(), HasSubstr("served session"));

  // Twin: a task session refuses next_call.
  Harness task;
  task.Hello();
  auto refused = task.Request(task.Msg("next_call"));
  ASSERT_TRUE(refused);
  EXPECT_EQ((*refused)["type"], "error");
  EXPECT_EQ((*refused)["code"], "out_of_order");
}

TEST(BrokerServe, AnAllowedCallIsAnsweredWithItsRedactedResult) {
  Served s;
  s.h->Hello();
  s.source.Push("mcp-1", "read_file", {{"path", "a.txt"}});
  const json turn = NextCall(*s.h);
  ASSERT_EQ(turn["type"], "model_result");
  ASSERT_EQ(turn["tool_calls"].size(), 1U);
  EXPECT_EQ(turn["tool_calls"][0]["id"], "mcp-1");
  const json d = s.h->ToolRequestAs("mcp-1", "read_file", {{"path", "a.txt"}}, {"a.txt"});
  ASSERT_EQ(d["verdict"], "allow");
  EXPECT_TRUE(s.source.answers.empty());  // not before the result
  s.h->ToolResult(d["id"].get<std::uint64_t>(), true, "token=tok-1234567890-secret\n");
  ASSERT_EQ(s.source.answer_count["mcp-1"], 1);
  const CallAnswer& a = s.source.answers["mcp-1"];
  EXPECT_EQ(a.kind, CallAnswer::Kind::kResult);
  EXPECT_TRUE(a.ok);
  EXPECT_THAT(a.text, HasSubstr("[REDACTED"));
  EXPECT_THAT(a.text, ::testing::Not(HasSubstr("tok-1234567890-secret")));
}

TEST(BrokerServe, ADeniedCallIsAnsweredWithTheRuleAndNothingRuns) {
  Served s;
  s.h->Hello();
  s.source.Push("mcp-1", "run_command", {{"command", "git push origin main"}});
  NextCall(*s.h);
  const json d = s.h->ToolRequestAs("mcp-1", "run_command", {{"command", "git push origin main"}});
  ASSERT_EQ(d["verdict"], "deny");
  ASSERT_EQ(s.source.answer_count["mcp-1"], 1);
  const CallAnswer& a = s.source.answers["mcp-1"];
  EXPECT_EQ(a.kind, CallAnswer::Kind::kDenied);
  EXPECT_THAT(a.rule, HasSubstr("git push"));
  EXPECT_FALSE(a.location.empty());
  EXPECT_THAT(a.text, HasSubstr("git push"));
}

TEST(BrokerServe, TheAgentCannotRunACallTheClientDidNotMake) {
  Served s;
  s.h->Hello();
  s.source.Push("mcp-1", "read_file", {{"path", "a.txt"}});
  NextCall(*s.h);
  // Another tool, other arguments, an unknown id: each denied by the turn binding.
  EXPECT_EQ(s.h->ToolRequestAs("mcp-1", "run_command", {{"command", "ls"}})["rule"], "model turn");
  EXPECT_EQ(s.h->ToolRequestAs("mcp-9", "read_file", {{"path", "a.txt"}})["rule"], "model turn");
}

TEST(BrokerServe, ASecondRequestForARunningCallDoesNotAnswerItInItsPlace) {
  Served s;
  s.h->Hello();
  s.source.Push("mcp-1", "read_file", {{"path", "a.txt"}});
  NextCall(*s.h);
  const json d = s.h->ToolRequestAs("mcp-1", "read_file", {{"path", "a.txt"}});
  ASSERT_EQ(d["verdict"], "allow");
  EXPECT_EQ(s.h->ToolRequestAs("mcp-1", "read_file", {{"path", "a.txt"}})["rule"], "model turn");
  EXPECT_EQ(s.source.answers.count("mcp-1"), 0U);  // still running: no answer yet
  s.h->ToolResult(d["id"].get<std::uint64_t>(), true, "a");
  ASSERT_EQ(s.source.answer_count["mcp-1"], 1);
  EXPECT_EQ(s.source.answers["mcp-1"].kind, CallAnswer::Kind::kResult);
}

TEST(BrokerServe, TheToolboxsOwnRefusalAnswersTheCallOnce) {
  Served s;
  s.h->Hello();
  s.source.Push("mcp-1", "read_file", {{"path", "../etc/passwd"}});
  NextCall(*s.h);
  auto ack = s.h->Request(s.h->Msg("tool_result", {{"request", 0},
                                                   {"call_id", "mcp-1"},
                                                   {"ok", false},
                                                   {"error_code", "outside_workspace"},
                                                   {"output", "error [outside_workspace]: no"}}));
  ASSERT_TRUE(ack);
  EXPECT_EQ((*ack)["type"], "result_ack");
  ASSERT_EQ(s.source.answer_count["mcp-1"], 1);
  EXPECT_EQ(s.source.answers["mcp-1"].kind, CallAnswer::Kind::kRefused);
  EXPECT_EQ(s.source.answers["mcp-1"].error_code, "outside_workspace");
  // The id is used up: the agent cannot then ask to run it, nor refuse it twice.
  EXPECT_EQ(s.h->ToolRequestAs("mcp-1", "read_file", {{"path", "../etc/passwd"}})["rule"],
            "model turn");
  auto again = s.h->Request(s.h->Msg(
      "tool_result", {{"request", 0}, {"call_id", "mcp-1"}, {"ok", false}, {"output", "x"}}));
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)["type"], "error");
  EXPECT_EQ(s.source.answer_count["mcp-1"], 1);
}

TEST(BrokerServe, ACallTheAgentIgnoresIsAnsweredWhenItAsksForMore) {
  Served s;
  s.h->Hello();
  s.source.Push("mcp-1", "read_file", {{"path", "a.txt"}});
  s.source.Push("mcp-2", "read_file", {{"path", "b.txt"}});
  const json turn = NextCall(*s.h);
  ASSERT_EQ(turn["tool_calls"].size(), 2U);
  const json d = s.h->ToolRequestAs("mcp-1", "read_file", {{"path", "a.txt"}});
  ASSERT_EQ(d["verdict"], "allow");
  // The agent neither reports mcp-1's result nor touches mcp-2, and asks for more work.
  s.source.Push("mcp-3", "read_file", {{"path", "c.txt"}});
  NextCall(*s.h);
  EXPECT_EQ(s.source.answers["mcp-1"].kind, CallAnswer::Kind::kFailed);
  EXPECT_EQ(s.source.answers["mcp-2"].kind, CallAnswer::Kind::kFailed);
  EXPECT_THAT(s.source.answers["mcp-2"].text, HasSubstr("did not run"));
  EXPECT_EQ(s.source.answers.count("mcp-3"), 0U);
}

TEST(BrokerServe, CancelReachesTheAgentForARunningCallAndDeniesOneNotStarted) {
  Served s;
  s.h->Hello();
  s.source.Push("mcp-1", "run_command", {{"command", "echo a"}});
  s.source.Push("mcp-2", "run_command", {{"command", "echo b"}});
  NextCall(*s.h);
  const json d = s.h->ToolRequestAs("mcp-1", "run_command", {{"command", "echo a"}});
  ASSERT_EQ(d["verdict"], "allow");
  s.h->broker->CancelCall("mcp-1", "the client cancelled the call");
  s.h->broker->CancelCall("mcp-2", "the client cancelled the call");
  auto cancel = s.h->peer->Recv();
  ASSERT_TRUE(cancel);
  EXPECT_EQ((*cancel)["type"], "cancel");
  EXPECT_EQ((*cancel)["id"], d["id"]);
  s.h->ToolResult(d["id"].get<std::uint64_t>(), false, "cancelled");
  EXPECT_EQ(s.source.answers["mcp-1"].kind, CallAnswer::Kind::kResult);
  EXPECT_FALSE(s.source.answers["mcp-1"].ok);
  const json d2 = s.h->ToolRequestAs("mcp-2", "run_command", {{"command", "echo b"}});
  EXPECT_EQ(d2["verdict"], "deny");
  EXPECT_EQ(d2["rule"], "cancelled");
  EXPECT_EQ(s.source.answers["mcp-2"].kind, CallAnswer::Kind::kDenied);
}

TEST(BrokerServe, TheClientEndingIsAFinishedSessionAndTheAgentIsToldSo) {
  Served s;
  s.h->Hello();
  auto id = s.h->NextId();
  ASSERT_TRUE(s.h->peer->SendJson(s.h->Msg("next_call", json::object(), id)));
  s.h->peer->Pump(std::chrono::milliseconds(20));
  s.source.End();
  auto shutdown = s.h->peer->Recv();
  ASSERT_TRUE(shutdown);
  EXPECT_EQ((*shutdown)["type"], "shutdown");
  EXPECT_EQ((*shutdown)["status"], "finished");
  ASSERT_TRUE(s.h->WaitEnded());
  EXPECT_EQ(s.h->ended->status, BrokerOutcome::Status::kFinished);
}

TEST(BrokerServe, ABudgetEndAnswersEveryCallLeft) {
  Served s(std::string(testing::kTestProfile) + "\nlimits {\n  tool-calls 1\n}\n");
  s.h->Hello();
  s.source.Push("mcp-1", "read_file", {{"path", "a.txt"}});
  s.source.Push("mcp-2", "read_file", {{"path", "b.txt"}});
  NextCall(*s.h);
  const json d = s.h->ToolRequestAs("mcp-1", "read_file", {{"path", "a.txt"}});
  ASSERT_EQ(d["verdict"], "allow");
  s.h->ToolResult(d["id"].get<std::uint64_t>(), true, "a");
  const json over = s.h->ToolRequestAs("mcp-2", "read_file", {{"path", "b.txt"}});
  EXPECT_EQ(over["code"], "budget_exhausted");
  ASSERT_TRUE(s.h->WaitEnded());
  EXPECT_EQ(s.source.answers["mcp-1"].kind, CallAnswer::Kind::kResult);
  EXPECT_EQ(s.source.answers["mcp-2"].kind, CallAnswer::Kind::kFailed);
  EXPECT_THAT(s.source.answers["mcp-2"].text, HasSubstr("tool-call budget"));
  for (const auto& [id, n] : s.source.answer_count) EXPECT_EQ(n, 1) << id;
}

}  // namespace
}  // namespace cagent::launcher::broker
