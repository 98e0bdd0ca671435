#include "launcher/mcp/serve/serve.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "common/json_text.h"
#include "common/tool_schemas.h"
#include "common/unique_fd.h"
#include "launcher/broker/approver.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/audit_schema.h"
#include "launcher/broker/tool_mapping.h"
#include "launcher/mcp/protocol/http_transport.h"
#include "launcher/mcp/protocol/session.h"
#include "launcher/mcp/protocol/stdio_transport.h"
#include "launcher/session/agent.h"
#include "launcher/session/session.h"
#include "launcher/session/state_dir.h"

namespace cagent::launcher::mcp {
namespace {

namespace asio = boost::asio;
using broker::BrokerOutcome;
using broker::CallAnswer;
using nlohmann::json;

json OutputSchema() {
  return json{
      {"type", "object"},
      {"properties",
       {{"ok", {{"type", "boolean"}, {"description", "whether the call succeeded"}}},
        {"error_code",
         {{"type", "string"},
          {"description",
           "\"\" when ok; e.g. not_found, denied, timeout, cancelled, outside_workspace"}}},
        {"output",
         {{"type", "string"},
          {"description", "the tool's output, or why it failed or was refused"}}},
        {"rule", {{"type", "string"}, {"description", "the profile rule that refused it"}}},
        {"location", {{"type", "string"}, {"description", "where that rule is (file:line:col)"}}}}},
      {"required", json::array({"ok", "error_code", "output"})},
      {"additionalProperties", false}};
}

// What each tool does to its environment, honestly: the file readers change nothing; write_file
// replaces a file (the same call twice leaves the same file); edit_file and run_command change
// state in ways a repeat does not undo. Only run_command may reach past the workspace, and only
// when the profile lets the sandbox reach the network.
json Annotations(const std::string& tool, bool network) {
  const bool reads = tool == "read_file" || tool == "list_dir" || tool == "glob" || tool == "grep";
  return json{{"readOnlyHint", reads},
              {"destructiveHint", !reads},
              {"idempotentHint", reads || tool == "write_file"},
              {"openWorldHint", tool == "run_command" && network}};
}

std::string Title(const std::string& tool) {
  std::string out = tool;
  for (char& c : out) {
    if (c == '_') c = ' ';
  }
  if (!out.empty()) out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

void Notice(const McpServeOptions& o, const std::string& line) {
  if (o.notice) o.notice(line);
}

// A served session's two halves. The MCP half (ToolHandler; the call objects, progress timers)
// lives on the MCP io thread; the broker half (CallSource, the approver's pending questions)
// on the agent session's io thread. They talk only through posts: asio::post to the MCP io_context,
// PostToSession to the session's (which holds them until the session is attached).
class Bridge : public mcp::ToolHandler,
               public broker::CallSource,
               public std::enable_shared_from_this<Bridge> {
 public:
  Bridge(asio::io_context& mio, const McpServeOptions& options, std::vector<McpToolInfo> tools)
      : mio_(mio), options_(options), tools_(std::move(tools)) {}

  // ---- the MCP half (mio) ----
  std::vector<mcp::ToolDefinition> ListTools() override {
    std::vector<mcp::ToolDefinition> out;
    for (const McpToolInfo& t : tools_) {
      out.push_back(mcp::ToolDefinition{t.name, Title(t.name), t.description, t.input_schema,
                                        t.output_schema, t.annotations});
    }
    return out;
  }

  void Call(std::shared_ptr<mcp::ToolCall> call) override {
    if (client_source_) {
      std::string client = client_source_();
      std::lock_guard<std::mutex> lock(mu_);
      client_ = std::move(client);
    }
    if (closed_) {
      call->Fail(mcp::kInternalError, "the session is ending");
      return;
    }
    const std::string id = "mcp-" + std::to_string(++counter_);
    Running& r = running_[id];
    r.call = call;
    r.started = std::chrono::steady_clock::now();
    r.timer = std::make_unique<asio::steady_timer>(mio_);
    std::weak_ptr<Bridge> weak = weak_from_this();
    call->OnCancel([weak, id](const std::string& reason) {
      if (auto self = weak.lock()) self->OnClientCancel(id, reason);
    });
    ArmProgress(id);
    broker::ServedCall served{id, call->name(), call->arguments()};
    Pushed pushed{std::move(served), JsonText(call->request_id()),
                  broker::CanonicalDigest(call->arguments())};
    PostToSession([self = shared_from_this(), pushed = std::move(pushed)]() mutable {
      self->OnPushed(std::move(pushed));
    });
  }

  // The client is gone or ended the session (mio): the agent session ends, finished.
  void Close() {
    if (closed_) return;
    closed_ = true;
    PostToSession([self = shared_from_this()] { self->OnClosed(); });
  }

  // The agent session has ended (its thread, after session::RunAgentSession returned): the calls
  // still in progress fail with `why`.
  void SessionEnded(const std::string& why) {
    asio::post(mio_, [self = shared_from_this(), why] {
      self->closed_ = true;
      for (auto& [id, r] : self->running_) {
        if (r.timer) r.timer->cancel();
        r.call->Fail(mcp::kInternalError, why);
      }
      self->running_.clear();
    });
  }

  [[nodiscard]] std::uint64_t calls() const { return counter_.load(); }
  // Where the client's name comes from (the MCP io thread; called at each call).
  void set_client_source(std::function<std::string()> source) {
    client_source_ = std::move(source);
  }
  std::string client() {
    std::lock_guard<std::mutex> lock(mu_);
    return client_;
  }

  // ---- the broker half (the session's io thread) ----
  void Next(std::function<void(std::vector<broker::ServedCall>)> ready) override {
    ready_ = std::move(ready);
    Deliver();
  }

  void Answer(const std::string& call_id, CallAnswer answer) override {
    auto it = pushed_.find(call_id);
    if (it != pushed_.end()) {
      AuditAnswer(it->second, answer);
      pushed_.erase(it);
    }
    asio::post(mio_, [self = shared_from_this(), call_id, answer = std::move(answer)]() mutable {
      self->Complete(call_id, std::move(answer));
    });
  }

  void Cancel() override { ready_ = nullptr; }

  // on_broker: the session's io_context and broker exist (its io thread), or are going away
  // (nullptrs, from the session's thread after its io thread stopped).
  void Attach(asio::io_context* sio, broker::Broker* broker, broker::AuditLog* audit) {
    std::vector<std::function<void()>> early;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sio_ = sio;
      broker_ = broker;
      audit_ = broker != nullptr ? audit : nullptr;
      if (sio == nullptr) return;
      early.swap(early_);
    }
    for (auto& f : early) f();
  }

  // Runs `f` on the session's io thread; before the session is attached it waits for it, after
  // it ended it is dropped.
  void PostToSession(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(mu_);
    if (sio_ != nullptr) {
      asio::post(*sio_, std::move(f));
    } else if (!detached_) {
      early_.push_back(std::move(f));
    }
  }
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    sio_ = nullptr;
    broker_ = nullptr;
    audit_ = nullptr;
    detached_ = true;
    early_.clear();
  }

