#include "launcher/mcp/serve/wrap.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>
#include <utility>

#include "launcher/broker/approver.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/mcp_gate.h"
#include "launcher/profile/caches.h"
#include "launcher/profile/spec.h"
#include "launcher/session/agent.h"
#include "launcher/session/egress.h"
#include "launcher/session/git_identity.h"
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

Result<McpWrapResult> RunMcpWrap(const McpWrapOptions& o) {
  if (!o.policy) return PlainError("start mcp wrap", "no policy");
  if (o.argv.empty()) {
    return PlainError("start mcp wrap", "no server command (give it after --)")
        .WithCode(Error::Code::kInvalidInput);
  }
  McpWrapResult result;
  result.policy_digest = session::PolicyDigest(*o.policy);
  result.run_id = o.run_id.empty() ? session::NewRunId() : o.run_id;
  const std::string state = o.state_dir.empty() ? session::StateDirectory() : o.state_dir;
  result.session_dir = state + "/mcp/" + result.run_id;
  result.audit_log_path = result.session_dir + "/events.jsonl";

  // ---- everything that can fail on bad options, before a directory or a sandbox exists ----
  broker::Budgets budgets = broker::BudgetsFromPolicy(*o.policy);
  if (auto s = broker::LowerBudgets(budgets, o.budget_overrides); !s) return s.error();
  broker::ApprovalBook approvals;
  for (const auto& line : o.pre_approvals) {
    if (auto s = approvals.AddPreApproval(line, "--pre-approve"); !s) return s.error();
  }
  if (!o.pre_approval_file.empty()) {
    if (auto s = approvals.LoadPreApprovals(o.pre_approval_file); !s) return s.error();
  }
  // Like the agent's sandbox: the caller's git identity, and the profile's caches (read-only
  // unless the profile marks one read-write). No checkout to carry from.
  ProfileContext ctx{o.binding, CallerEnviron()};
  ctx.git_identity = session::CallerGitIdentity().Env();
  ctx.cache_root = CacheRoot();
  auto launch = SpecFromPolicy(*o.policy, o.argv, ctx);
  if (!launch) return std::move(launch).Context("build the sandbox from the profile").error();
  LaunchSpec spec = std::move(launch->spec);
  result.notes = std::move(launch->notes);

  auto client_in = OwnDescription(o.client_in_fd, /*write=*/false);
  if (!client_in) return std::move(client_in).Context("the client's input").error();
  auto client_out = OwnDescription(o.client_out_fd, /*write=*/true);
  if (!client_out) return std::move(client_out).Context("the client's output").error();
  auto server_in = MakePipe();
  if (!server_in) return server_in.error();
  auto server_out = MakePipe();
  if (!server_out) return server_out.error();
  UniqueFd server_log;
  if (!o.server_log_path.empty()) {
    server_log.Reset(::open(o.server_log_path.c_str(),
                            O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!server_log.valid()) return ErrnoError("open " + o.server_log_path);
  }
  UniqueFd stop_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd.valid()) return ErrnoError("eventfd");

  // ---- the session's record ----
  if (auto s = MakePrivateDirectory(state + "/mcp"); !s) return s.error();
  if (auto s = MakePrivateDirectory(result.session_dir); !s) return s.error();
  auto opened = broker::AuditLog::Open(result.audit_log_path, result.run_id, result.policy_digest);
  if (!opened) return std::move(opened).Context("open the audit log").error();
  broker::AuditLog audit = std::move(*opened);

  // ---- the io thread's parts: approver, gate, egress, relay ----
  boost::asio::io_context io;
  std::unique_ptr<broker::Approver> approver;
  if (o.approval != broker::ApprovalMode::kNever && o.tty_fd >= 0) {
    approver = broker::MakeTerminalApprover(io, o.tty_fd);
  }
  broker::McpGateConfig gate_config;
  gate_config.policy = o.policy;
  gate_config.binding = o.binding;
  gate_config.approval = o.approval;
  gate_config.mode = "wrap";
  gate_config.budgets = budgets;
  broker::McpGateServices gate_services;
  gate_services.approver = approver.get();
  gate_services.approvals = &approvals;
  gate_services.audit = [&audit](const broker::AuditEvent& e) { audit.Append(e); };
  auto gate = std::make_shared<broker::McpGate>(std::move(gate_config), std::move(gate_services));
  GateAdapter adapter(gate);

  // Filtered egress with the profile's hosts rules; without, no network, where a name lookup
  // answers "no such name" at once (launcher/sandbox/egress_view.h).
  std::unique_ptr<session::EgressSession> egress;
  const bool filtered = o.policy->egress.value && spec.network == NetworkMode::kLoopback;
  if (filtered || session::EgressSession::Applies(spec)) {
    session::EgressSessionConfig ec;
    if (filtered) ec.policy = o.policy;
    ec.hint.profile = o.policy->name;
    ec.binding = o.binding;
    ec.overrides = o.resolve;
    ec.approval = o.approval;
    ec.phase = "exec";
    session::EgressSessionServices es;
    es.io = &io;
    es.approver = approver.get();
    es.approvals = &approvals;
    es.audit = [&audit](const broker::AuditEvent& e) { audit.Append(e); };
    auto prepared = session::EgressSession::Prepare(spec, std::move(ec), std::move(es));
    if (!prepared) {
      return std::move(prepared)
          .Context(filtered ? "set up filtered egress" : "set up the sandbox's name lookups")
          .error();
    }
    egress = std::move(*prepared);
  }

  auto stop_sandbox = [&stop_fd] {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(stop_fd.get(), &one, sizeof(one));
  };
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
      {std::move(*client_in), std::move(*client_out), std::move(server_in->w),
       std::move(server_out->r)},
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

  // Signals: blocked on this thread, delivered to the io thread, where they end the session.
  sigset_t cancel_signals;
  ::sigemptyset(&cancel_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaddset(&cancel_signals, sig);
  sigset_t old_mask;
  ::pthread_sigmask(SIG_BLOCK, &cancel_signals, &old_mask);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  signals.add(SIGQUIT);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    relay.Stop();  // on_end stops the sandbox
    result.end_reason = std::string("cancelled by the operator (") + sigabbrev_np(sig) + ")";
  });

  auto work = boost::asio::make_work_guard(io);
  std::thread io_thread([&] {
    sigset_t none;
    ::sigemptyset(&none);
    ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
    io.run();
  });

  SandboxControl control;
  UniqueFd sandbox_stdin = std::move(server_in->r);
  UniqueFd sandbox_stdout = std::move(server_out->w);
  control.stdin_fd = sandbox_stdin.get();
  control.stdout_fd = sandbox_stdout.get();
  control.stderr_fd = server_log.valid() ? server_log.get() : -1;
  control.stop_fd = stop_fd.get();
  control.forward_signals = false;
  // cagent's copies of the sandbox's ends go right after clone, so the relay sees EOF when the
  // server is gone.
  control.after_clone = [&sandbox_stdin, &sandbox_stdout] {
    sandbox_stdin.Reset();
    sandbox_stdout.Reset();
  };
  if (egress && !spec.net_listeners.empty()) {
    control.on_listeners = [&egress](std::vector<UniqueFd> fds) {
      return egress->Start(std::move(fds));
    };
  }
  auto sandbox = RunSandbox(spec, control);
  // Also when the launch failed before clone: the relay then sees the server's EOF.
  sandbox_stdin.Reset();
  sandbox_stdout.Reset();
  if (egress) egress->Stop();

  // The server is gone: the relay flushes what it has for the client (its EOF on the server's
  // output is on its way); one that cannot finish within the grace is stopped.
  boost::asio::steady_timer flush_deadline(io);
  boost::asio::post(io, [&] {
    stop_grace.cancel();
    if (relay_ended) return;
    flush_deadline.expires_after(kMcpStopGrace);
    flush_deadline.async_wait([&relay](const boost::system::error_code& ec) {
      if (!ec) relay.Stop();
    });
  });
  boost::asio::post(io, [&] {
    boost::system::error_code ignored;
    signals.cancel(ignored);
    if (approver) approver->Cancel();
  });
  work.reset();
  io_thread.join();
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);

  result.relay = relay.stats();
  result.calls_allowed = gate->allowed();
  result.calls_denied = gate->denied();
  result.budget_exhausted = gate->budget_exhausted();
  result.needs_approval = gate->needs_approval();
  if (egress && egress->filtered()) {
    result.egress = true;
    result.egress_connections = egress->records();
  }
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
  return result;
}

}  // namespace cagent::launcher::mcp
