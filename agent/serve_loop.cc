#include "agent/serve_loop.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace cagent::agent {
namespace {

using Status = LoopResult::Status;

class ServeLoop {
 public:
  ServeLoop(BrokerClient& client, Toolbox& toolbox, const protocol::Welcome& welcome)
      : client_(client), toolbox_(toolbox) {
    const auto& known = Toolbox::Names();
    for (const std::string& name : welcome.tools) {
      if (std::find(known.begin(), known.end(), name) != known.end()) enabled_.push_back(name);
    }
  }

  LoopResult Run() {
    toolbox_.SetInterrupt(client_.fd(), [this] { return client_.CancelArrived(running_); });
    for (;;) {
      auto reply = client_.NextCall();
      if (!reply.ok()) return Ended(reply.failure());
      ++turns_;
      for (const protocol::ToolCall& call : reply.value().answer.tool_calls) {
        if (auto failure = Call(call)) return Ended(*failure);
      }
    }
  }

 private:
  // One call; the failure that ends the session, if any.
  std::optional<BrokerFailure> Call(const protocol::ToolCall& call) {
    if (!call.arguments_error.empty()) {
      return Refuse(call,
                    ToolOutcome::Fail("bad_arguments",
                                      "the arguments could not be read: " + call.arguments_error,
                                      "send a JSON object that matches the tool's schema"));
    }
    if (std::find(enabled_.begin(), enabled_.end(), call.name) == enabled_.end()) {
      return Refuse(call, ToolOutcome::Fail("unknown_tool",
                                            "this session has no tool named \"" + call.name + "\"",
                                            "call one of the tools tools/list offers"));
    }
    auto prepared = toolbox_.Prepare(call.name, call.arguments);
    if (auto* refusal = std::get_if<ToolOutcome>(&prepared)) return Refuse(call, *refusal);
    std::unique_ptr<PreparedCall> ready =
        std::move(std::get<std::unique_ptr<PreparedCall>>(prepared));

    auto decision = client_.RequestTool(
        protocol::ToolRequest{call.id, call.name, call.arguments, ready->paths()});
    if (!decision.ok()) {
      // A loop_detected reply leaves the session up (the broker answered the call itself).
      const BrokerFailure& failure = decision.failure();
      if (failure.kind == BrokerFailure::Kind::kErrorReply &&
          failure.code == protocol::ErrorCode::kLoopDetected) {
        return std::nullopt;
      }
      return failure;
    }
    if (!decision.value().allowed()) return std::nullopt;  // the broker answered the client

    running_ = decision.value().request_id;
    // A cancel may already be here (read along with the decision): then nothing starts.
    ToolOutcome outcome = client_.CancelArrived(running_)
                              ? ToolOutcome::Fail("cancelled", "the client cancelled the call")
                              : ready->Execute();
    running_ = 0;
    ready.reset();  // release the call's descriptors before the next one
    if (client_.failure()) return *client_.failure();  // a shutdown arrived while it ran
    protocol::ToolResult result;
    result.request = decision.value().request_id;
    result.ok = outcome.ok;
    result.error_code = outcome.code;
    result.output = outcome.Render();
    result.changed_paths = outcome.changed_paths;
    auto ack = client_.ReportResult(std::move(result));
    if (!ack.ok()) return ack.failure();
    return std::nullopt;
  }

  std::optional<BrokerFailure> Refuse(const protocol::ToolCall& call, const ToolOutcome& why) {
    protocol::ToolResult result;
    result.request = 0;
    result.call_id = call.id;
    result.ok = false;
    result.error_code = why.code.empty() ? "refused" : why.code;
    result.output = why.Render();
    auto ack = client_.ReportResult(std::move(result));
    if (!ack.ok()) return ack.failure();
    return std::nullopt;
  }

  LoopResult Ended(const BrokerFailure& failure) const {
    if (failure.kind == BrokerFailure::Kind::kShutdown && failure.status == "finished") {
      return LoopResult{Status::kDone, failure.message, turns_};
    }
    if (failure.kind == BrokerFailure::Kind::kShutdown ||
        (failure.kind == BrokerFailure::Kind::kErrorReply &&
         failure.code == protocol::ErrorCode::kBudgetExhausted)) {
      return LoopResult{Status::kEndedByBroker, failure.Describe(), turns_};
    }
    return LoopResult{Status::kProtocolError, failure.Describe(), turns_};
  }

  BrokerClient& client_;
  Toolbox& toolbox_;
  std::vector<std::string> enabled_;
  std::uint64_t running_ = 0;  // the tool_request whose call is executing (0 = none)
  std::uint64_t turns_ = 0;
};

}  // namespace

LoopResult RunServeLoop(BrokerClient& client, Toolbox& toolbox, const protocol::Welcome& welcome) {
  return ServeLoop(client, toolbox, welcome).Run();
}

}  // namespace cagent::agent
