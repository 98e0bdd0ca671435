#include "launcher/mcp/protocol/session.h"

#include <boost/asio/post.hpp>
#include <cmath>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/json_text.h"
#include "launcher/mcp/protocol/jsonrpc.h"

namespace cagent::launcher::mcp {

using nlohmann::json;

const std::vector<std::string>& SupportedProtocolVersions() {
  static const std::vector<std::string> kVersions = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                     "2024-11-05"};
  return kVersions;
}

ToolResult ToolResult::Text(std::string text, bool is_error) {
  ToolResult result;
  result.content.push_back({{"type", "text"}, {"text", std::move(text)}});
  result.is_error = is_error;
  return result;
}

namespace {

// The key a request id is kept under: its JSON text, so 1 and "1" stay apart.
std::string IdKey(const json& id) { return JsonText(id); }

// elicitation/create carries "mode" from 2025-11-25 on (URL mode came with it); older clients
// validate the params without it.
bool RevisionHasElicitationModes(const std::string& revision) { return revision >= "2025-11-25"; }

// Whether the elicitation capability a client declared includes form mode: {} (the form of the
// revisions before modes) or {form: {…}}; {url: {…}} alone is URL mode only.
bool DeclaresFormElicitation(const json& capabilities) {
  const auto it = capabilities.find("elicitation");
  if (it == capabilities.end() || !it->is_object()) {
    return false;
  }
  if (it->contains("form")) {
    return (*it)["form"].is_object();
  }
  return !it->contains("url");
}

json CallToolResultJson(ToolResult result) {
  json out{{"content", result.content.is_array() ? std::move(result.content) : json::array()}};
  if (result.structured.is_object()) {
    out["structuredContent"] = std::move(result.structured);
  }
  out["isError"] = result.is_error;
  return out;
}

json ToolJson(ToolDefinition tool) {
  json out{{"name", std::move(tool.name)}};
  if (!tool.title.empty()) {
    out["title"] = std::move(tool.title);
  }
  if (!tool.description.empty()) {
    out["description"] = std::move(tool.description);
  }
  out["inputSchema"] =
      tool.input_schema.is_object() ? std::move(tool.input_schema) : json{{"type", "object"}};
  if (tool.output_schema.is_object()) {
    out["outputSchema"] = std::move(tool.output_schema);
  }
  if (tool.annotations.is_object()) {
    out["annotations"] = std::move(tool.annotations);
  }
  return out;
}

}  // namespace

class CallImpl;

// The session's state. Single-threaded (the io thread). A CallImpl reaches it through a raw
// pointer guarded by `alive_` (a weak_ptr that expires when the session is destroyed), so a
// handler keeping a ToolCall past the session gets no-ops.
class SessionCore {
 public:
  SessionCore(boost::asio::io_context& io, ToolHandler& handler, SessionOptions options,
              std::function<void(Outgoing)> send)
      : io_(io), handler_(handler), options_(std::move(options)), send_(std::move(send)) {}

  void Receive(std::string_view frame, bool too_large);
  void ReceiveOversized(const json& id, bool request);
  // The pending elicitation our request `id` asked for ends kFailed with `why` (a client answer
  // to it that could not be read). False when no elicitation has that id.
  bool FailElicitation(const json& id, const std::string& why);
  // The elicitation our request `id` asked for, taken out of the session and its call (nullopt
  // when none is pending with that id).
  struct PendingElicit;
  std::optional<PendingElicit> TakeElicitation(const json& id);
  void End(int code, std::string message);

  // For CallImpl.
  void FinishCall(CallImpl& call, json response);
  void Progress(CallImpl& call, double progress, std::optional<double> total, std::string message);
  void Elicit(const std::shared_ptr<CallImpl>& call, std::string message, json schema,
              std::function<void(ElicitReply)> done);
  // Runs `task` later on the io thread unless the session is gone by then.
  void Post(std::function<void()> task);
  // on_idle_, posted, when no call is in progress.
  void PostIdleIfIdle() {
    if (calls_.empty() && on_idle_) {
      Post([this] {
        if (calls_.empty() && on_idle_) {
          auto idle = on_idle_;  // a copy: it may replace on_idle_
          idle();
        }
      });
    }
  }

