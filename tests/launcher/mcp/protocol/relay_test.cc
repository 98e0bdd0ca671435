#include "launcher/mcp/protocol/relay.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/json_text.h"
#include "common/sha256.h"

namespace cagent::launcher::mcp {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A gate with fixed answers: tools in `deny` are denied (and hidden from tools/list), others
// allowed; with `defer`, answers wait until Answer() is called.
class FakeGate : public RelayGate {
 public:
  void Check(const std::string& tool, const json& arguments, const json& request_id,
             std::function<void(GateVerdict)> done) override {
    checks.push_back({tool, arguments, request_id});
    GateVerdict v;
    v.allow = deny.count(tool) == 0;
    if (!v.allow) v.message = "denied by rule 'deny " + tool + "'; use another tool";
    if (defer) {
      deferred.emplace_back(std::move(done), v);
      return;
    }
    done(v);
  }
  void Result(const CallOutcome& outcome) override { results.push_back(outcome); }
  bool Listed(const std::string& tool) override { return deny.count(tool) == 0; }
  void ListFiltered(const std::vector<std::string>& offered,
                    const std::vector<std::string>& hidden) override {
    lists.emplace_back(offered, hidden);
  }
  // Answers the oldest deferred check.
  void Answer() {
    auto [done, v] = std::move(deferred.front());
    deferred.erase(deferred.begin());
    done(v);
  }

  struct Seen {
    std::string tool;
    json arguments;
    json id;
  };
  std::set<std::string> deny;
  bool defer = false;
  std::vector<Seen> checks;
  std::vector<CallOutcome> results;
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> lists;
  std::vector<std::pair<std::function<void(GateVerdict)>, GateVerdict>> deferred;
};

struct Pipe {
  UniqueFd r;
  UniqueFd w;
  static Pipe Make() {
    std::array<int, 2> fds{};
    EXPECT_EQ(::pipe2(fds.data(), O_CLOEXEC), 0);
    return {UniqueFd(fds[0]), UniqueFd(fds[1])};
  }
};

// Reads complete lines from a non-blocking fd.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }
  // Lines available now; sets eof when the writer closed.
  std::vector<std::string> Take() {
    std::array<char, 65536> buf{};
    for (;;) {
      const ssize_t n = ::read(fd_, buf.data(), buf.size());
      if (n > 0) {
        data_.append(buf.data(), static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) eof = true;
      break;
    }
    std::vector<std::string> lines;
    for (std::size_t nl = data_.find('\n'); nl != std::string::npos; nl = data_.find('\n')) {
      lines.push_back(data_.substr(0, nl));
      data_.erase(0, nl + 1);
    }
    return lines;
  }
  bool eof = false;

 private:
  int fd_;
  std::string data_;
};

class RelayTest : public ::testing::Test {
 protected:
  void SetUp() override { std::signal(SIGPIPE, SIG_IGN); }

  void Start(RelayOptions options = {}) {
    Pipe client_in = Pipe::Make();
    Pipe client_out = Pipe::Make();
    Pipe server_in = Pipe::Make();
    Pipe server_out = Pipe::Make();
    client_w_ = std::move(client_in.w);
    client_r_ = std::move(client_out.r);
    server_r_ = std::move(server_in.r);
    server_w_ = std::move(server_out.w);
    client_lines_.emplace(client_r_.get());
    server_lines_.emplace(server_r_.get());
    relay_ = std::make_unique<Relay>(io_, gate_, options);
    RelayEnds ends{std::move(client_in.r), std::move(client_out.w), std::move(server_in.w),
                   std::move(server_out.r)};
    std::string error;
    ASSERT_TRUE(relay_->Start(
        std::move(ends), [this](RelayEnd why, const std::string&) { end_ = why; }, &error))
        << error;
  }

  static void WriteAll(int fd, const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
      ASSERT_GT(n, 0);
      off += static_cast<std::size_t>(n);
    }
  }
  void ClientSays(const std::string& line) { WriteAll(client_w_.get(), line + "\n"); }
  void ServerSays(const std::string& line) { WriteAll(server_w_.get(), line + "\n"); }
  void ClientSays(const char* line) { ClientSays(std::string(line)); }
  void ServerSays(const char* line) { ServerSays(std::string(line)); }
  void ClientSays(const json& j) { ClientSays(JsonText(j)); }
  void ServerSays(const json& j) { ServerSays(JsonText(j)); }