  asio::io_context& mio() { return mio_; }
  // The broker, on the session's io thread only.
  broker::Broker* broker() {
    std::lock_guard<std::mutex> lock(mu_);
    return broker_;
  }
  // The call's MCP object, on the MCP io thread only.
  std::shared_ptr<mcp::ToolCall> FindCall(const std::string& call_id) {
    auto it = running_.find(call_id);
    return it == running_.end() ? nullptr : it->second.call;
  }

 private:
  struct Running {
    std::shared_ptr<mcp::ToolCall> call;
    std::chrono::steady_clock::time_point started;
    std::unique_ptr<asio::steady_timer> timer;
  };
  struct Pushed {
    broker::ServedCall call;
    std::string request;  // the client's JSON-RPC id as JSON text
    std::string args_digest;
  };

  void ArmProgress(const std::string& id) {
    auto it = running_.find(id);
    if (it == running_.end() || options_.progress_interval.count() <= 0) return;
    it->second.timer->expires_after(options_.progress_interval);
    std::weak_ptr<Bridge> weak = weak_from_this();
    it->second.timer->async_wait([weak, id](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      auto found = self->running_.find(id);
      if (found == self->running_.end()) return;
      const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - found->second.started);
      const double seconds = static_cast<double>(elapsed.count()) / 1000.0;
      found->second.call->Progress(seconds, std::nullopt,
                                   found->second.call->name() + " running for " +
                                       std::to_string(elapsed.count() / 1000) + " s");
      self->ArmProgress(id);
    });
  }