  [[nodiscard]] std::weak_ptr<int> alive() const { return alive_; }

  boost::asio::io_context& io_;
  ToolHandler& handler_;
  SessionOptions options_;
  std::function<void(Outgoing)> send_;
  std::function<void(const json&)> on_abandoned_;
  std::function<void()> on_idle_;

  bool answered_initialize_ = false;
  bool initialized_ = false;
  bool can_elicit_ = false;
  bool ended_ = false;
  int end_code_ = 0;
  std::string end_message_;
  std::string protocol_version_;
  std::string client_name_;
  std::string client_version_;

  std::optional<std::set<std::string>> tool_names_;         // what the last ListTools() named
  std::map<std::string, std::shared_ptr<CallImpl>> calls_;  // by IdKey(request id)
  struct PendingElicit {
    std::weak_ptr<CallImpl> call;
    std::function<void(ElicitReply)> done;
  };
  std::map<std::int64_t, PendingElicit> elicitations_;  // by the id of our request
  std::int64_t next_request_id_ = 1;

 private:
  void Send(json message, json related, bool final);
  void SendResult(const json& id, json result) { Send(RpcResult(id, std::move(result)), id, true); }
  void SendError(const json& id, int code, std::string message);
  void Dispatch(std::string_view frame);
  void OnRequest(RpcMessage& message);
  void OnNotification(const RpcMessage& message);
  void OnResponse(const RpcMessage& message);
  void OnInitialize(const json& id, const json& params);
  void OnToolsList(const json& id);
  void OnToolsCall(const json& id, json& params);
  void CancelCall(const json& id, std::string reason);
  // Takes the elicitations pending for `call` out of the table and tells the client they are
  // void (notifications/cancelled, related to `related`); returns their callbacks, to run with
  // kFailed and `why` once the session's state is consistent.
  std::vector<std::function<void(ElicitReply)>> TakeElicitations(CallImpl& call,
                                                                 const json& related);
  static void FailAll(const std::vector<std::function<void(ElicitReply)>>& dones,
                      const std::string& why);

  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  json current_request_;  // the id of the request being dispatched (for the last-resort error)
};

class CallImpl final : public ToolCall, public std::enable_shared_from_this<CallImpl> {
 public:
  CallImpl(SessionCore& session, std::string name, json arguments, json id, json token)
      : session_(&session),
        alive_(session.alive()),
        name_(std::move(name)),
        arguments_(std::move(arguments)),
        id_(std::move(id)),
        token_(std::move(token)) {}

  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] const json& arguments() const override { return arguments_; }
  [[nodiscard]] const json& request_id() const override { return id_; }

  void Progress(double progress, std::optional<double> total, std::string message) override {
    if (SessionCore* s = session()) {
      s->Progress(*this, progress, total, std::move(message));
    }
  }
  [[nodiscard]] bool CanElicit() const override {
    const SessionCore* s = session();
    return s != nullptr && s->can_elicit_;
  }
  void Elicit(std::string message, json requested_schema,
              std::function<void(ElicitReply)> done) override {
    if (SessionCore* s = session()) {
      s->Elicit(shared_from_this(), std::move(message), std::move(requested_schema),
                std::move(done));
    }
    // The session is gone: nothing can run `done` any more (it is dropped with the call's owner).
  }
  void Finish(ToolResult result) override {
    if (SessionCore* s = session(); s != nullptr && !done_) {
      s->FinishCall(*this, RpcResult(id_, CallToolResultJson(std::move(result))));
    }
  }
  void Fail(int code, std::string message) override {
    if (SessionCore* s = session(); s != nullptr && !done_) {
      s->FinishCall(*this, RpcError(id_, code, std::move(message)));
    }
  }
  void OnCancel(std::function<void(std::string reason)> cancelled) override {
    if (cancelled_) {
      // Cancelled before the handler asked: tell it now, but not from inside its own call.
      if (SessionCore* s = session()) {
        s->Post([cancelled = std::move(cancelled), reason = *cancelled_] { cancelled(reason); });
      }
      return;
    }
    if (!done_) {
      on_cancel_ = std::move(cancelled);
    }
  }
  [[nodiscard]] bool done() const override { return done_ || session() == nullptr; }

  // The session, or nullptr once it is destroyed.
  [[nodiscard]] SessionCore* session() const { return alive_.expired() ? nullptr : session_; }

  // Marks the call done without a response (cancelled or ended) and hands back its OnCancel
  // callback, to run once the session's state is consistent.
  std::function<void(std::string)> Cancel(const std::string& reason) {
    done_ = true;
    cancelled_ = reason;
    return std::exchange(on_cancel_, nullptr);
  }

  bool done_ = false;
  std::optional<std::string> cancelled_;
  std::function<void(std::string)> on_cancel_;
  std::optional<double> last_progress_;
  std::vector<std::int64_t> elicitations_;
  const json& token() const { return token_; }

 private:
  SessionCore* session_;
  std::weak_ptr<int> alive_;
  std::string name_;
  json arguments_;
  json id_;
  json token_;  // the progressToken, or null
};

