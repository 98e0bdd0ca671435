#include "tests/launcher/broker/broker_test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/json_text.h"
#include "policy/language/diagnostics.h"
#include "policy/language/loader.h"

namespace cagent::launcher::broker::testing {

// GCC 12 reports a ModelError member of a ModelOutcome variant that holds a ModelResponse as
// "maybe uninitialized" when the variant is moved into a lambda capture (a known false positive
// of its variant analysis; GCC 13 does not). Clang has no such warning (and -Werror refuses an
// unknown one).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// ---- FakeModelProvider ----

ModelResponse Turn(std::string text, std::vector<protocol::ToolCall> calls, protocol::Usage usage) {
  ModelResponse r;
  r.turn.stop_reason =
      calls.empty() ? protocol::StopReason::kEnd : protocol::StopReason::kToolCalls;
  r.provider_stop_reason = calls.empty() ? "end_turn" : "tool_use";
  r.raw = json{{"text", text}, {"calls", calls.size()}};
  r.turn.text = std::move(text);
  r.turn.tool_calls = std::move(calls);
  r.usage = usage;
  return r;
}

protocol::ToolCall Call(std::string id, std::string name, json arguments) {
  protocol::ToolCall c;
  c.id = std::move(id);
  c.name = std::move(name);
  c.arguments = std::move(arguments);
  return c;
}

protocol::ModelInfo FakeModelProvider::Info() const {
  return protocol::ModelInfo{"fake", "fake-model", 100000, max_output_tokens};
}

ModelOutcome FakeModelProvider::Next() {
  if (script_.empty()) return Turn("ok");
  ModelOutcome out = std::move(script_.front());
  script_.pop_front();
  return out;
}

void FakeModelProvider::Call(ModelRequest request, std::function<void(ModelOutcome)> done) {
  requests.push_back(std::move(request));
  pending_ = std::move(done);
  if (!hold_) Complete();
}

void FakeModelProvider::Complete() {
  if (!pending_) return;
  auto done = std::move(pending_);
  pending_ = nullptr;
  asio::post(io_,
             [done = std::move(done), outcome = Next()]() mutable { done(std::move(outcome)); });
}

void FakeModelProvider::Cancel() {
  ++cancels;
  pending_ = nullptr;
}

// ---- FakeApprover ----

ApprovalOutcome FakeApprover::Next() {
  if (script_.empty()) return ApprovalOutcome{true, ApprovalScope::kOnce, "test"};
  ApprovalOutcome out = script_.front();
  script_.pop_front();
  return out;
}

void FakeApprover::Ask(const ApprovalRequest& request, std::function<void(ApprovalOutcome)> done) {
  requests.push_back(request);
  pending_ = std::move(done);
  if (!hold_) Complete();
}

void FakeApprover::Complete() {
  if (!pending_) return;
  auto done = std::move(pending_);
  pending_ = nullptr;
  asio::post(io_, [done = std::move(done), outcome = Next()] { done(outcome); });
}

void FakeApprover::Cancel() {
  ++cancels;
  if (!pending_) return;
  auto done = std::move(pending_);
  pending_ = nullptr;
  done(ApprovalOutcome{false, ApprovalScope::kDenied, "cancelled"});
}

// ---- TestPeer ----

TestPeer::TestPeer(asio::io_context& io, UniqueFd fd) : io_(io), fd_(std::move(fd)) {
  const int flags = ::fcntl(fd_.get(), F_GETFL);
  ::fcntl(fd_.get(), F_SETFL, flags | O_NONBLOCK);
}

void TestPeer::Step(bool read) {
  if (io_.stopped()) io_.restart();
  std::size_t ran = io_.poll();
  bool got = read && ReadSome();
  if (ran == 0 && !got) {
    if (io_.stopped()) io_.restart();
    io_.run_one_for(std::chrono::milliseconds(2));
  }
}

bool TestPeer::ReadSome() {
  if (eof_ || !fd_.valid()) return false;
  bool any = false;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n > 0) {
      any = true;
      if (!decoder_.Feed(std::string_view(buf, static_cast<std::size_t>(n))).ok()) {
        ADD_FAILURE() << "the broker sent a bad frame header";
        eof_ = true;
        return any;
      }
      while (auto payload = decoder_.Next()) {
        json j = json::parse(*payload, nullptr, false);
        EXPECT_FALSE(j.is_discarded()) << "the broker sent a frame that is not JSON: " << *payload;
        inbox_.push_back(std::move(j));
      }
      continue;
    }
    if (n == 0) {
      eof_ = true;
      return true;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) eof_ = true;  // ECONNRESET and the like
    return any;
  }
}

