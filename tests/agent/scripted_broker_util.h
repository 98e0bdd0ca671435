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

  // Starts the thread; Join() waits for it (the connection closed by either side).
  void Start();
  void Join();

  // After Join(): every request received, in order, and script errors (empty when the agent
  // followed the script).
  [[nodiscard]] const std::vector<protocol::Message>& received() const { return received_; }
  [[nodiscard]] const std::vector<std::string>& errors() const { return errors_; }
  // After Join(): the received requests of one kind.
  [[nodiscard]] std::vector<protocol::Message> Received(protocol::Kind kind) const;
  // Steps not reached.
  [[nodiscard]] std::size_t remaining_steps() const { return steps_.size() - next_step_; }

 private:
  void Run();
  bool SendAll(const std::vector<std::string>& frames);

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
  std::thread thread_;
  std::vector<protocol::Message> received_;
  std::vector<std::string> errors_;
};

// ---- building answers ----

// A frame for `message`.
std::string Frame(const protocol::Message& message);
// A frame around raw payload bytes (malformed messages).
std::string RawFrame(std::string_view payload);

Response Reply(protocol::Kind kind, std::uint64_t id, protocol::Body body);
Response Reply(std::vector<protocol::Message> messages, bool close = false);

// Handlers for common steps.
Handler SendWelcome(protocol::Welcome welcome);
// model_result with this provider body (usage from body["usage"] when present).
Handler SendModelTurn(nlohmann::json body);
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

// A welcome for tests: replay provider, all seven tools, the given workspace.
protocol::Welcome TestWelcome(const std::string& workspace, std::uint64_t max_turns = 0,
                              std::string provider = "replay");

}  // namespace cagent::agent::testing