  // Runs the relay until `n` lines reached that side (or two seconds passed), then a little
  // longer, and returns every line that arrived.
  std::vector<std::string> Collect(LineReader& reader, std::size_t n) {
    std::vector<std::string> got;
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(2ms);
      for (auto& l : reader.Take()) got.push_back(std::move(l));
    }
    io_.run_for(20ms);
    for (auto& l : reader.Take()) got.push_back(std::move(l));
    return got;
  }
  std::vector<json> ClientGets(std::size_t n) { return Parsed(Collect(*client_lines_, n)); }
  std::vector<json> ServerGets(std::size_t n) { return Parsed(Collect(*server_lines_, n)); }
  static std::vector<json> Parsed(const std::vector<std::string>& lines) {
    std::vector<json> out;
    for (const auto& l : lines) out.push_back(json::parse(l));
    return out;
  }

  static json Call(int id, const std::string& tool, json args = json::object()) {
    return {{"jsonrpc", "2.0"},
            {"id", id},
            {"method", "tools/call"},
            {"params", {{"name", tool}, {"arguments", std::move(args)}}}};
  }
  static json Request(int id, const std::string& method) {
    return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", json::object()}};
  }
  static json TextResult(const json& id, const std::string& text) {
    return {{"jsonrpc", "2.0"},
            {"id", id},
            {"result",
             {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", false}}}};
  }

  boost::asio::io_context io_;
  FakeGate gate_;
  std::unique_ptr<Relay> relay_;
  UniqueFd client_w_, client_r_, server_r_, server_w_;
  std::optional<LineReader> client_lines_, server_lines_;
  std::optional<RelayEnd> end_;
};

TEST_F(RelayTest, AllowedCallIsForwardedAndItsResultReachesTheClientAndTheGate) {
  Start();
  ClientSays(Call(1, "echo", {{"text", "hi"}}));
  auto at_server = ServerGets(1);
  ASSERT_EQ(at_server.size(), 1U);
  EXPECT_EQ(at_server[0], Call(1, "echo", {{"text", "hi"}}));
  ASSERT_EQ(gate_.checks.size(), 1U);
  EXPECT_EQ(gate_.checks[0].tool, "echo");
  EXPECT_EQ(gate_.checks[0].arguments, json({{"text", "hi"}}));
  EXPECT_EQ(gate_.checks[0].id, 1);

  const json reply = TextResult(1, "hi");
  ServerSays(reply);
  auto at_client = ClientGets(1);
  ASSERT_EQ(at_client.size(), 1U);
  EXPECT_EQ(at_client[0], reply);
  ASSERT_EQ(gate_.results.size(), 1U);
  EXPECT_TRUE(gate_.results[0].ok);
  EXPECT_FALSE(gate_.results[0].is_error);
  EXPECT_EQ(gate_.results[0].tool, "echo");
  EXPECT_EQ(gate_.results[0].digest, Sha256Hex(JsonText(reply["result"])));
  EXPECT_EQ(gate_.results[0].bytes, JsonText(reply).size());
}

TEST_F(RelayTest, DeniedCallIsAnsweredByTheRelayAndNeverForwarded) {
  gate_.deny = {"delete_everything"};
  Start();
  ClientSays(Call(7, "delete_everything"));
  auto at_client = ClientGets(1);
  ASSERT_EQ(at_client.size(), 1U);
  EXPECT_EQ(at_client[0]["id"], 7);
  EXPECT_EQ(at_client[0]["result"]["isError"], true);
  EXPECT_EQ(at_client[0]["result"]["content"][0]["type"], "text");
  EXPECT_EQ(at_client[0]["result"]["content"][0]["text"],
            "denied by rule 'deny delete_everything'; use another tool");
  EXPECT_TRUE(ServerGets(0).empty());
  EXPECT_EQ(relay_->stats().calls_denied, 1U);
  // Twin: an allowed tool, the same way, does reach the server.
  ClientSays(Call(8, "echo"));
  EXPECT_EQ(ServerGets(1).size(), 1U);
}

// A wrapped server as many are written: it dispatches every message by its method and runs a
// tools/call whether or not it has an id (a notification gets no answer, but the tool runs).
// Records what it received and which tools it ran.
class MethodDispatchingServer {
 public:
  void Receive(const json& message) {
    received.push_back(message);
    const std::string method = message.value("method", std::string());
    if (method == "tools/call") ran.push_back(message["params"].value("name", std::string()));
  }
  std::vector<json> received;
  std::vector<std::string> ran;
};

json IdLessCall(const std::string& tool) {
  return {{"jsonrpc", "2.0"},
          {"method", "tools/call"},
          {"params", {{"name", tool}, {"arguments", json::object()}}}};
}

TEST_F(RelayTest, AnIdLessToolsCallIsDecidedByTheGateLikeAnyToolsCall) {
  // Issue #33: the relay gated tools/call only when it had an id; without one it went through
  // as a notification, and a server that dispatches by method ran the denied tool.
  gate_.deny = {"rm"};
  // Twin, the gate bypassed: the message itself is the attack. The server, handed it directly,
  // runs the denied tool.
  {
    MethodDispatchingServer direct;
    direct.Receive(IdLessCall("rm"));
    ASSERT_EQ(direct.ran, std::vector<std::string>{"rm"});
  }
  Start();
  MethodDispatchingServer server;
  ClientSays(IdLessCall("rm"));
  for (const json& m : ServerGets(0)) server.Receive(m);
  EXPECT_TRUE(server.received.empty());
  EXPECT_TRUE(server.ran.empty());
  ASSERT_EQ(gate_.checks.size(), 1U);
  EXPECT_EQ(gate_.checks[0].tool, "rm");
  EXPECT_TRUE(gate_.checks[0].id.is_null());
  EXPECT_EQ(relay_->stats().calls_denied, 1U);
  EXPECT_EQ(relay_->stats().notifications_dropped, 1U);
  EXPECT_TRUE(ClientGets(0).empty());  // no id: nobody to answer
  // An allowed tool, id-less, is forwarded as it came: the gate decides, not the missing id.
  ClientSays(IdLessCall("echo"));
  for (const json& m : ServerGets(1)) server.Receive(m);
  ASSERT_EQ(server.received.size(), 1U);
  EXPECT_EQ(server.received[0], IdLessCall("echo"));
  EXPECT_FALSE(server.received[0].contains("id"));
  EXPECT_EQ(server.ran, std::vector<std::string>{"echo"});
  EXPECT_EQ(gate_.checks.size(), 2U);
  EXPECT_TRUE(gate_.results.empty());  // no answer comes for it, so no outcome either
  // Malformed params: dropped without a gate call (the server would not know what to run).
  ClientSays(json{{"jsonrpc", "2.0"}, {"method", "tools/call"}, {"params", {{"name", 7}}}});
  EXPECT_TRUE(ServerGets(0).empty());
  EXPECT_EQ(gate_.checks.size(), 2U);
  EXPECT_EQ(relay_->stats().notifications_dropped, 2U);
  EXPECT_FALSE(end_.has_value());
}

TEST_F(RelayTest, AnIdLessToolsCallWaitsForTheGateAndADeferredDenialDropsIt) {
  gate_.deny = {"rm"};
  gate_.defer = true;
  Start();
  ClientSays(IdLessCall("rm"));
  ClientSays(IdLessCall("echo"));
  EXPECT_TRUE(ServerGets(0).empty());  // nothing goes before the gate has spoken
  ASSERT_EQ(gate_.deferred.size(), 2U);
  gate_.Answer();  // rm: denied
  gate_.Answer();  // echo: allowed
  const std::vector<json> at_server = ServerGets(1);
  ASSERT_EQ(at_server.size(), 1U);
  EXPECT_EQ(at_server[0], IdLessCall("echo"));
}

TEST_F(RelayTest, OnlyMethodsOnTheListReachTheServer) {
  Start();
  MethodDispatchingServer server;
  // A request of a method cagent does not know: -32601 from the relay, not forwarded.
  ClientSays(Request(1, "x/run"));
  ClientSays(json{{"jsonrpc", "2.0"}, {"method", "x/run"}, {"params", json::object()}});
  // A request's method without an id, and a notification's method with one: neither is that
  // method as MCP defines it.
  ClientSays(json{{"jsonrpc", "2.0"}, {"method", "resources/read"}, {"params", {{"uri", "x"}}}});
  ClientSays(Request(2, "notifications/initialized"));
  for (const json& m : ServerGets(0)) server.Receive(m);
  EXPECT_TRUE(server.received.empty());
  const std::vector<json> at_client = ClientGets(2);
  ASSERT_EQ(at_client.size(), 2U);
  EXPECT_EQ(at_client[0]["id"], 1);
  EXPECT_EQ(at_client[0]["error"]["code"], -32601);
  EXPECT_EQ(at_client[1]["id"], 2);
  EXPECT_EQ(at_client[1]["error"]["code"], -32601);
  EXPECT_EQ(relay_->stats().methods_refused, 4U);
  EXPECT_EQ(relay_->stats().notifications_dropped, 2U);
  EXPECT_TRUE(gate_.checks.empty());
  // Twin: the methods of the list, in their own form, are forwarded.
  ClientSays(Request(3, "resources/read"));
  ClientSays(json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  ClientSays(Request(4, "ping"));
  for (const json& m : ServerGets(3)) server.Receive(m);
  ASSERT_EQ(server.received.size(), 3U);
  EXPECT_EQ(server.received[0]["method"], "resources/read");
  EXPECT_EQ(server.received[1]["method"], "notifications/initialized");
  EXPECT_EQ(server.received[2]["method"], "ping");
}

TEST_F(RelayTest, ABatchIsRefusedWholeAndNothingInItReachesTheServer) {
  // Batching left MCP in 2025-06-18; a batch is refused as one message, so no element of it (an
  // id-less tools/call least of all) is forwarded or even shown to the gate.
  gate_.deny = {"rm"};
  Start();
  ClientSays(json::array({IdLessCall("rm"), Call(1, "rm"), Call(2, "echo"), Request(3, "ping")}));
  const std::vector<json> at_client = ClientGets(1);
  ASSERT_EQ(at_client.size(), 1U);
  EXPECT_TRUE(at_client[0]["id"].is_null());
  EXPECT_EQ(at_client[0]["error"]["code"], -32600);
  EXPECT_TRUE(ServerGets(0).empty());
  EXPECT_TRUE(gate_.checks.empty());
  // Twin: the same messages one by one are each decided on their own.
  ClientSays(Call(2, "echo"));
  EXPECT_EQ(ServerGets(1).size(), 1U);
}

TEST(RelayPiecesTest, ClassifyClientMethodByMethodAndForm) {
  EXPECT_EQ(ClassifyClientMethod("tools/call", true), ClientMethod::kToolsCall);
  EXPECT_EQ(ClassifyClientMethod("tools/call", false), ClientMethod::kToolsCall);
  EXPECT_EQ(ClassifyClientMethod("tools/list", true), ClientMethod::kForwarded);
  EXPECT_EQ(ClassifyClientMethod("tools/list", false), ClientMethod::kRefused);
  EXPECT_EQ(ClassifyClientMethod("notifications/cancelled", false), ClientMethod::kForwarded);
  EXPECT_EQ(ClassifyClientMethod("notifications/cancelled", true), ClientMethod::kRefused);
  EXPECT_EQ(ClassifyClientMethod("tools/call ", true), ClientMethod::kRefused);
  EXPECT_EQ(ClassifyClientMethod("Tools/Call", true), ClientMethod::kRefused);
  EXPECT_EQ(ClassifyClientMethod("", false), ClientMethod::kRefused);
  EXPECT_EQ(ClassifyClientMethod("rpc.discover", true), ClientMethod::kRefused);
}

TEST_F(RelayTest, ServerCannotAnswerADeniedCallOrAnIdTheClientNeverSent) {
  gate_.deny = {"secret"};
  Start();
  ClientSays(Call(3, "secret"));
  ASSERT_EQ(ClientGets(1).size(), 1U);  // the relay's denial
  ServerSays(TextResult(3, "here is the secret anyway"));
  ServerSays(TextResult(99, "an answer to nothing"));
  ServerSays(TextResult("three", "a string id nobody used"));
  EXPECT_TRUE(ClientGets(0).empty());
  EXPECT_EQ(relay_->stats().unmatched_responses, 3U);
  EXPECT_TRUE(gate_.results.empty());
  // Twin: the answer to a forwarded request is delivered, once; a second answer is dropped.
  ClientSays(Request(4, "ping"));
  ASSERT_EQ(ServerGets(1).size(), 1U);
  ServerSays(json{{"jsonrpc", "2.0"}, {"id", 4}, {"result", json::object()}});
  ServerSays(json{{"jsonrpc", "2.0"}, {"id", 4}, {"result", {{"again", true}}}});
  auto at_client = ClientGets(1);
  ASSERT_EQ(at_client.size(), 1U);
  EXPECT_EQ(at_client[0]["result"], json::object());
}

TEST_F(RelayTest, ServerCannotAnswerACallTheGateIsStillDeciding) {
  gate_.defer = true;
  Start();
  ClientSays(Call(5, "echo"));
  EXPECT_TRUE(ServerGets(0).empty());
  ServerSays(TextResult(5, "guessed"));
  EXPECT_TRUE(ClientGets(0).empty());
  ASSERT_EQ(gate_.deferred.size(), 1U);
  gate_.Answer();  // allow
  ASSERT_EQ(ServerGets(1).size(), 1U);
  ServerSays(TextResult(5, "real"));
  auto at_client = ClientGets(1);
  ASSERT_EQ(at_client.size(), 1U);
  EXPECT_EQ(at_client[0]["result"]["content"][0]["text"], "real");
}

TEST_F(RelayTest, CancelledWhileBeingCheckedIsNeitherForwardedNorAnswered) {
  gate_.defer = true;
  Start();
  ClientSays(Call(6, "echo"));
  ClientSays(json{{"jsonrpc", "2.0"},
                  {"method", "notifications/cancelled"},
                  {"params", {{"requestId", 6}, {"reason", "user"}}}});
  io_.run_for(20ms);
  gate_.Answer();
  EXPECT_TRUE(ServerGets(0).empty());
  EXPECT_TRUE(ClientGets(0).empty());
}

TEST_F(RelayTest, DuplicateKeysCannotMakeTheServerSeeAnotherToolThanTheGate) {
  gate_.deny = {"rm"};
  Start();
  // Two "name" keys: a parser that keeps the first would run "rm" if the line went through as
  // sent. The relay forwards the value it checked, with one name.
  ClientSays(std::string(R"({"jsonrpc":"2.0","id":1,"method":"tools/call",)") +
             R"("params":{"name":"rm","name":"echo","arguments":{}}})");
  auto raw = Collect(*server_lines_, 1);
  ASSERT_EQ(gate_.checks.size(), 1U);
  const std::string checked = gate_.checks[0].tool;
  if (checked == "rm") {
    EXPECT_TRUE(raw.empty());
    return;
  }
  ASSERT_EQ(raw.size(), 1U);
  EXPECT_EQ(raw[0].find("\"rm\""), std::string::npos) << raw[0];
  EXPECT_EQ(json::parse(raw[0])["params"]["name"], checked);
}

TEST_F(RelayTest, MalformedClientFramesGetErrorsAndTheSessionGoesOn) {
  Start();
  ClientSays("{not json");
  ClientSays(R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":)");
  ClientSays(R"([{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}])");
  ClientSays(R"({"jsonrpc":"1.0","id":4,"method":"ping"})");
  ClientSays(R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"arguments":{}}})");
  ClientSays(R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})");
  ClientSays(R"("just a string")");
  auto at_client = ClientGets(7);
  ASSERT_EQ(at_client.size(), 7U);
  EXPECT_EQ(at_client[0]["error"]["code"], -32700);
  EXPECT_TRUE(at_client[0]["id"].is_null());
  EXPECT_EQ(at_client[1]["error"]["code"], -32700);
  EXPECT_EQ(at_client[1]["id"], 2);  // found in the line's text
  EXPECT_EQ(at_client[2]["error"]["code"], -32600);
  EXPECT_EQ(at_client[3]["error"]["code"], -32600);
  EXPECT_EQ(at_client[3]["id"], 4);
  EXPECT_EQ(at_client[4]["error"]["code"], -32602);
  EXPECT_EQ(at_client[5]["error"]["code"], -32600);
  EXPECT_EQ(at_client[6]["error"]["code"], -32600);
  EXPECT_TRUE(ServerGets(0).empty());
  EXPECT_TRUE(gate_.checks.empty());
  ClientSays(Request(10, "ping"));
  EXPECT_EQ(ServerGets(1).size(), 1U);
  EXPECT_FALSE(end_.has_value());
}

