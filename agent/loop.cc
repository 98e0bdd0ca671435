#include "agent/loop.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <variant>

#include "agent/context.h"
#include "agent/conversation.h"
#include "agent/system_prompt.h"
#include "common/exit_codes.h"

namespace cagent::agent {
namespace {

using Status = LoopResult::Status;

constexpr const char* kCutOffNudge =
    "Your reply was cut off at the output limit. Continue with smaller steps (for example, edit a "
    "file in several smaller edit_file calls), and call finish when the task is done.";
constexpr const char* kEmptyNudge =
    "Your reply was empty. Call a tool to continue the task, or call finish with a summary.";

std::string OneLine(std::string_view text, std::size_t max_bytes = 120) {
  std::string out;
  for (char c : text) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    out.push_back(c == '\n' || c == '\r' ? ' ' : c);
  }
  return out;
}

// The call's main argument, for progress lines, stubs and summaries.
std::string Subject(const ToolCall& call) {
  for (const char* key : {"path", "command", "pattern"}) {
    auto it = call.arguments.find(key);
    if (it != call.arguments.end() && it->is_string()) return it->get<std::string>();
  }
  return {};
}

std::string ErrorResult(const std::string& code, const std::string& message,
                        const std::string& hint) {
  ToolOutcome outcome = ToolOutcome::Fail(code, message, hint);
  return outcome.Render();
}

class Loop {
 public:
  Loop(BrokerClient& client, Toolbox& toolbox, const protocol::Welcome& welcome,
       const LoopOptions& options)
      : client_(client), toolbox_(toolbox), welcome_(welcome), options_(options) {
    const auto& known = Toolbox::Names();
    for (const std::string& name : welcome_.tools) {
      if (std::find(known.begin(), known.end(), name) != known.end() &&
          std::find(enabled_.begin(), enabled_.end(), name) == enabled_.end()) {
        enabled_.push_back(name);
      }
    }
    limits_.context_window = welcome_.model.context_window;
    limits_.max_output_tokens = welcome_.model.max_output_tokens;
    limits_.keep_recent_turns = options_.keep_recent_turns;
    limits_.threshold = options_.compaction_threshold;
    limits_.target = options_.compaction_target;
  }

  LoopResult Run() {
    conversation_.AddSystem(BuildSystemPrompt(welcome_, enabled_));
    conversation_.AddTask(welcome_.task);
    for (;;) {
      if (welcome_.max_turns > 0 && turns_ >= welcome_.max_turns) {
        return End(Status::kGaveUp, kMaxTurnsMessage, "gave_up");
      }
      if (auto ended = Turn()) return *std::move(ended);
    }
  }