std::optional<json> TestPeer::Pop() {
  if (inbox_.empty()) return std::nullopt;
  json j = std::move(inbox_.front());
  inbox_.pop_front();
  return j;
}

bool TestPeer::SendRaw(std::string_view bytes, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      deadline = Clock::now() + timeout;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (Clock::now() > deadline) return false;
      Step(/*read=*/true);
      continue;
    }
    return false;
  }
  // Let the broker see it.
  if (io_.stopped()) io_.restart();
  io_.poll();
  return true;
}

bool TestPeer::SendPayload(std::string_view payload) {
  return SendRaw(Header(static_cast<std::uint32_t>(payload.size())) + std::string(payload));
}

bool TestPeer::SendJson(const json& message) { return SendPayload(message.dump()); }

std::optional<json> TestPeer::Recv(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (auto j = Pop()) return j;
    if (eof_ && inbox_.empty()) {
      // Drain what the broker may still have to run, but nothing more can arrive.
      return std::nullopt;
    }
    if (Clock::now() > deadline) return std::nullopt;
    Step(/*read=*/true);
  }
}

bool TestPeer::WaitClosed(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!eof_) {
    if (Clock::now() > deadline) return false;
    Step(/*read=*/true);
  }
  return true;
}

void TestPeer::Pump(std::chrono::milliseconds d, bool read) {
  const auto deadline = Clock::now() + d;
  while (Clock::now() < deadline) Step(read);
}

void TestPeer::ShutdownWrite() { ::shutdown(fd_.get(), SHUT_WR); }

// ---- profiles ----

