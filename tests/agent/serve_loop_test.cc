// A served session on the agent's side (agent/serve_loop.h): the calls come from next_call, the
// toolbox's own refusals are reported to the broker (the client waits for an answer), a cancel
// stops a running command's process group, and the end of the session is the broker's shutdown.
#include "agent/serve_loop.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/command_tool.h"
#include "tests/agent/scripted_broker_util.h"

namespace cagent::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using protocol::Kind;
using testing::ScriptedBroker;
using Clock = std::chrono::steady_clock;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "cagent-serve-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

protocol::Welcome ServeWelcome(const std::string& workspace) {
  protocol::Welcome w = testing::TestWelcome(workspace);
  w.mode = "serve";
  w.task.clear();
  return w;
}

TEST(ServeLoop, RunsTheClientsCallsAndReportsTheToolboxsOwnRefusal) {
  TempDir ws;
  std::ofstream(ws.path() + "/notes.txt") << "hello\n";
  ScriptedBroker broker;
  broker.set_check_model_turns(true);
  UniqueFd agent_end = broker.TakeAgentEnd();
  broker.Expect(Kind::kHello, testing::SendWelcome(ServeWelcome(ws.path())))
      .Expect(Kind::kNextCall,
              testing::SendModelTurn(testing::ToolTurn(
                  {protocol::ToolCall{"mcp-1", "read_file", json{{"path", "missing.txt"}}, ""},
                   protocol::ToolCall{"mcp-2", "read_file", json{{"path", "notes.txt"}}, ""}})))
      .Expect(Kind::kToolResult, testing::AckResult())  // mcp-1: the toolbox refused it
      .Expect(Kind::kToolRequest, testing::Allow())     // mcp-2
      .Expect(Kind::kToolResult, testing::AckResult())
      .Expect(Kind::kNextCall, testing::SendShutdown("finished", "the client ended the session"));
  broker.Start();
  BrokerClient client(std::move(agent_end));
  auto welcome = client.Hello("test");
  ASSERT_TRUE(welcome.ok());
  auto toolbox = Toolbox::Open(ws.path(), ToolLimits{});
  ASSERT_TRUE(toolbox.ok());
  const LoopResult result = RunServeLoop(client, toolbox.value(), welcome.value());
  broker.Join();
  EXPECT_TRUE(broker.errors().empty()) << broker.errors().front();
  EXPECT_EQ(result.status, LoopResult::Status::kDone) << result.message;
  const auto results = broker.Received(Kind::kToolResult);
  ASSERT_EQ(results.size(), 2U);
  const auto& refusal = std::get<protocol::ToolResult>(results[0].body);
  EXPECT_EQ(refusal.request, 0U);
  EXPECT_EQ(refusal.call_id, "mcp-1");
  EXPECT_FALSE(refusal.ok);
  EXPECT_EQ(refusal.error_code, "not_found");
  const auto& ran = std::get<protocol::ToolResult>(results[1].body);
  EXPECT_TRUE(ran.ok);
  EXPECT_NE(ran.output.find("hello"), std::string::npos);
  // No finish: a served session has no summary.
  EXPECT_TRUE(broker.Received(Kind::kFinish).empty());
}

TEST(ServeLoop, ACancelThatCameWithTheDecisionRunsNothing) {
  TempDir ws;
  ScriptedBroker broker;
  UniqueFd agent_end = broker.TakeAgentEnd();
  broker.Expect(Kind::kHello, testing::SendWelcome(ServeWelcome(ws.path())))
      .Expect(Kind::kNextCall,
              testing::SendModelTurn(testing::ToolTurn({protocol::ToolCall{
                  "mcp-1", "run_command", json{{"command", "touch ran.txt"}}, ""}})))
      .Expect(Kind::kToolRequest,
              [](const protocol::Message& m) {
                return testing::Reply(
                    {protocol::Make(
                         Kind::kDecision, m.header.id,
                         protocol::Decision{protocol::Verdict::kAllow, false, "", "", "", ""}),
                     protocol::Make(Kind::kCancel, m.header.id, protocol::Cancel{"cancelled"})});
              })
      .Expect(Kind::kToolResult, testing::AckResult())
      .Expect(Kind::kNextCall, testing::SendShutdown("finished", ""));
  broker.Start();
  BrokerClient client(std::move(agent_end));
  auto welcome = client.Hello("test");
  ASSERT_TRUE(welcome.ok());
  auto toolbox = Toolbox::Open(ws.path(), ToolLimits{});
  ASSERT_TRUE(toolbox.ok());
  const LoopResult result = RunServeLoop(client, toolbox.value(), welcome.value());
  broker.Join();
  EXPECT_EQ(result.status, LoopResult::Status::kDone) << result.message;
  const auto results = broker.Received(Kind::kToolResult);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(std::get<protocol::ToolResult>(results[0].body).error_code, "cancelled");
  EXPECT_FALSE(fs::exists(ws.path() + "/ran.txt"));
}