  void OnClientCancel(const std::string& id, const std::string& reason) {
    auto it = running_.find(id);
    if (it == running_.end()) return;
    if (it->second.timer) it->second.timer->cancel();
    running_.erase(it);  // the session sends no response for a cancelled request
    const std::string why = reason.empty() ? "the client cancelled the call" : reason;
    PostToSession([self = shared_from_this(), id, why] {
      for (auto q = self->queue_.begin(); q != self->queue_.end(); ++q) {
        if (q->call.call_id == id) {
          self->queue_.erase(q);
          return;  // not handed out yet: nothing to stop
        }
      }
      if (broker::Broker* b = self->broker()) b->CancelCall(id, why);
    });
  }

  void Complete(const std::string& call_id, CallAnswer answer) {
    auto it = running_.find(call_id);
    if (it == running_.end()) return;  // cancelled: no response
    std::shared_ptr<mcp::ToolCall> call = it->second.call;
    if (it->second.timer) it->second.timer->cancel();
    running_.erase(it);
    if (answer.kind == CallAnswer::Kind::kFailed) {
      call->Fail(mcp::kInternalError, answer.text);
      return;
    }
    const bool ok = answer.kind == CallAnswer::Kind::kResult && answer.ok;
    std::string code = answer.error_code;
    if (answer.kind == CallAnswer::Kind::kDenied) code = "denied";
    if (!ok && code.empty()) code = "failed";
    mcp::ToolResult result = mcp::ToolResult::Text(answer.text, !ok);
    result.structured = json{{"ok", ok}, {"error_code", ok ? "" : code}, {"output", answer.text}};
    if (!answer.rule.empty()) result.structured["rule"] = answer.rule;
    if (!answer.location.empty()) result.structured["location"] = answer.location;
    call->Finish(std::move(result));
  }

  void OnPushed(Pushed pushed) {
    pushed_[pushed.call.call_id] = pushed;
    queue_.push_back(std::move(pushed));
    Deliver();
  }

  void OnClosed() {
    session_closed_ = true;
    Deliver();
  }

  void Deliver() {
    if (!ready_) return;
    if (queue_.empty() && !session_closed_) return;
    std::vector<broker::ServedCall> batch;
    while (!queue_.empty()) {
      batch.push_back(std::move(queue_.front().call));
      queue_.pop_front();
    }
    auto ready = std::move(ready_);
    ready_ = nullptr;
    ready(std::move(batch));
  }

  void AuditAnswer(const Pushed& p, const CallAnswer& a) {
    broker::AuditLog* audit = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      audit = audit_;
    }
    if (audit == nullptr) return;
    const bool ran = a.kind == CallAnswer::Kind::kResult;
    audit->Append(broker::audit::McpCall(
        {.mode = "serve",
         .request = p.request.substr(0, 128),
         .tool = p.call.tool.substr(0, 64),
         .args_digest = p.args_digest,
         .verdict = ran ? "allow" : "deny",
         .rule = a.kind == CallAnswer::Kind::kRefused ? "toolbox" : a.rule,
         .location = a.location,
         .reason = ran ? "" : a.text.substr(0, 300),
         .note = a.kind == CallAnswer::Kind::kFailed
                     ? std::optional<std::string>("the session ended before the answer")
                     : std::nullopt}));
    audit->Append(broker::audit::McpResult({.mode = "serve",
                                            .request = p.request.substr(0, 128),
                                            .tool = p.call.tool.substr(0, 64),
                                            .result_digest = broker::CanonicalDigest(json(a.text)),
                                            .ok = a.kind != CallAnswer::Kind::kFailed,
                                            .is_error = !(ran && a.ok),
                                            .bytes = a.text.size(),
                                            .error = ran && a.ok ? "" : a.error_code}));
  }

  asio::io_context& mio_;
  const McpServeOptions& options_;
  std::vector<McpToolInfo> tools_;
  // mio
  std::map<std::string, Running> running_;
  std::atomic<std::uint64_t> counter_{0};  // read by the session's thread for its summary
  bool closed_ = false;
  std::function<std::string()> client_source_;
  // the session's io thread
  std::deque<Pushed> queue_;
  std::map<std::string, Pushed> pushed_;
  std::function<void(std::vector<broker::ServedCall>)> ready_;
  bool session_closed_ = false;
  // shared, under mu_
  std::mutex mu_;
  asio::io_context* sio_ = nullptr;
  broker::Broker* broker_ = nullptr;
  broker::AuditLog* audit_ = nullptr;
  bool detached_ = false;
  std::vector<std::function<void()>> early_;
  std::string client_;
};

