// A scripted broker for the agent's tests: a thread on the other end of a socketpair that answers
// the agent's requests per a script. Runs in the test process.
//
// Each step of the script expects one request kind and answers it with zero or more frames
// (replies, unsolicited messages, raw bytes) and may then close the connection. `progress`
// requests are acked automatically (and recorded) unless auto-acking is switched off. The
// connection closes after the last step has answered (like the real broker after finish); with an
// empty script, the first request closes it. A step whose kind does not match is
// recorded as a script error and closes the connection, so a wrong agent fails its test instead of
// hanging; so does a silent agent (no request for `idle_timeout`).
//
// With check_model_turns on, the broker also plays protocol v2's binding rules (what the real
// broker enforces) and records a script error when the agent breaks one: every tool_request must
// name a call of the latest model_result it sent, once, with that call's name and arguments; in
// every model_call each assistant message's calls must be calls a model_result issued (same id,
// name and arguments), and each tool message must answer a call of the nearest assistant message
// before it, at most once. The issued calls are read back from the frames the handlers return.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/protocol.h"
#include "common/unique_fd.h"

namespace cagent::agent::testing {

// What one step sends back.
struct Response {
  std::vector<std::string> frames;  // complete frames (header + payload), sent in order
  bool close = false;               // close the connection after sending
};

using Handler = std::function<Response(const protocol::Message& request)>;

class ScriptedBroker {
 public:
  ScriptedBroker();
  ~ScriptedBroker();
  ScriptedBroker(const ScriptedBroker&) = delete;
  ScriptedBroker& operator=(const ScriptedBroker&) = delete;

  // The agent's end (call once, before Start()).
  UniqueFd TakeAgentEnd();
  // Appends a step: the next non-progress request must be of `kind`.
  ScriptedBroker& Expect(protocol::Kind kind, Handler handler);
  void set_auto_ack_progress(bool on) { auto_ack_progress_ = on; }
  void set_idle_timeout(std::chrono::milliseconds t) { idle_timeout_ = t; }
  void set_check_model_turns(bool on) { check_model_turns_ = on; }

  // Starts the thread; Join() waits for it (the connection closed by either side).
  void Start();
  void Join();

  // After Join(): every request received, in order, and script errors (empty when the agent
  // followed the script).
  [[nodiscard]] const std::vector<protocol::Message>& received() const { return received_; }
  // After Join(): the payload bytes of each request in received(), as the agent wrote them.
  [[nodiscard]] const std::vector<std::string>& received_payloads() const {
    return received_payloads_;
  }
  [[nodiscard]] const std::vector<std::string>& errors() const { return errors_; }
  // After Join(): the received requests of one kind.
  [[nodiscard]] std::vector<protocol::Message> Received(protocol::Kind kind) const;
  // Steps not reached.
  [[nodiscard]] std::size_t remaining_steps() const { return steps_.size() - next_step_; }

 private:
  void Run();
  bool SendAll(const std::vector<std::string>& frames);
  // The binding rules (check_model_turns): "" when `request` keeps them, else the problem.
  std::string CheckRequest(const protocol::Message& request);
  // Records the calls of any model_result among `frames` (the latest turn's become the ones a
  // tool_request may name).
  void NoteSentTurns(const std::vector<std::string>& frames);

  UniqueFd broker_end_;
  UniqueFd agent_end_;
  struct Step {
    protocol::Kind kind;
    Handler handler;
  };
  std::vector<Step> steps_;
  std::size_t next_step_ = 0;
  bool auto_ack_progress_ = true;
  std::chrono::milliseconds idle_timeout_{20000};
  bool check_model_turns_ = false;
  std::vector<protocol::ToolCall> issued_;       // every call of every model_result sent
  std::vector<protocol::ToolCall> latest_turn_;  // the calls of the last one
  std::vector<std::string> requested_;           // call ids of the latest turn already asked
  std::thread thread_;
  std::vector<protocol::Message> received_;
  std::vector<std::string> received_payloads_;
  std::vector<std::string> errors_;
};

// Protocol v2's conversation rule, as the real broker applies it to a model_call: "" when every
// assistant message's calls are among `issued` (same id, name and arguments) and every tool
// message answers a call of the nearest assistant message before it, at most once; else the first
// problem.
std::string ConversationProblem(const protocol::ModelCall& call,
                                const std::vector<protocol::ToolCall>& issued);

// ---- building answers ----

// A frame for `message`.
std::string Frame(const protocol::Message& message);
// A frame around raw payload bytes (malformed messages).
std::string RawFrame(std::string_view payload);

Response Reply(protocol::Kind kind, std::uint64_t id, protocol::Body body);
Response Reply(std::vector<protocol::Message> messages, bool close = false);

// Handlers for common steps.
Handler SendWelcome(protocol::Welcome welcome);
// model_result with this turn (turn numbers 1, 2, ... per handler; usage 100 in, 20 out).
Handler SendModelTurn(protocol::AssistantTurn turn);
// A turn of tool calls (stop_reason tool_calls). Each call is {id, name, arguments}.
protocol::AssistantTurn ToolTurn(std::vector<protocol::ToolCall> calls, std::string text = {});
// A turn of text only (stop_reason `reason`).
protocol::AssistantTurn TextTurn(std::string text,
                                 protocol::StopReason reason = protocol::StopReason::kEnd);
Handler Allow();
Handler Deny(std::string message, std::string rule = "deny run_command");
// decision{ask, pending} followed by approval{verdict}.
Handler AskThenApproval(protocol::Verdict verdict, std::string message = {});
// result_ack echoing the reported output, with `transform` applied (e.g. a redaction).
Handler AckResult(std::function<std::string(const std::string&)> transform = {});
Handler SendAck();
Handler SendError(protocol::ErrorCode code, std::string message);
// shutdown{status, reason} (id 0) and close.
Handler SendShutdown(std::string status, std::string reason);

// A welcome for tests: the given provider, all seven tools, the given workspace.
protocol::Welcome TestWelcome(const std::string& workspace, std::uint64_t max_turns = 0,
                              std::string provider = "replay");

}  // namespace cagent::agent::testing