void SessionCore::Post(std::function<void()> task) {
  boost::asio::post(io_, [alive = alive(), task = std::move(task)] {
    if (!alive.expired()) {
      task();
    }
  });
}

void SessionCore::Send(json message, json related, bool final) {
  try {
    send_(Outgoing{std::move(message), std::move(related), final});
  } catch (const std::exception&) {
    // The transport failed to queue it; it reports its own failures (on_closed). Nothing here
    // may throw out of Receive.
  }
}

void SessionCore::SendError(const json& id, int code, std::string message) {
  // A refusal without a usable id belongs to no request: it goes on the general stream.
  const bool has_id = !id.is_null();
  Send(RpcError(id, code, std::move(message)), has_id ? id : json(), has_id);
}

void SessionCore::Receive(std::string_view frame, bool too_large) {
  if (too_large || frame.size() > options_.max_frame_bytes) {
    RpcIdScanner scanner;
    scanner.Feed(frame);  // all of what is there: an SDK client writes "id" last
    ReceiveOversized(scanner.id().value_or(json()), scanner.saw_method());
    return;
  }
  current_request_ = json();
  try {
    Dispatch(frame);
  } catch (const std::exception& e) {
    // Last resort (every field is checked before use, so this is a bug): the request being
    // handled gets an internal error and the session goes on.
    if (!current_request_.is_null()) {
      const auto it = calls_.find(IdKey(current_request_));
      if (it != calls_.end()) {
        it->second->Fail(kInternalError, std::string("internal error: ") + e.what());
      } else {
        SendError(current_request_, kInternalError, std::string("internal error: ") + e.what());
      }
    }
  }
}

void SessionCore::ReceiveOversized(const json& id, bool request) {
  if (!IsValidRpcId(id)) {
    return;  // no one to answer; the frame is dropped
  }
  std::string why =
      "invalid request: message exceeds " + std::to_string(options_.max_frame_bytes) + " bytes";
  // No "method": a response, the client's answer to a request of ours (an elicitation). Its id is
  // not answered (an error to it would reach the client's own request of that number); the
  // elicitation it answers fails, and the refusal goes to no id.
  if (!request) {
    FailElicitation(id, "the client's answer: " + why.substr(17));
    SendError(json(), kInvalidRequest, std::move(why));
    return;
  }
  SendError(id, kInvalidRequest, std::move(why));
}

std::optional<SessionCore::PendingElicit> SessionCore::TakeElicitation(const json& id) {
  if (!id.is_number_integer()) {
    return std::nullopt;
  }
  const auto it = elicitations_.find(id.get<std::int64_t>());
  if (it == elicitations_.end()) {
    return std::nullopt;
  }
  PendingElicit pending = std::move(it->second);
  elicitations_.erase(it);
  if (auto call = pending.call.lock()) {
    std::erase(call->elicitations_, id.get<std::int64_t>());
  }
  return pending;
}