TEST(ServeLoop, ABudgetShutdownEndsTheLoopAsEndedByTheBroker) {
  TempDir ws;
  ScriptedBroker broker;
  UniqueFd agent_end = broker.TakeAgentEnd();
  broker.Expect(Kind::kHello, testing::SendWelcome(ServeWelcome(ws.path())))
      .Expect(Kind::kNextCall, testing::SendShutdown("failed", "tool-call budget (3) reached"));
  broker.Start();
  BrokerClient client(std::move(agent_end));
  auto welcome = client.Hello("test");
  ASSERT_TRUE(welcome.ok());
  auto toolbox = Toolbox::Open(ws.path(), ToolLimits{});
  ASSERT_TRUE(toolbox.ok());
  const LoopResult result = RunServeLoop(client, toolbox.value(), welcome.value());
  broker.Join();
  EXPECT_EQ(result.status, LoopResult::Status::kEndedByBroker);
  EXPECT_NE(result.message.find("tool-call budget"), std::string::npos);
}

// The command runner's interrupt: a readable fd whose check says yes stops the whole process group
// at once; the twin's check says no, and the command runs to its end.
TEST(CommandInterrupt, StopsTheProcessGroupWhenTheCheckSaysSo) {
  TempDir ws;
  UniqueFd dir(::open(ws.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir.valid());
  for (const bool stop : {true, false}) {
    SCOPED_TRACE(stop ? "check says stop" : "twin: check says go on");
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    UniqueFd r(fds[0]);
    UniqueFd w(fds[1]);
    std::thread poke([&w] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      [[maybe_unused]] const ssize_t n = ::write(w.get(), "x", 1);
    });
    int asked = 0;
    CommandSpec spec;
    spec.command = stop ? "sleep 30 & sleep 30" : "sleep 1; echo done";
    spec.cwd_fd = dir.get();
    spec.timeout = std::chrono::seconds(60);
    spec.kill_grace = std::chrono::milliseconds(500);
    spec.interrupt_fd = r.get();
    spec.interrupted = [&] {
      ++asked;
      char c = 0;
      [[maybe_unused]] const ssize_t n = ::read(r.get(), &c, 1);
      return stop;
    };
    const auto start = Clock::now();
    const CommandRun run = RunShellCommand(spec);
    const auto took = Clock::now() - start;
    poke.join();
    EXPECT_GE(asked, 1);
    EXPECT_EQ(run.cancelled, stop);
    EXPECT_FALSE(run.timed_out);
    if (stop) {
      EXPECT_LT(took, std::chrono::seconds(10));
      EXPECT_FALSE(run.exited && run.exit_code == 0);
    } else {
      EXPECT_TRUE(run.exited);
      EXPECT_EQ(run.exit_code, 0);
      EXPECT_NE(run.output.find("done"), std::string::npos);
    }
  }
}

// BrokerClient::CancelArrived reads only what is there: a cancel for this request says yes, a late
// one for another request is ignored, a shutdown ends the session.
TEST(BrokerClientCancel, OnlyACancelOfThisRequestOrTheSessionsEndCounts) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd broker_end(pair[0]);
  BrokerClient client{UniqueFd(pair[1])};
  EXPECT_FALSE(client.CancelArrived(5));  // nothing there: does not block
  auto send = [&](const protocol::Message& m) {
    const std::string frame = testing::Frame(m);
    ASSERT_EQ(::write(broker_end.get(), frame.data(), frame.size()),
              static_cast<ssize_t>(frame.size()));
  };
  send(protocol::Make(Kind::kCancel, 4, protocol::Cancel{"late"}));
  EXPECT_FALSE(client.CancelArrived(5));
  send(protocol::Make(Kind::kCancel, 5, protocol::Cancel{"now"}));
  EXPECT_TRUE(client.CancelArrived(5));
  EXPECT_FALSE(client.failure().has_value());
  send(protocol::Make(Kind::kShutdown, 0, protocol::Shutdown{"failed", "budget"}));
  EXPECT_TRUE(client.CancelArrived(6));
  ASSERT_TRUE(client.failure().has_value());
  EXPECT_EQ(client.failure()->kind, BrokerFailure::Kind::kShutdown);
}

}  // namespace
}  // namespace cagent::agent