TEST_F(RelayTest, DeeplyNestedFramesAreRefused) {
  RelayOptions o;
  o.max_depth = 8;
  Start(o);
  std::string deep(20, '[');
  deep += std::string(20, ']');
  ClientSays(R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",)"
             R"("arguments":{"x":)" +
             deep + "}}}");
  auto at_client = ClientGets(1);
  ASSERT_EQ(at_client.size(), 1U);
  EXPECT_EQ(at_client[0]["error"]["code"], -32600);
  EXPECT_EQ(at_client[0]["id"], 1);
  EXPECT_TRUE(ServerGets(0).empty());
  // Twin: the same shape within the limit passes.
  ClientSays(R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo",)"
             R"("arguments":{"x":[[1]]}}})");
  EXPECT_EQ(ServerGets(1).size(), 1U);
}

TEST_F(RelayTest, OversizedClientLineIsRefusedWithoutBeingBufferedAndTheSessionGoesOn) {
  RelayOptions o;
  o.max_frame_bytes = 4096;
  Start(o);
  // 8 MiB in one line, written by another thread (the pipe holds 64 KiB), ending in a request
  // that must still be handled afterwards.
  std::string big = R"({"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo",)"
                    R"("arguments":{"blob":")" +
                    std::string(8U << 20, 'a') + "\"}}}\n" + JsonText(Request(12, "ping")) + "\n";
  std::thread writer([&] { WriteAll(client_w_.get(), big); });
  auto at_client = ClientGets(1);
  writer.join();
  ASSERT_EQ(at_client.size(), 1U);
  EXPECT_EQ(at_client[0]["id"], 11);
  EXPECT_EQ(at_client[0]["error"]["code"], -32600);
  auto at_server = ServerGets(1);
  ASSERT_EQ(at_server.size(), 1U);
  EXPECT_EQ(at_server[0]["id"], 12);
  EXPECT_TRUE(gate_.checks.empty());
}