// The approver of a served session (on its io thread): asks the client through elicitation on the
// call's own request when it declared the capability; otherwise the --approve mode decides
// (`fallback`: the terminal or headless approver), and with --approve stop the session ends.
class ElicitingApprover : public broker::Approver {
 public:
  ElicitingApprover(std::shared_ptr<Bridge> bridge, std::unique_ptr<broker::Approver> fallback,
                    bool stop)
      : bridge_(std::move(bridge)), fallback_(std::move(fallback)), stop_(stop) {}

  void Ask(const broker::ApprovalRequest& request,
           std::function<void(broker::ApprovalOutcome)> done) override {
    const std::uint64_t n = ++counter_;
    pending_[n] = std::move(done);
    std::weak_ptr<Bridge> weak = bridge_;
    asio::post(bridge_->mio(), [this, weak, n, request] {
      auto bridge = weak.lock();
      if (!bridge) return;
      std::shared_ptr<mcp::ToolCall> call = bridge->FindCall(request.call_id);
      if (!call || !call->CanElicit()) {
        bridge->PostToSession([this, n, request] { Fallback(n, request); });
        return;
      }
      // The same rendering as the terminal prompt: the model's command cannot forge a line of
      // the form (a "rule:" after a newline) or read differently (bidi, zero-width characters).
      const std::string message = ElicitationMessage(request);
      const json schema = {
          {"type", "object"},
          {"properties",
           {{"decision",
             {{"type", "string"},
              {"title", "Decision"},
              {"description", "once: this call; session: this exact action for the session"},
              {"enum", json::array({"once", "session", "deny"})}}}}},
          {"required", json::array({"decision"})}};
      call->Elicit(message, schema, [weak, this, n](const mcp::ElicitReply& reply) {
        broker::ApprovalOutcome outcome;
        outcome.by = "elicitation";
        if (reply.action == mcp::ElicitReply::Action::kAccept) {
          const std::string decision = reply.content.value("decision", std::string());
          if (decision == "once") {
            outcome.approved = true;
            outcome.scope = broker::ApprovalScope::kOnce;
          } else if (decision == "session") {
            outcome.approved = true;
            outcome.scope = broker::ApprovalScope::kRunExact;
          }
        } else if (reply.action == mcp::ElicitReply::Action::kFailed) {
          outcome.by = "elicitation failed: " + reply.error;
        }
        if (auto live = weak.lock()) {
          live->PostToSession([this, n, outcome] { Complete(n, outcome); });
        }
      });
    });
  }

  void Cancel() override {
    if (fallback_) fallback_->Cancel();
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [n, done] : pending) {
      done(broker::ApprovalOutcome{false, broker::ApprovalScope::kDenied, "cancelled"});
    }
  }

 private:
  void Fallback(std::uint64_t n, const broker::ApprovalRequest& request) {
    if (pending_.count(n) == 0) return;
    if (stop_ || !fallback_) {
      Complete(n, broker::ApprovalOutcome{false, broker::ApprovalScope::kHeadless, "headless"});
      if (stop_) {
        if (broker::Broker* b = bridge_->broker()) {
          b->Stop(BrokerOutcome::Status::kNeedsApproval,
                  broker::NeedsApprovalReason(request) +
                      "; pre-approve it with --pre-approve sha256:" + request.digest);
        }
      }
      return;
    }
    fallback_->Ask(request,
                   [this, n](const broker::ApprovalOutcome& outcome) { Complete(n, outcome); });
  }

  void Complete(std::uint64_t n, const broker::ApprovalOutcome& outcome) {
    auto it = pending_.find(n);
    if (it == pending_.end()) return;
    auto done = std::move(it->second);
    pending_.erase(it);
    done(outcome);
  }

  std::shared_ptr<Bridge> bridge_;
  std::unique_ptr<broker::Approver> fallback_;
  bool stop_ = false;
  std::uint64_t counter_ = 0;
  std::map<std::uint64_t, std::function<void(broker::ApprovalOutcome)>> pending_;
};