bool SessionCore::FailElicitation(const json& id, const std::string& why) {
  auto pending = TakeElicitation(id);
  if (!pending) {
    return false;
  }
  if (pending->done) {
    ElicitReply reply;
    reply.error = why;
    pending->done(std::move(reply));
  }
  return true;
}

void SessionCore::Dispatch(std::string_view frame) {
  auto parsed = ParseRpcMessage(frame, RpcLimits{options_.max_frame_bytes, options_.max_depth});
  if (auto* refusal = std::get_if<RpcRefusal>(&parsed)) {
    // A refused response (to our elicitation) fails what it answers; the refusal itself goes to
    // no id (RpcRefusal says why).
    if (!refusal->answers.is_null()) {
      FailElicitation(refusal->answers, "the client's answer was refused: " + refusal->message);
    }
    SendError(refusal->id, refusal->code, std::move(refusal->message));
    return;
  }
  auto& message = std::get<RpcMessage>(parsed);
  switch (message.kind) {
    case RpcMessage::Kind::kRequest:
      current_request_ = message.id;
      if (ended_) {
        SendError(message.id, end_code_, end_message_);
        return;
      }
      OnRequest(message);
      return;
    case RpcMessage::Kind::kNotification:
      if (!ended_) {
        OnNotification(message);
      }
      return;
    case RpcMessage::Kind::kResponse:
      if (!ended_) {
        OnResponse(message);
      }
      return;
  }
}

void SessionCore::OnRequest(RpcMessage& message) {
  const json& id = message.id;
  if (calls_.count(IdKey(id)) != 0) {
    SendError(json(), kInvalidRequest,
              "invalid request: id " + QuotedPrefix(IdKey(id)) +
                  " is already used by a call in progress");
    return;
  }
  if (!message.params.is_null() && !message.params.is_object()) {
    SendError(id, kInvalidParams, "invalid params: \"params\" must be an object");
    return;
  }
  if (message.method == "ping") {
    SendResult(id, json::object());
    return;
  }
  if (message.method == "initialize") {
    OnInitialize(id, message.params);
    return;
  }
  if (!answered_initialize_) {
    SendError(id, kInvalidRequest,
              "invalid request: the session is not initialized (the first request must be "
              "initialize)");
    return;
  }
  if (message.method == "tools/list") {
    OnToolsList(id);
  } else if (message.method == "tools/call") {
    OnToolsCall(id, message.params);
  } else {
    SendError(id, kMethodNotFound, "method not found: " + QuotedPrefix(message.method));
  }
}

void SessionCore::OnInitialize(const json& id, const json& params) {
  if (answered_initialize_) {
    SendError(id, kInvalidRequest, "invalid request: initialize was already received");
    return;
  }
  if (!params.is_object()) {
    SendError(id, kInvalidParams, "invalid params: initialize needs params");
    return;
  }
  const auto version = params.find("protocolVersion");
  if (version == params.end() || !version->is_string()) {
    SendError(id, kInvalidParams, "invalid params: \"protocolVersion\" must be a string");
    return;
  }
  const auto capabilities = params.find("capabilities");
  if (capabilities != params.end() && !capabilities->is_object()) {
    SendError(id, kInvalidParams, "invalid params: \"capabilities\" must be an object");
    return;
  }
  std::string client_name;
  std::string client_version;
  if (const auto info = params.find("clientInfo"); info != params.end()) {
    if (!info->is_object()) {
      SendError(id, kInvalidParams, "invalid params: \"clientInfo\" must be an object");
      return;
    }
    const auto name = info->find("name");
    const auto ver = info->find("version");
    if ((name != info->end() && !name->is_string()) || (ver != info->end() && !ver->is_string())) {
      SendError(id, kInvalidParams,
                "invalid params: \"clientInfo\" name and version must be strings");
      return;
    }
    client_name = name != info->end() ? name->get<std::string>() : "";
    client_version = ver != info->end() ? ver->get<std::string>() : "";
  }

  const auto& supported = SupportedProtocolVersions();
  const auto& asked = version->get_ref<const std::string&>();
  protocol_version_ = supported.front();
  for (const auto& known : supported) {
    if (known == asked) {
      protocol_version_ = known;
    }
  }
  client_name_ = std::move(client_name);
  client_version_ = std::move(client_version);
  can_elicit_ = capabilities != params.end() && DeclaresFormElicitation(*capabilities);
  answered_initialize_ = true;

  json result{
      {"protocolVersion", protocol_version_},
      {"capabilities", {{"tools", {{"listChanged", false}}}}},
      {"serverInfo", {{"name", options_.server_name}, {"version", options_.server_version}}}};
  if (!options_.instructions.empty()) {
    result["instructions"] = options_.instructions;
  }
  SendResult(id, std::move(result));
}