TEST_F(RelayTest, MalformedOrOversizedServerFrameFailsThePendingRequestItNames) {
  RelayOptions o;
  o.max_frame_bytes = 4096;
  Start(o);
  ClientSays(Call(1, "echo"));
  ClientSays(Request(2, "resources/list"));
  ClientSays(Request(3, "prompts/list"));
  ASSERT_EQ(ServerGets(3).size(), 3U);
  ServerSays(R"({"jsonrpc":"2.0","id":1,"result":{"content":[}})");  // malformed
  ServerSays(R"({"jsonrpc":"2.0","id":2,"result":{"x":")" + std::string(10000, 'b') + "\"}}");
  ServerSays(R"({"jsonrpc":"2.0","result":)");  // no id: only dropped
  auto at_client = ClientGets(2);
  ASSERT_EQ(at_client.size(), 2U);
  EXPECT_EQ(at_client[0]["id"], 1);
  EXPECT_EQ(at_client[0]["error"]["code"], -32603);
  EXPECT_NE(at_client[0]["error"]["message"].get<std::string>().find("malformed"),
            std::string::npos);
  EXPECT_EQ(at_client[1]["id"], 2);
  EXPECT_NE(at_client[1]["error"]["message"].get<std::string>().find("oversized"),
            std::string::npos);
  ASSERT_EQ(gate_.results.size(), 1U);
  EXPECT_FALSE(gate_.results[0].ok);
  // The failed ids are no longer in progress: a late real answer is dropped.
  ServerSays(TextResult(1, "late"));
  EXPECT_TRUE(ClientGets(0).empty());
  // The untouched request still works.
  ServerSays(json{{"jsonrpc", "2.0"}, {"id", 3}, {"result", {{"prompts", json::array()}}}});
  EXPECT_EQ(ClientGets(1).size(), 1U);
  EXPECT_FALSE(end_.has_value());
}