// One MCP session's agent session, on its own thread (RunSandbox must stay on the thread that
// made the sandbox).
class ServedSession {
 public:
  ServedSession(const McpServeOptions& options, std::shared_ptr<Bridge> bridge, std::string id,
                std::string dir)
      : options_(options), bridge_(std::move(bridge)), id_(std::move(id)), dir_(std::move(dir)) {}

  // Runs the agent session to its end; `ended` gets the reason (on this thread).
  void Run(bool handle_signals, const std::function<void(const std::string&)>& ended) {
    session::AgentSessionOptions a;
    a.run_id = id_;
    a.policy = options_.policy;
    a.binding = options_.binding;
    // The broker asks whenever the profile says so; the approver (elicitation first) applies
    // --approve when the client cannot be asked.
    a.approval = broker::ApprovalMode::kPolicy;
    a.pre_approvals = options_.pre_approvals;
    a.pre_approval_file = options_.pre_approval_file;
    a.budget_overrides = options_.budget_overrides;
    a.resolve = options_.resolve;
    a.agent_binary = options_.agent_binary;
    a.agent_log_path = dir_ + "/agent.log";
    a.calls = bridge_.get();
    a.client_name = client_;
    a.handle_signals = handle_signals;
    std::optional<broker::AuditLog> audit;
    auto opened = broker::AuditLog::Open(dir_ + "/events.jsonl", id_,
                                         session::PolicyDigest(*options_.policy), false);
    if (!opened) {
      Finish(opened.error().Message(), ended, nullptr);
      return;
    }
    audit.emplace(std::move(*opened));
    a.audit = &*audit;
    const bool stop = options_.approval == broker::ApprovalMode::kStop;
    const bool never = options_.approval == broker::ApprovalMode::kNever;
    const int tty = options_.tty_fd;
    std::shared_ptr<Bridge> bridge = bridge_;
    a.make_approver = [bridge, stop, never, tty](asio::io_context& io) {
      std::unique_ptr<broker::Approver> fallback;
      if (!stop && !never && tty >= 0) fallback = broker::MakeTerminalApprover(io, tty);
      return std::unique_ptr<broker::Approver>(
          std::make_unique<ElicitingApprover>(bridge, std::move(fallback), stop));
    };
    broker::AuditLog* log = &*audit;
    a.on_broker = [bridge, log](asio::io_context* io, broker::Broker* b) {
      bridge->Attach(io, b, log);
    };
    auto result = session::RunAgentSession(a);
    bridge_->Detach();
    std::string why;
    if (!result) {
      why = "the sandbox could not start: " + result.error().Message();
    } else {
      outcome_ = result->broker;
      if (outcome_.status != BrokerOutcome::Status::kFinished) {
        why = "the session ended (" + std::string(broker::BrokerStatusName(outcome_.status)) +
              "): " + outcome_.reason;
      } else if (result->sandbox.kind == SandboxOutcome::Kind::kSetupFailed ||
                 result->sandbox.kind == SandboxOutcome::Kind::kExecFailed) {
        why = "the sandbox ended: " + DescribeOutcome(result->sandbox);
      }
    }
    Finish(why, ended, &*audit);
  }

  [[nodiscard]] McpSessionSummary Summary() const {
    return McpSessionSummary{id_, dir_, client_, outcome_, bridge_->calls()};
  }

 private:
  // Writes session.json; with the log, its entry count and head, so `cagent log` notices lines cut
  // from its end (as a run's result.json records them).
  void Finish(const std::string& why, const std::function<void(const std::string&)>& ended,
              const broker::AuditLog* log) {
    if (client_.empty()) client_ = bridge_->client();
    bridge_->SessionEnded(why.empty() ? "the session has ended" : why);
    json summary = {
        {"session", id_},
        {"kind", "mcp-serve"},
        {"client", client_},
        {"status",
         why.empty() ? "finished" : std::string(broker::BrokerStatusName(outcome_.status))},
        {"reason", why},
        {"calls", bridge_->calls()},
        {"denials", outcome_.denials},
        {"policy", options_.policy->name}};
    if (log != nullptr) {
      summary["event_log_entries"] = log->entries();
      summary["event_log_head"] = log->head();
    }
    std::ofstream out(dir_ + "/session.json", std::ios::trunc);
    out << JsonText(summary, 2) << "\n";
    ended(why);
  }