void SessionCore::OnToolsList(const json& id) {
  json tools = json::array();
  tool_names_.emplace();
  for (auto& tool : handler_.ListTools()) {
    tool_names_->insert(tool.name);
    tools.push_back(ToolJson(std::move(tool)));
  }
  SendResult(id, json{{"tools", std::move(tools)}});
}

void SessionCore::OnToolsCall(const json& id, json& params) {
  if (!params.is_object()) {
    SendError(id, kInvalidParams, "invalid params: tools/call needs params");
    return;
  }
  const auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    SendError(id, kInvalidParams, "invalid params: \"name\" must be a string");
    return;
  }
  json arguments = json::object();
  if (const auto args = params.find("arguments"); args != params.end() && !args->is_null()) {
    if (!args->is_object()) {
      SendError(id, kInvalidParams, "invalid params: \"arguments\" must be an object");
      return;
    }
    arguments = std::move(*args);
  }
  json token;
  if (const auto meta = params.find("_meta"); meta != params.end() && meta->is_object()) {
    // A token of another type is ignored (no progress), not refused: progress is optional.
    if (const auto t = meta->find("progressToken"); t != meta->end() && IsValidRpcId(*t)) {
      token = *t;
    }
  }
  const std::string& tool_name = name->get_ref<const std::string&>();
  if (!tool_names_) {
    // A client may call without listing first; the names are learned once (the list does not
    // change within a session: listChanged is false).
    tool_names_.emplace();
    for (const auto& tool : handler_.ListTools()) {
      tool_names_->insert(tool.name);
    }
  }
  if (tool_names_->count(tool_name) == 0) {
    SendResult(id, CallToolResultJson(
                       ToolResult::Text("unknown tool \"" + QuotedPrefix(tool_name) +
                                            "\": tools/list names the tools this server offers",
                                        /*is_error=*/true)));
    return;
  }
  if (calls_.size() >= options_.max_calls_in_progress) {
    SendError(id, kInternalError,
              "too many calls in progress (at most " +
                  std::to_string(options_.max_calls_in_progress) +
                  "); wait for one to finish and call again");
    return;
  }
  auto call =
      std::make_shared<CallImpl>(*this, tool_name, std::move(arguments), id, std::move(token));
  calls_.emplace(IdKey(id), call);
  try {
    handler_.Call(call);
  } catch (const std::exception& e) {
    call->Fail(kInternalError, std::string("internal error: the tool failed: ") + e.what());
  }
}

void SessionCore::OnNotification(const RpcMessage& message) {
  if (message.method == "notifications/initialized") {
    initialized_ = answered_initialize_;
    return;
  }
  if (message.method == "notifications/cancelled") {
    const json& params = message.params;
    if (!params.is_object()) {
      return;
    }
    const auto id = params.find("requestId");
    if (id == params.end() || !IsValidRpcId(*id)) {
      return;
    }
    const auto reason = params.find("reason");
    CancelCall(*id, reason != params.end() && reason->is_string()
                        ? reason->get<std::string>()
                        : std::string("cancelled by the client"));
  }
  // Anything else (progress from the client, roots changes, unknown ones) is ignored.
}