TEST_F(RelayTest, ToolsListOffersOnlyToolsTheGateWouldNotDeny) {
  gate_.deny = {"shell"};
  Start();
  ClientSays(Request(1, "tools/list"));
  ASSERT_EQ(ServerGets(1).size(), 1U);
  ServerSays(
      json{{"jsonrpc", "2.0"},
           {"id", 1},
           {"result",
            {{"tools", json::array({{{"name", "echo"}, {"inputSchema", json::object()}},
                                    {{"name", "shell"}, {"inputSchema", json::object()}},
                                    {{"name", "add"}, {"inputSchema", json::object()}}})}}}});
  auto at_client = ClientGets(1);
  ASSERT_EQ(at_client.size(), 1U);
  const json& tools = at_client[0]["result"]["tools"];
  ASSERT_EQ(tools.size(), 2U);
  EXPECT_EQ(tools[0]["name"], "echo");
  EXPECT_EQ(tools[1]["name"], "add");
  EXPECT_EQ(at_client[0]["result"]["_meta"]["cagent/hiddenTools"], json::array({"shell"}));
  ASSERT_EQ(gate_.lists.size(), 1U);
  EXPECT_EQ(gate_.lists[0].first, (std::vector<std::string>{"echo", "add"}));
  EXPECT_EQ(gate_.lists[0].second, (std::vector<std::string>{"shell"}));
  // A hidden tool called anyway is still decided by the gate.
  ClientSays(Call(2, "shell"));
  auto denial = ClientGets(1);
  ASSERT_EQ(denial.size(), 1U);
  EXPECT_EQ(denial[0]["result"]["isError"], true);
  EXPECT_TRUE(ServerGets(0).empty());
}

