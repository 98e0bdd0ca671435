// Test helpers for the MCP layer: a scripted tool handler and a session harness that records
// what the session sends.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/mcp/protocol/session.h"

namespace cagent::launcher::mcp::testing {

// Offers `tools`; each tools/call is kept in `calls` and handed to `on_call` (when set), which may
// answer it at once or leave it in progress.
class FakeHandler : public ToolHandler {
 public:
  FakeHandler();
  std::vector<ToolDefinition> ListTools() override {
    ++list_calls;
    return tools;
  }
  void Call(std::shared_ptr<ToolCall> call) override;

  std::vector<ToolDefinition> tools;
  std::vector<std::shared_ptr<ToolCall>> calls;
  int list_calls = 0;  // how often ListTools ran
  std::function<void(const std::shared_ptr<ToolCall>&)> on_call;
};

// The tools FakeHandler offers by default: "echo" (answers its arguments' "text" at once) and
// "slow" (left in progress).
std::vector<ToolDefinition> DefaultTools();

// One session on its own io_context; everything it sends is kept in `sent`.
class SessionHarness {
 public:
  explicit SessionHarness(SessionOptions options = {});
  // Sends `message` (serialised) as one frame.
  void Send(const nlohmann::json& message);
  void SendText(const std::string& frame, bool too_large = false);
  // initialize with `capabilities` and `version`, then notifications/initialized; returns the
  // initialize response. `sent` is cleared afterwards.
  nlohmann::json Initialize(nlohmann::json capabilities = nlohmann::json::object(),
                            const std::string& version = "2025-11-25");
  // A tools/call request.
  void Call(const nlohmann::json& id, const std::string& tool,
            nlohmann::json arguments = nlohmann::json::object(),
            nlohmann::json progress_token = nullptr);
  // Runs posted work.
  void Poll();
  // The messages sent so far, and clears them.
  std::vector<Outgoing> Take();
  // The only message sent since the last Take (fails the test when there is not exactly one).
  Outgoing TakeOne();

  boost::asio::io_context io;
  FakeHandler handler;
  std::vector<Outgoing> sent;
  std::unique_ptr<Session> session;
};

}  // namespace cagent::launcher::mcp::testing