void SessionCore::CancelCall(const json& id, std::string reason) {
  const auto it = calls_.find(IdKey(id));
  if (it == calls_.end()) {
    return;  // finished already, or never a call (the specification allows both)
  }
  std::shared_ptr<CallImpl> call = it->second;
  calls_.erase(it);
  PostIdleIfIdle();
  auto on_cancel = call->Cancel(reason);
  // The call's stream is abandoned with it: the cancellations go on the general stream.
  auto dones = TakeElicitations(*call, json());
  if (on_abandoned_) {
    on_abandoned_(id);
  }
  FailAll(dones, "the call was cancelled: " + reason);
  if (on_cancel) {
    on_cancel(std::move(reason));
  }
}

void SessionCore::OnResponse(const RpcMessage& message) {
  // Not one of ours (we number our requests), unknown, or already void (the call finished):
  // ignored.
  auto taken = TakeElicitation(message.id);
  if (!taken) {
    return;
  }
  PendingElicit pending = std::move(*taken);
  ElicitReply reply;
  if (message.is_error) {
    reply.error = "the client answered the elicitation with an error: " +
                  QuotedPrefix(message.error.at("message").get<std::string>(), 200);
  } else {
    const json& result = message.result;
    const auto action = result.is_object() ? result.find("action") : result.end();
    const std::string name = result.is_object() && action != result.end() && action->is_string()
                                 ? action->get<std::string>()
                                 : std::string();
    const auto content = result.is_object() ? result.find("content") : result.end();
    const bool content_ok = !result.is_object() || content == result.end() || content->is_null() ||
                            content->is_object();
    if (name == "accept" && content_ok) {
      reply.action = ElicitReply::Action::kAccept;
      if (content != result.end() && content->is_object()) {
        reply.content = *content;
      }
    } else if (name == "decline") {
      reply.action = ElicitReply::Action::kDecline;
    } else if (name == "cancel") {
      reply.action = ElicitReply::Action::kCancel;
    } else {
      reply.error =
          "the client's elicitation answer is malformed (\"action\" must be accept, decline or "
          "cancel; \"content\" an object)";
    }
  }
  if (pending.done) {
    pending.done(std::move(reply));
  }
}

std::vector<std::function<void(ElicitReply)>> SessionCore::TakeElicitations(CallImpl& call,
                                                                            const json& related) {
  std::vector<std::function<void(ElicitReply)>> dones;
  for (const std::int64_t id : std::exchange(call.elicitations_, {})) {
    const auto it = elicitations_.find(id);
    if (it == elicitations_.end()) {
      continue;
    }
    dones.push_back(std::move(it->second.done));
    elicitations_.erase(it);
    // The client may close the form: its answer would be ignored anyway.
    Send(RpcNotification("notifications/cancelled",
                         {{"requestId", id}, {"reason", "the tool call ended"}}),
         related, false);
  }
  return dones;
}

void SessionCore::FailAll(const std::vector<std::function<void(ElicitReply)>>& dones,
                          const std::string& why) {
  for (const auto& done : dones) {
    if (done) {
      ElicitReply reply;
      reply.error = why;
      done(std::move(reply));
    }
  }
}

void SessionCore::FinishCall(CallImpl& call, json response) {
  if (call.done_) {
    return;
  }
  call.done_ = true;
  std::shared_ptr<CallImpl> keep = call.shared_from_this();
  calls_.erase(IdKey(call.request_id()));
  PostIdleIfIdle();
  call.on_cancel_ = nullptr;
  auto dones = TakeElicitations(call, call.request_id());
  Send(std::move(response), call.request_id(), true);
  FailAll(dones, "the call finished before the answer came");
}