  const McpServeOptions& options_;
  std::shared_ptr<Bridge> bridge_;
  std::string id_;
  std::string dir_;
  std::string client_;
  BrokerOutcome outcome_;
};

// <state>/mcp/<id>, made 0700 (its parents too).
Result<std::string> MakeSessionDir(const McpServeOptions& o, const std::string& id) {
  const std::string base = (o.state_dir.empty() ? session::StateDirectory() : o.state_dir) + "/mcp";
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  if (ec) return PlainError("create " + base, ec.message());
  const std::string dir = base + "/" + id;
  if (::mkdir(dir.c_str(), 0700) != 0) return ErrnoError("mkdir " + dir);
  return dir;
}

mcp::SessionOptions SessionOptionsFor(const McpServeOptions& o) {
  mcp::SessionOptions s;
  s.server_name = "cagent";
  s.server_version = o.server_version;
  s.instructions =
      "Tools of cagent, a sandbox: every call runs inside a Linux sandbox (namespaces, Landlock, "
      "seccomp) over the workspace " +
      o.binding.workspace + " under the profile \"" + o.policy->name +
      "\", and is decided, budgeted and audited by cagent's broker. A refused call says which "
      "rule refused it; do not retry it unchanged.";
  return s;
}

Result<McpServeResult> ServeStdio(const McpServeOptions& o, std::vector<McpToolInfo> tools) {
  const std::string id = session::NewRunId();
  auto dir = MakeSessionDir(o, id);
  if (!dir) return dir.error();
  Notice(o, "cagent: MCP session " + id + " (records: " + *dir + ")");

  UniqueFd in(::fcntl(o.in_fd, F_DUPFD_CLOEXEC, 3));
  UniqueFd out(::fcntl(o.out_fd, F_DUPFD_CLOEXEC, 3));
  if (!in.valid() || !out.valid()) return ErrnoError("dup stdin/stdout");

  asio::io_context mio;
  auto bridge = std::make_shared<Bridge>(mio, o, std::move(tools));
  ServedSession served(o, bridge, id, *dir);
  std::optional<mcp::StdioTransport> transport;
  transport.emplace(mio, std::move(in), std::move(out), *bridge, SessionOptionsFor(o));
  mcp::StdioTransport* t = &*transport;
  bridge->set_client_source(
      [t] { return t->session().client_name() + " " + t->session().client_version(); });
  transport->Start([bridge](const std::string&) { bridge->Close(); });
  auto work = asio::make_work_guard(mio);
  std::thread mcp_thread([&mio] {
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals are the session's to handle
    mio.run();
  });

  std::string why;
  served.Run(/*handle_signals=*/true, [&why](const std::string& w) { why = w; });
  // The client name is known once initialize has come (read on the MCP thread).
  std::promise<void> flushed;
  asio::post(mio, [&] {
    if (!why.empty()) Notice(o, "cagent: " + why);
    transport->Shutdown(mcp::kInternalError,
                        why.empty() ? "the session has ended" : "cagent: " + why,
                        [&flushed] { flushed.set_value(); });
  });
  // A client that stopped reading must not keep cagent alive: its answers are given up after a
  // while, and the transport's destruction cancels the writes.
  if (flushed.get_future().wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    Notice(o, "cagent: the client does not read its answers; closing without them");
  }
  asio::post(mio, [&] { transport.reset(); });
  work.reset();
  mcp_thread.join();
  McpServeResult result;
  result.sessions.push_back(served.Summary());
  return result;
}