TEST_F(RelayTest, ServerRequestsAreRelayedAndOnlyTheirAnswersGoBack) {
  Start();
  ServerSays(json{{"jsonrpc", "2.0"},
                  {"id", "s1"},
                  {"method", "sampling/createMessage"},
                  {"params", json::object()}});
  ServerSays(json{{"jsonrpc", "2.0"}, {"method", "notifications/message"}, {"params", {}}});
  auto at_client = ClientGets(2);
  ASSERT_EQ(at_client.size(), 2U);
  EXPECT_EQ(at_client[0]["id"], "s1");
  // The client answers it, and also "answers" an id the server never used.
  ClientSays(json{{"jsonrpc", "2.0"}, {"id", "s2"}, {"result", json::object()}});
  ClientSays(json{{"jsonrpc", "2.0"}, {"id", "s1"}, {"result", {{"ok", true}}}});
  auto at_server = ServerGets(1);
  ASSERT_EQ(at_server.size(), 1U);
  EXPECT_EQ(at_server[0]["id"], "s1");
  // A server reusing an id still in progress gets an error back; the client never sees it.
  ServerSays(json{{"jsonrpc", "2.0"}, {"id", 9}, {"method", "roots/list"}});
  ServerSays(json{{"jsonrpc", "2.0"}, {"id", 9}, {"method", "roots/list"}});
  EXPECT_EQ(ClientGets(1).size(), 1U);
  auto back = ServerGets(1);
  ASSERT_EQ(back.size(), 1U);
  EXPECT_EQ(back[0]["error"]["code"], -32600);
}

