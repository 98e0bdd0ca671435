#include "launcher/mcp/serve/wrap.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "launcher/broker/approver.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/mcp_gate.h"
#include "launcher/profile/caches.h"
#include "launcher/profile/spec.h"
#include "launcher/session/session.h"
#include "launcher/session/state_dir.h"

namespace cagent::launcher::mcp {
namespace {

namespace fs = std::filesystem;

// The relay's gate over the broker's McpGate (the MCP layer and the broker do not know each
// other; this is where they meet).
class GateAdapter final : public mcp::RelayGate {
 public:
  explicit GateAdapter(std::shared_ptr<broker::McpGate> gate) : gate_(std::move(gate)) {}
  void Check(const std::string& tool, const nlohmann::json& arguments,
             const nlohmann::json& request_id,
             std::function<void(mcp::GateVerdict)> done) override {
    gate_->Check(tool, arguments, request_id,
                 [done = std::move(done)](const broker::McpVerdict& v) {
                   done(mcp::GateVerdict{v.allow, v.message});
                 });
  }
  void Result(const mcp::CallOutcome& o) override {
    gate_->Result({.request_id = o.request_id,
                   .tool = o.tool,
                   .ok = o.ok,
                   .is_error = o.is_error,
                   .bytes = o.bytes,
                   .digest = o.digest,
                   .error = o.error});
  }
  bool Listed(const std::string& tool) override { return gate_->Listed(tool); }
  void ListFiltered(const std::vector<std::string>& offered,
                    const std::vector<std::string>& hidden) override {
    gate_->ListFiltered(offered, hidden);
  }