 private:
  // One model turn and its tool calls; a value when the loop ends.
  std::optional<LoopResult> Turn() {
    CompactionReport compaction = Compact(conversation_, limits_, &toolbox_.ledger());
    if (compaction.compacted()) {
      // Rare by design (context.h): each one breaks the provider's prompt cache, so say so.
      ++compactions_;
      auto sent = client_.Progress(
          "compacting", "compaction " + std::to_string(compactions_) + " before turn " +
                            std::to_string(turns_ + 1) + ": context ~" +
                            std::to_string(compaction.tokens_before) + " -> ~" +
                            std::to_string(compaction.tokens_after) + " tokens (target ~" +
                            std::to_string(compaction.target) + "; " +
                            std::to_string(compaction.stubbed) + " outputs dropped, " +
                            std::to_string(compaction.summarised) + " messages summarised)");
      if (!sent.ok()) return FromFailure(sent.failure());
    }
    std::string where = "turn " + std::to_string(turns_ + 1);
    if (welcome_.max_turns > 0) where += "/" + std::to_string(welcome_.max_turns);
    if (auto sent = client_.Progress("thinking", where); !sent.ok()) {
      return FromFailure(sent.failure());
    }

    // Only the conversation goes out: the broker builds the provider's request (model, the tool
    // schemas of the enabled tools, max_tokens within the budget) from its own allow-list.
    auto reply = client_.ModelCall(ToModelCall(conversation_));
    if (!reply.ok()) return FromFailure(reply.failure());
    ++turns_;
    protocol::AssistantTurn turn = std::move(reply.value().answer);
    // Recorded exactly as given: the broker binds later tool requests and the calls in the next
    // model_call to this turn by id, name and arguments.
    conversation_.AddAssistant(turn.text, turn.tool_calls);

    if (turn.tool_calls.empty()) {
      switch (turn.stop_reason) {
        case protocol::StopReason::kMaxTokens:
          conversation_.AddUser(kCutOffNudge);
          return std::nullopt;
        case protocol::StopReason::kRefused: {
          std::string why = "the provider refused to answer";
          if (turn.text.find_first_not_of(" \t\r\n") != std::string::npos) {
            why += ": " + OneLine(turn.text, 200);
          }
          return End(Status::kModelError, why, "error");
        }
        case protocol::StopReason::kEnd:
        case protocol::StopReason::kToolCalls:
        case protocol::StopReason::kOther:
          break;
      }
      if (turn.text.find_first_not_of(" \t\r\n") == std::string::npos) {
        conversation_.AddUser(kEmptyNudge);
        return std::nullopt;
      }
      return End(Status::kDone, turn.text, "done");
    }
    for (const ToolCall& call : turn.tool_calls) {
      if (call.name == "finish" && call.arguments_error.empty()) {
        std::string summary;
        if (auto it = call.arguments.find("summary");
            it != call.arguments.end() && it->is_string()) {
          summary = it->get<std::string>();
        }
        if (summary.empty()) summary = turn.text;
        if (summary.empty()) summary = "(the model gave no summary)";
        return End(Status::kDone, summary, "done");
      }
      if (auto ended = Call(call)) return ended;
    }
    return std::nullopt;
  }

  // One tool call; a value when the loop ends.
  std::optional<LoopResult> Call(const ToolCall& call) {
    ToolResultInfo info;
    info.tool = call.name;
    info.subject = Subject(call);
    if (!call.arguments_error.empty()) {
      info.error_code = "bad_arguments";
      Append(call,
             ErrorResult("bad_arguments",
                         "the call to " + (call.name.empty() ? "a tool" : call.name) +
                             " could not be read: " + call.arguments_error,
                         "call the tool again with a JSON object that matches its schema"),
             true, info);
      return std::nullopt;
    }
    if (std::find(enabled_.begin(), enabled_.end(), call.name) == enabled_.end()) {
      std::string names;
      for (const std::string& name : enabled_) names += name + ", ";
      info.error_code = "unknown_tool";
      Append(call,
             ErrorResult("unknown_tool",
                         "this run has no tool named \"" + OneLine(call.name, 64) + "\"",
                         "use one of: " + names + "finish"),
             true, info);
      return std::nullopt;
    }

    auto prepared = toolbox_.Prepare(call.name, call.arguments);
    if (auto* refusal = std::get_if<ToolOutcome>(&prepared)) {
      // Refused by the agent's own guards: nothing runs, so the broker is not asked; the
      // operator and the audit log still see the attempt.
      info.error_code = refusal->code;
      Append(call, refusal->Render(), true, info);
      auto sent = client_.Progress("refused",
                                   call.name + ": " + refusal->code + " " + OneLine(info.subject));
      if (!sent.ok()) return FromFailure(sent.failure());
      return std::nullopt;
    }
    std::unique_ptr<PreparedCall> ready =
        std::move(std::get<std::unique_ptr<PreparedCall>>(prepared));
    info.paths = ready->paths();

    auto decision = client_.RequestTool(
        protocol::ToolRequest{call.id, call.name, call.arguments, ready->paths()});
    if (!decision.ok()) {
      const BrokerFailure& failure = decision.failure();
      if (failure.kind == BrokerFailure::Kind::kErrorReply &&
          failure.code == protocol::ErrorCode::kLoopDetected) {
        info.error_code = "loop_detected";
        Append(call,
               ErrorResult("loop_detected", failure.message,
                           "do not repeat this call; try a different approach or finish"),
               true, info);
        return std::nullopt;
      }
      return FromFailure(failure);
    }
    if (!decision.value().allowed()) {
      info.error_code = "denied";
      Append(call, decision.value().RefusalMessage(), true, info);
      return std::nullopt;
    }

    ToolOutcome outcome = ready->Execute();
    ready.reset();  // release the call's descriptors before the next one
    auto ack = client_.ReportResult(protocol::ToolResult{decision.value().request_id, outcome.ok,
                                                         outcome.code, outcome.Render(),
                                                         outcome.changed_paths, ""});
    if (!ack.ok()) return FromFailure(ack.failure());
    info.error_code = outcome.code;
    info.changed_paths = outcome.changed_paths;  // pinned in compaction summaries
    Append(call, ack.value().output, !outcome.ok, info);
    return std::nullopt;
  }

