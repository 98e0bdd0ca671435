// Test helpers for the broker: a fake model provider, a fake approver, a scripted agent (the other
// end of a real socketpair) and a harness that wires them to a Broker with a compiled profile,
// the real AuditLog, Redactor and ApprovalBook.
//
// Everything runs on the test thread: the peer's sends and receives pump the io_context
// (poll / run_one_for) while they wait, so the broker's handlers, the fakes' completions and the
// test's assertions never race.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/protocol.h"
#include "common/unique_fd.h"
#include "launcher/broker/approver.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/broker.h"
#include "launcher/broker/redactor.h"
#include "launcher/model/model_provider.h"
#include "policy/language/ir.h"

namespace cagent::launcher::broker::testing {

using nlohmann::json;

using model::ModelError;
using model::ModelOutcome;
using model::ModelRequest;
using model::ModelResponse;

// A turn as a provider would return it: `text`, `calls` (id, name, arguments), 10 + 5 tokens.
ModelResponse Turn(std::string text, std::vector<protocol::ToolCall> calls = {},
                   protocol::Usage usage = {10, 5});
// One tool call.
protocol::ToolCall Call(std::string id, std::string name, json arguments = json::object());

// Answers model calls from a script. With `hold`, a call waits until Complete() is called.
class FakeModelProvider : public model::ModelProvider {
 public:
  explicit FakeModelProvider(boost::asio::io_context& io) : io_(io) {}

  [[nodiscard]] protocol::ModelInfo Info() const override;
  void Call(ModelRequest request, std::function<void(ModelOutcome)> done) override;
  void Cancel() override;

  // Outcomes handed out in order; when the script is empty, a default response (text "ok", no
  // calls, 10 + 5 tokens).
  void Script(ModelOutcome outcome) { script_.push_back(std::move(outcome)); }
  void set_hold(bool hold) { hold_ = hold; }
  // Completes the held call with the next scripted outcome (posted to the io_context).
  void Complete();

  std::vector<ModelRequest> requests;      // the requests as the provider received them
  std::uint64_t max_output_tokens = 4096;  // Info()'s
  int cancels = 0;
  [[nodiscard]] bool held() const { return static_cast<bool>(pending_); }

 private:
  ModelOutcome Next();
  boost::asio::io_context& io_;
  std::deque<ModelOutcome> script_;
  bool hold_ = false;
  std::function<void(ModelOutcome)> pending_;
};

// Answers approvals from a script (default: approved once). With `hold`, an ask waits until
// Complete(); Cancel() completes a pending ask as denied, as the contract says.
class FakeApprover : public Approver {
 public:
  explicit FakeApprover(boost::asio::io_context& io) : io_(io) {}

  void Ask(const ApprovalRequest& request, std::function<void(ApprovalOutcome)> done) override;
  void Cancel() override;

  void Script(ApprovalOutcome outcome) { script_.push_back(outcome); }
  void set_hold(bool hold) { hold_ = hold; }
  void Complete();

  std::vector<ApprovalRequest> requests;
  int cancels = 0;

 private:
  ApprovalOutcome Next();
  boost::asio::io_context& io_;
  std::deque<ApprovalOutcome> script_;
  bool hold_ = false;
  std::function<void(ApprovalOutcome)> pending_;
};

// The agent's end of the socketpair, non-blocking, driven from the test thread.
class TestPeer {
 public:
  TestPeer(boost::asio::io_context& io, UniqueFd fd);