TEST_F(RelayTest, AClientIdInProgressCannotBeReused) {
  Start();
  ClientSays(Request(1, "ping"));
  ClientSays(Call(1, "echo"));
  auto at_client = ClientGets(1);
  ASSERT_EQ(at_client.size(), 1U);
  EXPECT_EQ(at_client[0]["error"]["code"], -32600);
  EXPECT_EQ(ServerGets(1).size(), 1U);  // only the ping
  EXPECT_TRUE(gate_.checks.empty());
}

TEST_F(RelayTest, ClientEofClosesTheServersInputAndItsAnswersStillArrive) {
  bool told = false;
  Start();
  relay_->SetOnClientClosed([&] { told = true; });
  ClientSays(Request(1, "ping"));
  client_w_.Reset();  // a client that sent a file of requests and is done
  auto at_server = ServerGets(1);
  EXPECT_EQ(at_server.size(), 1U);
  for (int i = 0; i < 100 && !server_lines_->eof; ++i) {
    io_.run_for(5ms);
    server_lines_->Take();
  }
  EXPECT_TRUE(server_lines_->eof);
  EXPECT_TRUE(told);
  EXPECT_FALSE(end_.has_value());
  // The server answers after its input closed, then exits: the answer reaches the client, then
  // the client's output closes.
  ServerSays(json{{"jsonrpc", "2.0"}, {"id", 1}, {"result", json::object()}});
  server_w_.Reset();
  auto at_client = ClientGets(1);
  ASSERT_EQ(at_client.size(), 1U);
  EXPECT_EQ(at_client[0]["result"], json::object());
  for (int i = 0; i < 100 && !client_lines_->eof; ++i) {
    io_.run_for(5ms);
    client_lines_->Take();
  }
  EXPECT_TRUE(client_lines_->eof);
  ASSERT_TRUE(end_.has_value());
  EXPECT_EQ(*end_, RelayEnd::kClientClosed);
}

TEST_F(RelayTest, ServerEofAnswersWhatWasPendingAndClosesTheClientsOutput) {
  Start();
  ClientSays(Call(1, "echo"));
  ASSERT_EQ(ServerGets(1).size(), 1U);
  server_w_.Reset();
  auto at_client = ClientGets(1);
  ASSERT_EQ(at_client.size(), 1U);
  EXPECT_EQ(at_client[0]["error"]["code"], -32603);
  for (int i = 0; i < 100 && !client_lines_->eof; ++i) {
    io_.run_for(5ms);
    client_lines_->Take();
  }
  EXPECT_TRUE(client_lines_->eof);
  ASSERT_TRUE(end_.has_value());
  EXPECT_EQ(*end_, RelayEnd::kServerClosed);
  ASSERT_EQ(gate_.results.size(), 1U);
  EXPECT_FALSE(gate_.results[0].ok);
}