 private:
  std::shared_ptr<broker::McpGate> gate_;
};

// Makes `dir` and its missing parents; `dir` itself ends up 0700.
Status MakePrivateDirectory(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return PlainError("create " + dir, ec.message());
  if (::chmod(dir.c_str(), 0700) != 0) return ErrnoError("chmod " + dir);
  return Ok{};
}

struct Pipe {
  UniqueFd r;
  UniqueFd w;
};
Result<Pipe> MakePipe() {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) return ErrnoError("pipe2");
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::string_view ShutdownStatus(mcp::RelayEnd end, const SandboxOutcome& sandbox) {
  switch (end) {
    case mcp::RelayEnd::kClientClosed:
      return "finished";
    case mcp::RelayEnd::kStopped:
      return "cancelled";
    case mcp::RelayEnd::kServerClosed:
      return sandbox.kind == SandboxOutcome::Kind::kExited && sandbox.exit_code == 0 ? "finished"
                                                                                     : "failed";
    case mcp::RelayEnd::kClientGone:
    case mcp::RelayEnd::kServerGone:
      return "failed";
  }
  return "failed";
}

// Like the agent's sandbox: the caller's git identity, the profile's caches (read-only unless the
// profile marks one read-write), no checkout to carry from; the relay's io thread; the record
// (the session's directory and its audit log) made last.
session::SessionOptions WrapSessionFor(const McpWrapOptions& o, const McpWrapResult& result,
                                       const std::string& state) {
  session::SessionOptions so;
  so.policy = o.policy;
  so.argv = o.argv;
  so.profile = ProfileContext{o.binding, CallerEnviron()};
  so.profile.cache_root = CacheRoot();
  so.egress_policy = o.policy;
  so.resolve = o.resolve;
  so.hint.profile = o.policy->name;
  so.phase = "exec";
  so.approval = o.approval;
  so.pre_approvals = o.pre_approvals;
  so.pre_approval_file = o.pre_approval_file;
  so.tty_fd = o.tty_fd;
  so.audit_log_path = result.audit_log_path;
  so.run_id = result.run_id;
  so.before_audit = [state, dir = result.session_dir]() -> Status {
    if (auto s = MakePrivateDirectory(state + "/mcp"); !s) return s.error();
    return MakePrivateDirectory(dir);
  };
  so.io_thread = true;
  return so;
}

// The broker's judgement of each tools/call, asked and audited through the session's.
std::shared_ptr<broker::McpGate> MakeGate(const McpWrapOptions& o, session::SessionPlan& plan,
                                          broker::Budgets budgets) {
  broker::McpGateConfig config;
  config.policy = o.policy;
  config.binding = o.binding;
  config.approval = o.approval;
  config.mode = "wrap";
  config.budgets = std::move(budgets);
  broker::McpGateServices services;
  services.approver = plan.approver();
  services.approvals = &plan.approvals();
  services.audit = [audit = plan.audit()](const broker::AuditEvent& e) { audit->Append(e); };
  return std::make_shared<broker::McpGate>(std::move(config), std::move(services));
}

// The session's result once the server is gone, and the audit log's last entry: how it ended.
// Fails (with the launch's error) when the sandbox could not be built.
Status FinishResult(McpWrapResult& result, Result<SandboxOutcome> sandbox,
                    const mcp::RelayStats& relay, const broker::McpGate& gate,
                    session::SessionPlan& plan) {
  result.relay = relay;
  result.calls_allowed = gate.allowed();
  result.calls_denied = gate.denied();
  result.budget_exhausted = gate.budget_exhausted();
  result.needs_approval = gate.needs_approval();
  if (const session::EgressSession* egress = plan.egress();
      egress != nullptr && egress->filtered()) {
    result.egress = true;
    result.egress_connections = egress->records();
  }
  broker::AuditLog& audit = *plan.audit();
  if (!sandbox) {
    audit.Append(broker::audit::Shutdown(
        {.status = "failed",
         .reason = "the sandbox could not be built: " + sandbox.error().Message()}));
    return sandbox.error();
  }
  result.sandbox = std::move(*sandbox);
  std::string reason = result.end_reason;
  if (!reason.empty()) reason += "; ";
  reason += "server: " + DescribeOutcome(result.sandbox);
  audit.Append(broker::audit::Shutdown(
      {.status = std::string(ShutdownStatus(result.ended_by, result.sandbox)), .reason = reason}));
  result.audit_entries = audit.entries();
  result.audit_lost = audit.lost();
  return Ok{};
}
}  // namespace

Result<UniqueFd> OwnDescription(int fd, bool write) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoError("fstat fd " + std::to_string(fd));
  if (S_ISFIFO(st.st_mode) || (S_ISCHR(st.st_mode) && ::isatty(fd) == 1)) {
    // O_NONBLOCK: opening a FIFO end whose other side is gone must not hang (reading then sees
    // EOF; writing fails with ENXIO and falls back to dup below).
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    UniqueFd own(
        ::open(proc.c_str(), (write ? O_WRONLY : O_RDONLY) | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    if (own.valid()) return own;
  }
  UniqueFd dup(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
  if (!dup.valid()) return ErrnoError("dup fd " + std::to_string(fd));
  return dup;
}

namespace {

// The relay's descriptors: the client's ends (own open file descriptions), the server's pipes, and
// the server's log ("" = cagent's stderr).
struct RelayEnds {
  UniqueFd client_in, client_out;
  Pipe server_in, server_out;
  UniqueFd server_log;
};

Result<RelayEnds> OpenRelayEnds(const McpWrapOptions& o) {
  RelayEnds e;
  auto client_in = OwnDescription(o.client_in_fd, /*write=*/false);
  if (!client_in) return std::move(client_in).Context("the client's input").error();
  e.client_in = std::move(*client_in);
  auto client_out = OwnDescription(o.client_out_fd, /*write=*/true);
  if (!client_out) return std::move(client_out).Context("the client's output").error();
  e.client_out = std::move(*client_out);
  auto server_in = MakePipe();
  if (!server_in) return server_in.error();
  e.server_in = std::move(*server_in);
  auto server_out = MakePipe();
  if (!server_out) return server_out.error();
  e.server_out = std::move(*server_out);
  if (!o.server_log_path.empty()) {
    e.server_log.Reset(::open(o.server_log_path.c_str(),
                              O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!e.server_log.valid()) return ErrnoError("open " + o.server_log_path);
  }
  return e;
}
}  // namespace

Result<McpWrapResult> RunMcpWrap(const McpWrapOptions& o) {
  if (!o.policy) return PlainError("start mcp wrap", "no policy");
  if (o.argv.empty()) {
    return PlainError("start mcp wrap", "no server command (give it after --)")
        .WithCode(Error::Code::kInvalidInput);
  }
  McpWrapResult result;
  result.run_id = o.run_id.empty() ? session::NewRunId() : o.run_id;
  const std::string state = o.state_dir.empty() ? session::StateDirectory() : o.state_dir;
  result.session_dir = state + "/mcp/" + result.run_id;
  result.audit_log_path = result.session_dir + "/events.jsonl";

  // ---- everything that can fail on bad options, before a directory or a sandbox exists ----
  broker::Budgets budgets = broker::BudgetsFromPolicy(*o.policy);
  if (auto s = broker::LowerBudgets(budgets, o.budget_overrides); !s) return s.error();
  auto fds = OpenRelayEnds(o);
  if (!fds) return fds.error();

  // ---- the session, its record made last ----
  auto prepared = session::Prepare(WrapSessionFor(o, result, state));
  if (!prepared) return prepared.error();
  session::SessionPlan& plan = **prepared;
  result.policy_digest = plan.policy_digest();
  result.notes = plan.notes();
  boost::asio::io_context& io = *plan.io();

  // ---- the payload: the relay between the client and the server's pipes, behind the gate ----
  auto gate = MakeGate(o, plan, std::move(budgets));
  GateAdapter adapter(gate);

  auto stop_sandbox = [&plan] { plan.StopSandbox(); };
  // After the client left (or the server closed its output), the server gets a moment to exit by
  // itself before it is stopped.
  boost::asio::steady_timer stop_grace(io);
  bool relay_ended = false;
  mcp::Relay relay(io, adapter, o.relay);
  relay.SetOnClientClosed([&] {
    stop_grace.expires_after(kMcpStopGrace);
    stop_grace.async_wait([stop_sandbox](const boost::system::error_code& ec) {
      if (!ec) stop_sandbox();
    });
  });
  std::string start_error;
  const bool started = relay.Start(
      {std::move(fds->client_in), std::move(fds->client_out), std::move(fds->server_in.w),
       std::move(fds->server_out.r)},
      [&](mcp::RelayEnd why, const std::string& text) {
        relay_ended = true;
        result.ended_by = why;
        result.end_reason = text;
        if (why == mcp::RelayEnd::kClientClosed || why == mcp::RelayEnd::kServerClosed) {
          stop_grace.expires_after(kMcpStopGrace);
          stop_grace.async_wait([stop_sandbox](const boost::system::error_code& ec) {
            if (!ec) stop_sandbox();
          });
        } else {
          stop_sandbox();
        }
      },
      &start_error);
  if (!started) return PlainError("start the relay", start_error);
  if (o.on_started) o.on_started(result.audit_log_path);

  session::Payload payload;
  // Signals end the session on the io thread: the relay stops, and its end stops the sandbox.
  payload.route_signals = true;
  payload.on_signal = [&](int sig) {
    relay.Stop();
    result.end_reason = std::string("cancelled by the operator (") + sigabbrev_np(sig) + ")";
  };
  UniqueFd sandbox_stdin = std::move(fds->server_in.r);
  UniqueFd sandbox_stdout = std::move(fds->server_out.w);
  payload.control = [&](SandboxControl& control) {
    control.stdin_fd = sandbox_stdin.get();
    control.stdout_fd = sandbox_stdout.get();
    control.stderr_fd = fds->server_log.valid() ? fds->server_log.get() : -1;
    // cagent's copies of the sandbox's ends go right after clone, so the relay sees EOF when the
    // server is gone.
    control.after_clone = [&sandbox_stdin, &sandbox_stdout] {
      sandbox_stdin.Reset();
      sandbox_stdout.Reset();
    };
  };
  payload.exited = [&](const Result<SandboxOutcome>&) {
    // Also when the launch failed before clone: the relay then sees the server's EOF.
    sandbox_stdin.Reset();
    sandbox_stdout.Reset();
  };
  // The server is gone: the relay flushes what it has for the client (its EOF on the server's
  // output is on its way); one that cannot finish within the grace is stopped.
  boost::asio::steady_timer flush_deadline(io);
  payload.wind_down = [&](const Result<SandboxOutcome>&) {
    boost::asio::post(io, [&] {
      stop_grace.cancel();
      if (relay_ended) return;
      flush_deadline.expires_after(kMcpStopGrace);
      flush_deadline.async_wait([&relay](const boost::system::error_code& ec) {
        if (!ec) relay.Stop();
      });
    });
  };
  auto sandbox = session::Run(plan, payload);

  if (auto s = FinishResult(result, std::move(sandbox), relay.stats(), *gate, plan); !s) {
    return s.error();
  }
  return result;
}

}  // namespace cagent::launcher::mcp