Result<McpServeResult> ServeHttp(const McpServeOptions& o, std::vector<McpToolInfo> tools) {
  asio::io_context mio;
  struct Live {
    std::shared_ptr<Bridge> bridge;
    std::unique_ptr<ServedSession> served;
    std::thread thread;
  };
  std::mutex mu;
  std::map<std::string, Live> live;  // by MCP session id (mio)
  std::vector<McpSessionSummary> done;
  std::unique_ptr<mcp::HttpTransport> transport;

  auto make = [&](const std::string& session_id) -> Result<std::shared_ptr<mcp::ToolHandler>> {
    const std::string id = session::NewRunId();
    auto dir = MakeSessionDir(o, id);
    if (!dir) return dir.error();
    Notice(o, "cagent: MCP session " + id + " (records: " + *dir + ")");
    Live l;
    l.bridge = std::make_shared<Bridge>(mio, o, tools);
    l.served = std::make_unique<ServedSession>(o, l.bridge, id, *dir);
    ServedSession* served = l.served.get();
    l.thread = std::thread([&, served, session_id] {
      served->Run(/*handle_signals=*/false, [&, session_id](const std::string& why) {
        if (!why.empty()) Notice(o, "cagent: " + why);
        asio::post(mio, [&, session_id, why] {
          if (transport) {
            transport->EndSession(session_id, mcp::kInternalError,
                                  why.empty() ? "the session has ended" : "cagent: " + why);
          }
        });
      });
    });
    std::shared_ptr<mcp::ToolHandler> handler = l.bridge;
    std::lock_guard<std::mutex> lock(mu);
    live.emplace(session_id, std::move(l));
    return handler;
  };
  auto ended = [&](const std::string& session_id, const std::string&) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.find(session_id);
    if (it != live.end()) it->second.bridge->Close();
  };

  mcp::HttpOptions h;
  h.address = o.listen_address.empty() ? "127.0.0.1" : o.listen_address;
  h.port = o.listen_port;
  h.bearer_token = o.bearer_token;
  h.max_sessions = o.max_sessions;
  auto listening = mcp::HttpTransport::Listen(mio, h, SessionOptionsFor(o), make, ended);
  if (!listening) return std::move(listening).Context("listen for MCP clients").error();
  transport = std::move(*listening);
  Notice(o, "cagent: serving MCP at " + transport->url() +
                " (send the bearer token in the Authorization header)");

  asio::signal_set signals(mio, SIGINT, SIGTERM, SIGHUP);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    Notice(o, std::string("cagent: stopping (") + sigabbrev_np(sig) + ")");
    transport->Stop();
    // Every agent session is told the client is gone; their threads end once they have.
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [id, l] : live) l.bridge->Close();
    // mio keeps running until the session threads have been joined below.
    std::thread([&] {
      std::vector<std::thread> threads;
      {
        std::lock_guard<std::mutex> inner(mu);
        for (auto& [id, l] : live) threads.push_back(std::move(l.thread));
      }
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
      asio::post(mio, [&] { mio.stop(); });
    }).detach();
  });
  mio.run();
  McpServeResult result;
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [id, l] : live) {
    if (l.thread.joinable()) l.thread.join();
    result.sessions.push_back(l.served->Summary());
  }
  return result;
}

}  // namespace

std::vector<McpToolInfo> McpToolsFor(const policy::Policy& policy) {
  std::vector<McpToolInfo> out;
  const bool network = policy.network.value != policy::NetworkMode::kNone || policy.egress.value;
  for (const std::string& name : broker::EnabledTools(policy)) {
    if (name == "finish") continue;
    const json* schema = FindToolSchema(name);
    if (schema == nullptr) continue;
    out.push_back(McpToolInfo{name, schema->value("description", std::string()),
                              schema->value("parameters", json::object()), OutputSchema(),
                              Annotations(name, network)});
  }
  return out;
}

Result<McpServeResult> RunMcpServe(const McpServeOptions& options) {
  if (!options.policy) return PlainError("serve MCP", "no policy");
  std::vector<McpToolInfo> tools = McpToolsFor(*options.policy);
  if (tools.empty()) {
    return PlainError("serve MCP",
                      "the profile \"" + options.policy->name +
                          "\" enables none of the toolbox's tools (its tools section allows none "
                          "of read_file, list_dir, glob, grep, write_file, edit_file, run_command)")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (options.listen_address.empty() && options.listen_port == 0) {
    return ServeStdio(options, std::move(tools));
  }
  if (options.bearer_token.empty()) {
    return PlainError("serve MCP over HTTP", "no bearer token")
        .WithCode(Error::Code::kInvalidInput);
  }
  return ServeHttp(options, std::move(tools));
}

std::string ElicitationMessage(const broker::ApprovalRequest& request) {
  return "cagent: the profile asks before this call runs.\n\n" + broker::ApprovalDetails(request) +
         "\nAllow it once, for the rest of this session (this exact action), or deny it?";
}

}  // namespace cagent::launcher::mcp