  // Writes all of `bytes`, pumping the io_context whenever the socket is full. Returns false when
  // the connection is gone or `timeout` passed with the socket still full.
  bool SendRaw(std::string_view bytes,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  bool SendJson(const json& message);
  // Frames a payload of raw text (not necessarily JSON).
  bool SendPayload(std::string_view payload);

  // The next frame the broker sent, parsed; nullopt on timeout or when the broker closed.
  std::optional<json> Recv(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  // Waits for EOF from the broker; frames still arriving are kept for Recv.
  bool WaitClosed(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  // Runs the io_context for `d`, reading what arrives (or not, with read = false).
  void Pump(std::chrono::milliseconds d, bool read = true);

  void ShutdownWrite();
  void Close() { fd_.Reset(); }
  [[nodiscard]] bool eof() const { return eof_; }
  [[nodiscard]] int fd() const { return fd_.get(); }

 private:
  // One round: runs ready handlers, reads what is there; waits briefly when nothing happened.
  void Step(bool read);
  bool ReadSome();
  std::optional<json> Pop();

  boost::asio::io_context& io_;
  UniqueFd fd_;
  protocol::FrameDecoder decoder_{protocol::kMaxFrameBytes};
  std::deque<json> inbox_;
  bool eof_ = false;
};

// Builds a profile from text (extends resolve to the built-in profiles); fails the test when it
// does not compile.
std::shared_ptr<const policy::Policy> CompileProfile(const std::string& text,
                                                     const std::string& name = "test.cagent");

// A test profile: base, plus writes, an ask rule for lockfiles and for npm, a denied cat, and
// on-request approvals.
extern const char* const kTestProfile;
// The home the harness binds "~" to (the broker's BrokerConfig::bindings.home).
inline constexpr const char* kTestHome = "/home/tester";

struct HarnessOptions {
  std::string profile = kTestProfile;
  std::optional<Budgets> budgets;     // default: BudgetsFromPolicy
  std::optional<TokenPrices> prices;  // the model's (BrokerConfig::model_prices)
  LoopLimits loop;
  ApprovalMode approval = ApprovalMode::kPolicy;
  std::uint32_t max_protocol_errors = 8;
  std::uint32_t max_frame_bytes = protocol::kMaxFrameBytes;
  std::size_t pause_reading_above = 1U << 20;
  std::chrono::microseconds max_poll{0};  // BrokerConfig::max_poll
  bool with_approver = true;
  bool with_model = true;
  // A real provider to use instead of the fake (made on the harness's io_context), e.g. the
  // OpenAI provider pointed at a FakeProvider on loopback.
  std::function<std::unique_ptr<model::ModelProvider>(boost::asio::io_context&)> make_model;
  // A served session (BrokerConfig::serve) taking its calls from here. Not owned.
  CallSource* calls = nullptr;
  // Secrets the redactor knows.
  std::vector<std::pair<std::string, std::string>> secrets = {
      {"env:TEST_API_TOKEN", "tok-1234567890-secret"}};
};

class Harness {
 public:
  explicit Harness(HarnessOptions options = {});
  ~Harness();

  // The next request id (strictly increasing).
  std::uint64_t NextId() { return ++last_id_; }
  // A message of `type` with v, id (NextId() unless given) and the fields of `body`.
  json Msg(const std::string& type, json body = json::object(),
           std::optional<std::uint64_t> id = {});
  // Sends and returns the reply (nullopt when none came).
  std::optional<json> Request(const json& message);
  // hello -> welcome; fails the test if the reply is not a welcome.
  json Hello();
  // A model turn: scripts the fake provider to answer the next model call with `calls` (and
  // `text`), sends a model_call with `messages` (none by default), returns the reply.
  json ModelTurn(std::vector<protocol::ToolCall> calls, std::string text = "",
                 json messages = json::array());
  // The model asks for one call of `tool` (ModelTurn with one call, id "call_N"), then the agent
  // asks the broker about it; returns the decision (or error) reply.
  json ToolRequest(const std::string& tool, json args, std::vector<std::string> paths = {});
  // A tool_request naming `call_id`, with no model turn first; returns the reply.
  json ToolRequestAs(const std::string& call_id, const std::string& tool, json args,
                     std::vector<std::string> paths = {});
  json ToolResult(std::uint64_t request, bool ok, const std::string& output,
                  std::vector<std::string> changed = {});

  // Runs the io_context until the session has ended and on_end ran (or the timeout passed).
  bool WaitEnded(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

  boost::asio::io_context io;
  std::shared_ptr<const policy::Policy> policy;
  std::string dir;        // temporary directory holding the audit log
  std::string workspace;  // dir + "/workspace", empty: the broker's workspace (on the host)
  std::string audit_path;
  std::optional<AuditLog> audit;
  Redactor redactor;
  ApprovalBook book;
  FakeModelProvider model{io};
  std::unique_ptr<model::ModelProvider> real_model;  // HarnessOptions::make_model
  FakeApprover approver{io};
  std::unique_ptr<Broker> broker;
  std::unique_ptr<TestPeer> peer;

  std::vector<BrokerEvent> events;
  std::optional<BrokerOutcome> ended;  // set by on_end
  int on_end_calls = 0;

  // The audit log's entries, parsed.
  [[nodiscard]] std::vector<json> AuditEntries() const;

 private:
  std::uint64_t last_id_ = 0;
  std::uint64_t last_call_ = 0;
};

// The frame header announcing `n` bytes.
std::string Header(std::uint32_t n);

}  // namespace cagent::launcher::broker::testing