  void Append(const ToolCall& call, std::string content, bool is_error, ToolResultInfo info) {
    conversation_.AddToolResult(ToolResultContent{call.id, std::move(content), is_error},
                                std::move(info));
  }

  // Ends the loop: tells the broker (finish) when the session is still up.
  LoopResult End(Status status, std::string message, const char* outcome) {
    LoopResult result{status, std::move(message), turns_};
    if (client_.failure()) return result;
    auto ack = client_.Finish(outcome, result.message);
    if (!ack.ok() && status == Status::kDone) {
      // The model finished but the broker did not record it: report what the broker did.
      LoopResult failed = FromFailure(ack.failure(), /*send_finish=*/false);
      return failed;
    }
    return result;
  }

  LoopResult FromFailure(const BrokerFailure& failure, bool send_finish = true) {
    Status status = Status::kProtocolError;
    const char* outcome = "error";
    switch (failure.kind) {
      case BrokerFailure::Kind::kShutdown:
        return LoopResult{Status::kEndedByBroker, failure.Describe(), turns_};
      case BrokerFailure::Kind::kProtocol:
      case BrokerFailure::Kind::kClosed:
        return LoopResult{Status::kProtocolError, failure.Describe(), turns_};
      case BrokerFailure::Kind::kErrorReply:
        switch (failure.code) {
          case protocol::ErrorCode::kBudgetExhausted:
          case protocol::ErrorCode::kUnavailable:
            status = Status::kEndedByBroker;
            outcome = "gave_up";
            break;
          case protocol::ErrorCode::kProviderError:
          case protocol::ErrorCode::kProviderAuth:
            status = Status::kModelError;
            break;
          default:
            break;
        }
        break;
    }
    LoopResult result{status, failure.Describe(), turns_};
    if (send_finish && !client_.failure()) {
      (void)client_.Finish(outcome, result.message);  // best effort: the run is ending anyway
    }
    return result;
  }

  BrokerClient& client_;
  Toolbox& toolbox_;
  const protocol::Welcome& welcome_;
  const LoopOptions& options_;
  std::vector<std::string> enabled_;
  ContextLimits limits_;
  Conversation conversation_;
  std::uint64_t turns_ = 0;
  std::uint64_t compactions_ = 0;
};

}  // namespace

int LoopResult::ExitCode() const {
  switch (status) {
    case Status::kDone:
      return ToInt(cagent::ExitCode::kOk);
    case Status::kGaveUp:
    case Status::kEndedByBroker:
    case Status::kModelError:
      return ToInt(cagent::ExitCode::kRunFailed);
    case Status::kProtocolError:
      break;
  }
  return ToInt(cagent::ExitCode::kUsage);
}

LoopResult RunLoop(BrokerClient& client, Toolbox& toolbox, const protocol::Welcome& welcome,
                   const LoopOptions& options) {
  return Loop(client, toolbox, welcome, options).Run();
}

}  // namespace cagent::agent
