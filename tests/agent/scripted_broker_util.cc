#include "tests/agent/scripted_broker_util.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>
#include <utility>

#include "common/json_text.h"

namespace cagent::agent::testing {

using protocol::Kind;
using protocol::Message;

ScriptedBroker::ScriptedBroker() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0) {
    broker_end_.Reset(fds[0]);
    agent_end_.Reset(fds[1]);
  }
}

ScriptedBroker::~ScriptedBroker() {
  // The thread ends when the agent's end closes (or after the idle timeout).
  agent_end_.Reset();
  if (thread_.joinable()) thread_.join();
}

UniqueFd ScriptedBroker::TakeAgentEnd() { return std::move(agent_end_); }

ScriptedBroker& ScriptedBroker::Expect(Kind kind, Handler handler) {
  steps_.push_back(Step{kind, std::move(handler)});
  return *this;
}

void ScriptedBroker::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ScriptedBroker::Join() {
  if (thread_.joinable()) thread_.join();
}

std::vector<Message> ScriptedBroker::Received(Kind kind) const {
  std::vector<Message> out;
  for (const Message& m : received_) {
    if (m.header.kind == kind) out.push_back(m);
  }
  return out;
}

// The frames of one response go out in one send: "a cancel that came with the decision" means
// the agent finds both when it reads, not that it may read the decision and act before the
// cancel is written (a race that made ServeLoop.ACancelThatCameWithTheDecisionRunsNothing flaky).
bool ScriptedBroker::SendAll(const std::vector<std::string>& frames) {
  std::string joined;
  for (const std::string& frame : frames) joined += frame;
  std::string_view rest = joined;
  while (!rest.empty()) {
    const ssize_t n = ::send(broker_end_.get(), rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

void ScriptedBroker::Run() {
  protocol::FrameDecoder decoder;
  std::array<char, 65536> buffer{};
  for (;;) {
    auto payload = decoder.Next();
    if (!payload) {
      pollfd p{broker_end_.get(), POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(idle_timeout_.count()));
      if (ready == 0) {
        errors_.push_back("the agent sent nothing for " + std::to_string(idle_timeout_.count()) +
                          " ms");
        break;
      }
      if (ready < 0 && errno == EINTR) continue;
      const ssize_t n = ::read(broker_end_.get(), buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the agent closed
      if (!decoder.Feed(std::string_view(buffer.data(), static_cast<std::size_t>(n))).ok()) {
        errors_.push_back("the agent sent a bad frame");
        break;
      }
      continue;
    }
    received_payloads_.push_back(*payload);
    auto decoded = protocol::Decode(*payload, /*from_agent=*/true);
    if (auto* error = std::get_if<protocol::DecodeError>(&decoded)) {
      errors_.push_back("the agent sent a malformed message: " + error->message);
      break;
    }
    Message request = std::get<Message>(std::move(decoded));
    received_.push_back(request);
    if (check_model_turns_) {
      if (std::string problem = CheckRequest(request); !problem.empty()) {
        errors_.push_back("request " + std::to_string(request.header.id) + " (" +
                          std::string(protocol::KindName(request.header.kind)) +
                          ") breaks the model-turn rules: " + problem);
        break;
      }
    }
    if (request.header.kind == Kind::kProgress && auto_ack_progress_) {
      if (!SendAll({Frame(protocol::Make(Kind::kAck, request.header.id, protocol::Ack{}))})) break;
      continue;
    }
    if (next_step_ >= steps_.size()) break;  // script done: close
    Step& step = steps_[next_step_++];
    if (step.kind != request.header.kind) {
      errors_.push_back("step " + std::to_string(next_step_) + " expected " +
                        std::string(protocol::KindName(step.kind)) + ", the agent sent " +
                        std::string(protocol::KindName(request.header.kind)));
      break;
    }
    Response response = step.handler(request);
    NoteSentTurns(response.frames);
    // Like the real broker after finish, the connection closes once the script is done.
    if (!SendAll(response.frames) || response.close || next_step_ == steps_.size()) break;
  }
  ::shutdown(broker_end_.get(), SHUT_RDWR);
  broker_end_.Reset();
}

namespace {

bool SameCall(const protocol::ToolCall& a, const protocol::ToolCall& b) {
  return a.id == b.id && a.name == b.name && a.arguments == b.arguments;
}

}  // namespace

std::string ConversationProblem(const protocol::ModelCall& call,
                                const std::vector<protocol::ToolCall>& issued) {
  const protocol::ChatMessage* assistant = nullptr;
  std::vector<std::string> answered;  // call ids of `assistant` answered so far
  for (std::size_t i = 0; i < call.messages.size(); ++i) {
    const protocol::ChatMessage& m = call.messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]: ";
    if (m.role == protocol::Role::kAssistant) {
      for (const protocol::ToolCall& c : m.tool_calls) {
        bool found = false;
        for (const protocol::ToolCall& model : issued) found |= SameCall(model, c);
        if (!found) return where + "call " + c.id + " was not issued by the model";
      }
      assistant = &m;
      answered.clear();
    } else if (m.role == protocol::Role::kTool) {
      if (assistant == nullptr) return where + "a tool message before any assistant message";
      bool found = false;
      for (const protocol::ToolCall& c : assistant->tool_calls) found |= c.id == m.call_id;
      if (!found) return where + m.call_id + " is not a call of the assistant message before it";
      if (std::find(answered.begin(), answered.end(), m.call_id) != answered.end()) {
        return where + m.call_id + " is answered twice";
      }
      answered.push_back(m.call_id);
    }
  }
  return {};
}

std::string ScriptedBroker::CheckRequest(const Message& request) {
  if (const auto* tool = std::get_if<protocol::ToolRequest>(&request.body)) {
    const protocol::ToolCall* call = nullptr;
    for (const protocol::ToolCall& c : latest_turn_) {
      if (c.id == tool->call_id) call = &c;
    }
    if (call == nullptr) return "call id \"" + tool->call_id + "\" is not of the latest turn";
    if (std::find(requested_.begin(), requested_.end(), tool->call_id) != requested_.end()) {
      return "call id \"" + tool->call_id + "\" was already asked about";
    }
    requested_.push_back(tool->call_id);
    if (tool->tool != call->name) return "tool " + tool->tool + " is not the call's " + call->name;
    if (tool->args != call->arguments) {
      return "args " + JsonText(tool->args) + " are not the call's " + JsonText(call->arguments);
    }
    return {};
  }
  const auto* model = std::get_if<protocol::ModelCall>(&request.body);
  if (model == nullptr) return {};
  return ConversationProblem(*model, issued_);
}

void ScriptedBroker::NoteSentTurns(const std::vector<std::string>& frames) {
  for (const std::string& frame : frames) {
    protocol::FrameDecoder decoder;
    if (!decoder.Feed(frame).ok()) continue;
    auto payload = decoder.Next();
    if (!payload) continue;
    auto decoded = protocol::Decode(*payload, /*from_agent=*/false);
    auto* message = std::get_if<Message>(&decoded);
    if (message == nullptr) continue;
    if (const auto* result = std::get_if<protocol::ModelResult>(&message->body)) {
      latest_turn_ = result->answer.tool_calls;
      requested_.clear();
      issued_.insert(issued_.end(), latest_turn_.begin(), latest_turn_.end());
    }
  }
}

std::string Frame(const Message& message) {
  auto frame = protocol::EncodeMessage(message);
  return frame.ok() ? frame.value() : std::string();
}

std::string RawFrame(std::string_view payload) {
  auto frame = protocol::EncodeFrame(payload);
  return frame.ok() ? frame.value() : std::string();
}

Response Reply(Kind kind, std::uint64_t id, protocol::Body body) {
  return Response{{Frame(protocol::Make(kind, id, std::move(body)))}, false};
}

Response Reply(std::vector<Message> messages, bool close) {
  Response out;
  for (const Message& m : messages) out.frames.push_back(Frame(m));
  out.close = close;
  return out;
}

Handler SendWelcome(protocol::Welcome welcome) {
  return [welcome](const Message& request) {
    return Reply(Kind::kWelcome, request.header.id, welcome);
  };
}

Handler SendModelTurn(protocol::AssistantTurn turn) {
  auto count = std::make_shared<std::uint64_t>(0);
  return [turn, count](const Message& request) {
    protocol::ModelResult result;
    result.answer = turn;
    result.usage = protocol::Usage{.input_tokens = 100, .output_tokens = 20};
    result.turn = ++*count;
    result.max_tokens = 4096;
    return Reply(Kind::kModelResult, request.header.id, result);
  };
}

protocol::AssistantTurn ToolTurn(std::vector<protocol::ToolCall> calls, std::string text) {
  protocol::AssistantTurn turn;
  turn.text = std::move(text);
  turn.tool_calls = std::move(calls);
  turn.stop_reason = protocol::StopReason::kToolCalls;
  return turn;
}

protocol::AssistantTurn TextTurn(std::string text, protocol::StopReason reason) {
  protocol::AssistantTurn turn;
  turn.text = std::move(text);
  turn.stop_reason = reason;
  return turn;
}

Handler Allow() {
  return [](const Message& request) {
    protocol::Decision d;
    d.verdict = protocol::Verdict::kAllow;
    d.rule = "allow";
    return Reply(Kind::kDecision, request.header.id, d);
  };
}

Handler Deny(std::string message, std::string rule) {
  return [message, rule](const Message& request) {
    protocol::Decision d;
    d.verdict = protocol::Verdict::kDeny;
    d.rule = rule;
    d.reason = "denied by the profile";
    d.message = message;
    return Reply(Kind::kDecision, request.header.id, d);
  };
}

Handler AskThenApproval(protocol::Verdict verdict, std::string message) {
  return [verdict, message](const Message& request) {
    protocol::Decision d;
    d.verdict = protocol::Verdict::kAsk;
    d.pending = true;
    d.rule = "ask run_command";
    protocol::Approval a;
    a.verdict = verdict;
    a.scope = verdict == protocol::Verdict::kAllow ? "once" : "denied";
    a.message = message;
    return Reply({protocol::Make(Kind::kDecision, request.header.id, d),
                  protocol::Make(Kind::kApproval, request.header.id, a)});
  };
}

Handler AckResult(std::function<std::string(const std::string&)> transform) {
  return [transform](const Message& request) {
    const auto& result = std::get<protocol::ToolResult>(request.body);
    protocol::ResultAck ack;
    ack.output = transform ? transform(result.output) : result.output;
    return Reply(Kind::kResultAck, request.header.id, ack);
  };
}

Handler SendAck() {
  return
      [](const Message& request) { return Reply(Kind::kAck, request.header.id, protocol::Ack{}); };
}

Handler SendError(protocol::ErrorCode code, std::string message) {
  return [code, message](const Message& request) {
    return Reply(Kind::kError, request.header.id, protocol::ErrorReply{code, message});
  };
}

Handler SendShutdown(std::string status, std::string reason) {
  return [status, reason](const Message&) {
    return Reply({protocol::Make(Kind::kShutdown, 0, protocol::Shutdown{status, reason})},
                 /*close=*/true);
  };
}

protocol::Welcome TestWelcome(const std::string& workspace, std::uint64_t max_turns,
                              std::string provider) {
  protocol::Welcome w;
  w.run_id = "run-test";
  w.workspace = workspace;
  w.task = "Fix the bug in calc.py so that the tests pass.";
  w.policy_name = "test";
  w.policy_digest = std::string(64, '0');
  w.policy_summary = "commands: python3 allowed; writes: the workspace";
  w.tools = {"read_file", "list_dir", "glob", "grep", "write_file", "edit_file", "run_command"};
  w.model.provider = std::move(provider);
  w.model.name = "test-model";
  w.model.context_window = 200000;
  w.model.max_output_tokens = 4096;
  w.max_turns = max_turns;
  w.command_timeout_ms = 30000;
  w.command_output_bytes = 65536;
  return w;
}

}  // namespace cagent::agent::testing