void SessionCore::Progress(CallImpl& call, double progress, std::optional<double> total,
                           std::string message) {
  if (call.done_ || ended_ || call.token().is_null() || !std::isfinite(progress) ||
      (total && !std::isfinite(*total))) {
    return;
  }
  if (call.last_progress_ && progress <= *call.last_progress_) {
    return;  // progress must increase (the specification); a stale value is not sent
  }
  call.last_progress_ = progress;
  json params{{"progressToken", call.token()}, {"progress", progress}};
  if (total) {
    params["total"] = *total;
  }
  if (!message.empty()) {
    params["message"] = std::move(message);
  }
  Send(RpcNotification("notifications/progress", std::move(params)), call.request_id(), false);
}

void SessionCore::Elicit(const std::shared_ptr<CallImpl>& call, std::string message, json schema,
                         std::function<void(ElicitReply)> done) {
  std::string why;
  if (ended_) {
    why = "the session ended";
  } else if (call->done_) {
    why = "the call is no longer in progress";
  } else if (!can_elicit_) {
    why = "the client did not declare the elicitation capability (form mode)";
  }
  if (!why.empty()) {
    // Not from inside the handler's own call: `done` may well call Elicit or Finish again.
    Post([done = std::move(done), why = std::move(why)] {
      if (done) {
        ElicitReply reply;
        reply.error = why;
        done(std::move(reply));
      }
    });
    return;
  }
  const std::int64_t id = next_request_id_++;
  json params = json::object();
  if (RevisionHasElicitationModes(protocol_version_)) {
    params["mode"] = "form";
  }
  params["message"] = std::move(message);
  params["requestedSchema"] = std::move(schema);
  elicitations_[id] = PendingElicit{call, std::move(done)};
  call->elicitations_.push_back(id);
  Send(RpcRequest(id, "elicitation/create", std::move(params)), call->request_id(), false);
}

void SessionCore::End(int code, std::string message) {
  if (ended_) {
    return;
  }
  ended_ = true;
  end_code_ = code;
  end_message_ = std::move(message);
  const std::string& text = end_message_;
  auto calls = std::exchange(calls_, {});
  std::vector<std::function<void(ElicitReply)>> dones;
  std::vector<std::function<void(std::string)>> cancels;
  for (auto& [key, call] : calls) {
    if (call->done_) {
      continue;
    }
    cancels.push_back(call->Cancel(text));
    for (auto& done : TakeElicitations(*call, call->request_id())) {
      dones.push_back(std::move(done));
    }
    Send(RpcError(call->request_id(), code, text), call->request_id(), true);
  }
  for (auto& [id, pending] : std::exchange(elicitations_, {})) {
    dones.push_back(std::move(pending.done));
  }
  FailAll(dones, "the session ended: " + text);
  for (auto& cancel : cancels) {
    if (cancel) {
      cancel(text);
    }
  }
}

class Session::Impl : public SessionCore {
 public:
  using SessionCore::SessionCore;
};

Session::Session(boost::asio::io_context& io, ToolHandler& handler, SessionOptions options,
                 std::function<void(Outgoing)> send)
    : impl_(std::make_unique<Impl>(io, handler, std::move(options), std::move(send))) {}

Session::~Session() = default;

void Session::Receive(std::string_view frame, bool too_large) { impl_->Receive(frame, too_large); }
void Session::ReceiveOversized(const json& id, bool request) {
  impl_->ReceiveOversized(id, request);
}
void Session::End(int code, std::string message) { impl_->End(code, std::move(message)); }
void Session::set_on_abandoned(std::function<void(const json& request_id)> abandoned) {
  impl_->on_abandoned_ = std::move(abandoned);
}
void Session::set_on_idle(std::function<void()> idle) {
  impl_->on_idle_ = std::move(idle);
  impl_->PostIdleIfIdle();
}
bool Session::initialized() const { return impl_->initialized_; }
bool Session::ended() const { return impl_->ended_; }
const std::string& Session::protocol_version() const { return impl_->protocol_version_; }
const std::string& Session::client_name() const { return impl_->client_name_; }
const std::string& Session::client_version() const { return impl_->client_version_; }
std::size_t Session::calls_in_progress() const { return impl_->calls_.size(); }

}  // namespace cagent::launcher::mcp