const char* const kTestProfile = R"(extends base
approval on-request
tools {
  allow write_file edit_file
  ask write_file edit_file on **/Cargo.lock
  deny write_file edit_file on config/**
}
commands {
  ask npm
  deny cat
}
)";

std::shared_ptr<const policy::Policy> CompileProfile(const std::string& text,
                                                     const std::string& name) {
  policy::SearchPath search;
  policy::Compiled c = policy::CompileText(name, text, search);
  EXPECT_TRUE(c.ok()) << policy::RenderAll(*c.sources, c.diags);
  return c.policy;
}

std::string Header(std::uint32_t n) {
  std::string h(4, '\0');
  h[0] = static_cast<char>((n >> 24) & 0xff);
  h[1] = static_cast<char>((n >> 16) & 0xff);
  h[2] = static_cast<char>((n >> 8) & 0xff);
  h[3] = static_cast<char>(n & 0xff);
  return h;
}

// ---- Harness ----

Harness::Harness(HarnessOptions options) : redactor(options.secrets) {
  policy = CompileProfile(options.profile);
  if (!policy) return;
  std::string tmpl = ::testing::TempDir() + "cagent_broker_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return;
  }
  dir = tmpl;
  audit_path = dir + "/audit.jsonl";
  // A real directory: loop detection digests the workspace's state on the host.
  workspace = dir + "/workspace";
  if (::mkdir(workspace.c_str(), 0700) != 0) {
    ADD_FAILURE() << "mkdir " << workspace << " failed";
    return;
  }
  auto opened = AuditLog::Open(audit_path, "run-test", "digest-test");
  if (!opened.ok()) {
    ADD_FAILURE() << opened.error().Message();
    return;
  }
  audit.emplace(std::move(*opened));

  BrokerConfig config;
  config.run_id = "run-test";
  config.policy = policy;
  config.policy_digest = "digest-test";
  config.task = "fix the failing test";
  // A binding like a run's: the harness's workspace, and a home that is not this machine's.
  config.bindings = policy::Binding{workspace, kTestHome, "/home/cagent"};
  config.budgets = options.budgets ? *options.budgets : BudgetsFromPolicy(*policy);
  config.model_prices = options.prices;
  config.loop = options.loop;
  config.approval = options.approval;
  config.max_protocol_errors = options.max_protocol_errors;
  config.max_frame_bytes = options.max_frame_bytes;
  config.pause_reading_above = options.pause_reading_above;
  config.max_poll = options.max_poll;
  config.serve = options.calls != nullptr;
  config.client_name = "test-client";

  BrokerServices services;
  services.audit = &*audit;
  services.redactor = &redactor;
  services.approver = options.with_approver ? &approver : nullptr;
  services.approvals = &book;
  if (options.make_model) real_model = options.make_model(io);
  services.model = real_model ? real_model.get() : options.with_model ? &model : nullptr;
  services.calls = options.calls;

  broker = std::make_unique<Broker>(io, std::move(config), services);
  broker->SetOnEnd([this](const BrokerOutcome& o) {
    ++on_end_calls;
    ended = o;
  });
  broker->SetOnEvent([this](const BrokerEvent& e) { events.push_back(e); });

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    ADD_FAILURE() << "socketpair failed";
    return;
  }
  peer = std::make_unique<TestPeer>(io, UniqueFd(sv[1]));
  broker->Start(UniqueFd(sv[0]));
}

Harness::~Harness() {
  broker.reset();
  peer.reset();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

json Harness::Msg(const std::string& type, json body, std::optional<std::uint64_t> id) {
  json m = body.is_object() ? std::move(body) : json::object();
  m["v"] = protocol::kVersion;
  m["type"] = type;
  m["id"] = id ? *id : NextId();
  return m;
}

std::optional<json> Harness::Request(const json& message) {
  if (!peer->SendJson(message)) return std::nullopt;
  return peer->Recv();
}

json Harness::Hello() {
  auto reply =
      Request(Msg("hello", {{"agent", "test-agent/1"}, {"protocols", {protocol::kVersion}}}));
  EXPECT_TRUE(reply.has_value());
  if (!reply) return json();
  EXPECT_EQ((*reply)["type"], "welcome") << reply->dump();
  return *reply;
}

json Harness::ModelTurn(std::vector<protocol::ToolCall> calls, std::string text, json messages) {
  model.Script(Turn(std::move(text), std::move(calls)));
  auto reply = Request(Msg("model_call", {{"system", "test"}, {"messages", std::move(messages)}}));
  EXPECT_TRUE(reply.has_value());
  return reply ? *reply : json();
}

json Harness::ToolRequest(const std::string& tool, json args, std::vector<std::string> paths) {
  const std::string id = "call_" + std::to_string(++last_call_);
  const json turn = ModelTurn({Call(id, tool, args)});
  EXPECT_EQ(turn.value("type", ""), "model_result") << JsonText(turn);
  return ToolRequestAs(id, tool, std::move(args), std::move(paths));
}

json Harness::ToolRequestAs(const std::string& call_id, const std::string& tool, json args,
                            std::vector<std::string> paths) {
  auto reply = Request(Msg("tool_request", {{"call_id", call_id},
                                            {"tool", tool},
                                            {"args", std::move(args)},
                                            {"paths", std::move(paths)}}));
  EXPECT_TRUE(reply.has_value());
  return reply ? *reply : json();
}

json Harness::ToolResult(std::uint64_t request, bool ok, const std::string& output,
                         std::vector<std::string> changed) {
  auto reply = Request(Msg("tool_result", {{"request", request},
                                           {"ok", ok},
                                           {"output", output},
                                           {"changed_paths", std::move(changed)}}));
  EXPECT_TRUE(reply.has_value());
  return reply ? *reply : json();
}

bool Harness::WaitEnded(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (on_end_calls == 0) {
    if (Clock::now() > deadline) return false;
    peer->Pump(std::chrono::milliseconds(5));
  }
  return true;
}

std::vector<json> Harness::AuditEntries() const {
  std::vector<json> out;
  std::ifstream in(audit_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    out.push_back(json::parse(line, nullptr, false));
  }
  return out;
}

}  // namespace cagent::launcher::broker::testing