TEST_F(RelayTest, RegularFilesWorkAsTheClientsEnds) {
  char in_name[] = "/tmp/cagent-relay-in-XXXXXX";
  char out_name[] = "/tmp/cagent-relay-out-XXXXXX";
  UniqueFd in(::mkstemp(in_name));
  UniqueFd out(::mkstemp(out_name));
  ASSERT_TRUE(in.valid() && out.valid());
  ::unlink(in_name);
  ::unlink(out_name);
  WriteAll(in.get(), JsonText(Request(1, "ping")) + "\n");
  ASSERT_EQ(::lseek(in.get(), 0, SEEK_SET), 0);
  Pipe server_in = Pipe::Make();
  Pipe server_out = Pipe::Make();
  LineReader server(server_in.r.get());
  relay_ = std::make_unique<Relay>(io_, gate_);
  std::string error;
  ASSERT_TRUE(relay_->Start(
      {std::move(in), std::move(out), std::move(server_in.w), std::move(server_out.r)},
      [this](RelayEnd why, const std::string&) { end_ = why; }, &error))
      << error;
  auto at_server = Parsed(Collect(server, 1));
  ASSERT_EQ(at_server.size(), 1U);
  EXPECT_EQ(at_server[0]["method"], "ping");
}

TEST_F(RelayTest, AServerThatDoesNotReadStopsTheRelayReadingTheClient) {
  // Twin pair: with a small queue bound the client's writer is held back (the relay stopped
  // reading); with a large one everything is taken in.
  for (const std::size_t bound : {std::size_t{64} << 10, std::size_t{64} << 20}) {
    SCOPED_TRACE(bound);
    io_.restart();
    RelayOptions o;
    o.max_queued_bytes = bound;
    Start(o);
    json note = {{"jsonrpc", "2.0"},
                 {"method", "notifications/progress"},
                 {"params", {{"progressToken", 1}, {"progress", 1}}}};
    const std::string line = JsonText(note) + "\n";
    std::string flood;
    while (flood.size() < (std::size_t{4} << 20)) flood += line;
    std::atomic<bool> done{false};
    std::thread writer([&] {
      std::size_t off = 0;
      while (off < flood.size()) {
        const ssize_t n = ::write(client_w_.get(), flood.data() + off, flood.size() - off);
        if (n <= 0) return;  // EPIPE once the relay is gone (SIGPIPE is ignored)
        off += static_cast<std::size_t>(n);
      }
      done = true;
    });
    for (int i = 0; i < 200 && !done; ++i) io_.run_for(5ms);
    const bool finished = done;
    relay_.reset();  // closes the relay's ends: a blocked writer gets EPIPE
    io_.run_for(5ms);
    writer.join();
    client_w_.Reset();
    if (bound < (std::size_t{1} << 20)) {
      EXPECT_FALSE(finished) << "the relay kept reading a client whose server does not read";
    } else {
      EXPECT_TRUE(finished);
    }
  }
}

TEST(RelayPiecesTest, JsonDepthSkipsStringsAndStopsAtTheLimit) {
  EXPECT_EQ(JsonDepth(R"({"a":[1,{"b":"[[[["}]})", 10), 3U);
  EXPECT_EQ(JsonDepth(std::string(1000, '['), 64), 65U);
  EXPECT_EQ(JsonDepth(R"("\"{{{")", 10), 0U);
}

TEST(RelayPiecesTest, ScanFrameHintFindsTheTopLevelIdAndMethod) {
  auto h = ScanFrameHint(R"({"jsonrpc":"2.0","params":{"id":5},"id":42,"method":"x")");
  EXPECT_EQ(h.id, 42);
  EXPECT_TRUE(h.has_method);
  h = ScanFrameHint(R"({"id":"a\"b","result":{"method":1})");
  EXPECT_EQ(h.id, "a\"b");
  EXPECT_FALSE(h.has_method);
  // A number cut by the end of the text is not trusted.
  EXPECT_TRUE(ScanFrameHint(R"({"id":12)").id.is_null());
  EXPECT_TRUE(ScanFrameHint(R"({"params":{"id":1}})").id.is_null());
}

}  // namespace
}  // namespace cagent::launcher::mcp
