#include "launcher/session/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/sha256.h"
#include "common/unique_fd.h"
#include "launcher/broker/approver.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/redactor.h"
#include "launcher/profile/spec.h"
#include "launcher/session/egress.h"
#include "launcher/session/git_identity.h"
#include "policy/language/dump.h"

namespace cagent::launcher::session {
namespace {

namespace fs = std::filesystem;
using broker::BrokerOutcome;

// How long an agent killed by a stop signal waits for the operator's signal to cagent (the same
// request, sent to each process of the job in turn) before its death counts as the agent's own.
constexpr std::chrono::milliseconds kCancelSignalGrace{500};

bool IsStopSignal(int sig) {
  return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
}

model::Environment EnvironmentMap(const std::vector<std::string>& env) {
  model::Environment out;
  for (const auto& entry : env) {
    const auto eq = entry.find('=');
    if (eq != std::string::npos) out.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return out;
}

bool IsExecutableFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

// True when `path` is inside one of the system trees every profile shows read-only, so no extra
// bind is needed for the agent binary.
bool UnderSystemTree(const std::string& path) {
  for (const char* tree : {"/usr/", "/bin/", "/lib/", "/opt/"}) {
    if (path.rfind(tree, 0) == 0) return true;
  }
  return false;
}

}  // namespace

Result<std::string> FindAgentBinary() {
  if (const char* env = std::getenv("CAGENT_AGENT_BINARY"); env != nullptr && *env != '\0') {
    if (!IsExecutableFile(env)) {
      return PlainError("find cagent-agent",
                        std::string("CAGENT_AGENT_BINARY=") + env + " is not an executable file");
    }
    std::error_code ec;
    return fs::canonical(env, ec).string();
  }
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return ErrnoError("readlink /proc/self/exe");
  const fs::path dir = fs::path(std::string(self, static_cast<size_t>(n))).parent_path();
  for (const fs::path& candidate : {dir / ".." / "agent" / "cagent-agent",
                                    dir / ".." / "libexec" / "cagent" / "cagent-agent"}) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(candidate, ec);
    if (!ec && IsExecutableFile(canonical.string())) return canonical.string();
  }
  return PlainError("find cagent-agent",
                    "not found beside " + dir.string() +
                        " (looked in ../agent/ and ../libexec/cagent/); set CAGENT_AGENT_BINARY");
}

std::string PolicyDigest(const policy::Policy& policy) {
  return Sha256Hex(policy::Dump(policy, /*with_locations=*/false));
}

Result<AgentSessionResult> RunAgentSession(const AgentSessionOptions& o) {
  if (!o.policy) return PlainError("start agent session", "no policy");
  AgentSessionResult result;
  result.policy_digest = PolicyDigest(*o.policy);

  std::string agent_binary = o.agent_binary;
  if (agent_binary.empty()) {
    auto found = FindAgentBinary();
    if (!found) return found.error();
    agent_binary = *found;
  }

  // ---- the broker's parts (all before the sandbox exists, so a bad option costs nothing) ----
  const std::vector<std::string> caller_env = CallerEnviron();
  std::vector<std::string> scrub;
  for (const auto& p : o.policy->env_scrub) scrub.push_back(p.name.pattern());
  const broker::Redactor redactor = broker::Redactor::FromEnvironment(caller_env, scrub);

  broker::ApprovalBook approvals;
  for (const auto& line : o.pre_approvals) {
    if (auto s = approvals.AddPreApproval(line, "--pre-approve"); !s) return s.error();
  }
  if (!o.pre_approval_file.empty()) {
    if (auto s = approvals.LoadPreApprovals(o.pre_approval_file); !s) return s.error();
  }

  std::optional<broker::AuditLog> own_audit;
  broker::AuditLog* audit = o.audit;
  if (audit == nullptr) {
    auto opened = broker::AuditLog::Open(o.audit_log_path, o.run_id, result.policy_digest,
                                         o.resume_audit_log);
    if (!opened) return std::move(opened).Context("open the audit log").error();
    own_audit.emplace(std::move(*opened));
    own_audit->SetObserver(o.on_entry);
    audit = &*own_audit;
  }

  boost::asio::io_context io;
  std::unique_ptr<model::ModelProvider> provider;
  if (o.calls == nullptr) {
    auto made = model::MakeModelProvider(io, o.model, EnvironmentMap(caller_env));
    if (!made) return std::move(made).Context("set up the model provider").error();
    provider = std::move(*made);
  }

  std::unique_ptr<broker::Approver> approver;
  if (o.make_approver) {
    approver = o.make_approver(io);
  } else if (o.approval != broker::ApprovalMode::kNever && o.tty_fd >= 0) {
    approver = broker::MakeTerminalApprover(io, o.tty_fd);
  }

  // ---- the sandbox's description ----
  ProfileContext ctx;
  ctx.binding = o.binding;
  ctx.environ = caller_env;
  ctx.cache_root = o.cache_root;
  ctx.cache_scope = o.cache_scope;
  ctx.carry_from = o.carry_from;
  // git inside commits as the caller (unless the profile says `git-identity none`).
  ctx.git_identity = CallerGitIdentity().Env();
  std::vector<std::string> argv = {agent_binary};
  argv.insert(argv.end(), o.agent_args.begin(), o.agent_args.end());
  auto launch = SpecFromPolicy(*o.policy, argv, ctx);
  if (!launch) return std::move(launch).Context("build the sandbox from the profile").error();
  LaunchSpec spec = std::move(launch->spec);
  result.notes = std::move(launch->notes);
  if (!UnderSystemTree(agent_binary)) spec.read_only_paths.push_back(agent_binary);

  // The socketpair: the agent's end crosses into the sandbox at the same fd number; cagent's copy
  // of it is closed right after clone so the broker sees EOF when the agent is gone.
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return ErrnoError("socketpair");
  }
  UniqueFd broker_end(pair[0]);
  UniqueFd agent_end(pair[1]);
  // execve must not close it; the agent sets FD_CLOEXEC again so its commands do not inherit it.
  if (::fcntl(agent_end.get(), F_SETFD, 0) != 0) return ErrnoError("fcntl F_SETFD");
  spec.keep_fds.push_back(agent_end.get());
  // Filtered egress: the profile's hosts rules, asked through the same approver, audited in the
  // same log (on the broker's thread). Without a hosts section: no network, where a name lookup
  // answers "no such name" at once (launcher/sandbox/egress_view.h).
  std::unique_ptr<EgressSession> egress;
  const bool filtered = o.policy->egress.value && spec.network == NetworkMode::kLoopback;
  if (filtered || EgressSession::Applies(spec)) {
    EgressSessionConfig ec;
    if (filtered) ec.policy = o.policy;
    ec.hint.profile = o.policy->name;
    ec.binding = o.binding;
    ec.overrides = o.resolve;
    ec.approval = o.approval;
    ec.phase = "agent";
    EgressSessionServices es;
    es.io = &io;
    es.approver = approver.get();
    es.approvals = &approvals;
    es.audit = [audit](const broker::AuditEvent& e) { audit->Append(e); };
    auto prepared = EgressSession::Prepare(spec, std::move(ec), std::move(es));
    if (!prepared) {
      return std::move(prepared)
          .Context(filtered ? "set up filtered egress" : "set up the sandbox's name lookups")
          .error();
    }
    egress = std::move(*prepared);
  }
  spec.env_set.push_back({protocol::kBrokerFdEnv, std::to_string(agent_end.get())});

  UniqueFd stop_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd.valid()) return ErrnoError("eventfd");
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) return ErrnoError("open /dev/null");
  UniqueFd agent_log;
  if (!o.agent_log_path.empty()) {
    agent_log.Reset(::open(o.agent_log_path.c_str(),
                           O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!agent_log.valid()) return ErrnoError("open " + o.agent_log_path);
  }

  broker::BrokerConfig config;
  config.run_id = o.run_id;
  config.policy = o.policy;
  config.bindings = o.binding;
  config.policy_digest = result.policy_digest;
  config.task = o.task;
  config.budgets = broker::BudgetsFromPolicy(*o.policy);
  if (auto s = broker::LowerBudgets(config.budgets, o.budget_overrides); !s) return s.error();
  config.approval = o.approval;
  config.serve = o.calls != nullptr;
  config.client_name = o.client_name;

  broker::BrokerServices services;
  services.audit = audit;
  services.redactor = &redactor;
  services.approver = approver.get();
  services.approvals = &approvals;
  services.model = provider.get();
  services.calls = o.calls;

  broker::Broker session(io, std::move(config), services);
  // After a finish the agent exits by itself; it gets a moment to do so before the sandbox is
  // stopped (so its exit is an exit, not a SIGTERM). Any other end stops the sandbox at once.
  boost::asio::steady_timer exit_grace(io);
  auto stop_sandbox = [&stop_fd] {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(stop_fd.get(), &one, sizeof(one));
  };
  session.SetOnEnd([&](const BrokerOutcome& outcome) {
    if (outcome.status != BrokerOutcome::Status::kFinished) {
      stop_sandbox();
      return;
    }
    exit_grace.expires_after(std::chrono::seconds(3));
    exit_grace.async_wait([stop_sandbox](const boost::system::error_code& ec) {
      if (!ec) stop_sandbox();
    });
  });
  if (o.on_event) session.SetOnEvent(o.on_event);

  // Signals: blocked on this thread (and so inherited blocked by nothing else), delivered to the
  // broker's thread through a signal_set, which cancels the run.
  sigset_t cancel_signals;
  ::sigemptyset(&cancel_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaddset(&cancel_signals, sig);
  sigset_t old_mask;
  ::pthread_sigmask(SIG_BLOCK, &cancel_signals, &old_mask);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  signals.add(SIGQUIT);
  std::atomic<int> cancel_signal{0};  // the operator's request, once one arrived
  if (o.handle_signals) {
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      cancel_signal.store(sig);
      session.Stop(BrokerOutcome::Status::kCancelled,
                   std::string("cancelled by the operator (") + sigabbrev_np(sig) + ")");
    });
  }

  session.Start(std::move(broker_end));
  if (o.on_broker) {
    boost::asio::post(io, [&o, &io, &session] { o.on_broker(&io, &session); });
  }
  auto work = boost::asio::make_work_guard(io);
  std::thread io_thread([&] {
    sigset_t none;
    ::sigemptyset(&none);
    ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
    io.run();
  });

  SandboxControl control;
  control.stdin_fd = dev_null.get();
  control.stdout_fd = agent_log.get();
  control.stderr_fd = agent_log.get();
  control.stop_fd = stop_fd.get();
  control.forward_signals = false;
  const int agent_fd = agent_end.get();
  control.after_clone = [&agent_end, agent_fd] {
    if (agent_end.get() == agent_fd) agent_end.Reset();
  };
  if (egress && !spec.net_listeners.empty()) {
    control.on_listeners = [&egress](std::vector<UniqueFd> fds) {
      return egress->Start(std::move(fds));
    };
  }
  auto sandbox = RunSandbox(spec, control);
  agent_end.Reset();
  // The proxy's last records are posted to the broker's thread, which is still running.
  if (egress) egress->Stop();
  // A stop signal sent to every process of a job (Slurm's linuxproc and cgroup process tracking,
  // systemd's control-group kill) reaches the agent as well as cagent, one process after the
  // other: the agent may die, and the broker see its connection go, before cagent's own signal is
  // handled. An agent killed by such a signal gives that request a moment to arrive (below, a
  // cancel that did is what ended the session); any other death is final at once.
  if (o.handle_signals && sandbox && sandbox->kind == SandboxOutcome::Kind::kSignaled &&
      IsStopSignal(sandbox->signal)) {
    const auto until = std::chrono::steady_clock::now() + kCancelSignalGrace;
    while (cancel_signal.load() == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // The sandbox is gone. If the broker is still waiting, the agent ended without finishing.
  std::string why = "the agent exited without finishing";
  if (sandbox) {
    why = "the agent ended without finishing (" + DescribeOutcome(*sandbox) + ")";
  }
  boost::asio::post(io, [&session, why] { session.Stop(BrokerOutcome::Status::kFailed, why); });
  work.reset();
  boost::asio::post(io, [&signals, &exit_grace] {
    boost::system::error_code ignored;
    signals.cancel(ignored);
    exit_grace.cancel();
  });
  io_thread.join();
  if (o.on_broker) o.on_broker(nullptr, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);

  if (!sandbox) return sandbox.error();
  result.sandbox = std::move(*sandbox);
  result.broker = session.outcome();
  if (result.broker.status == BrokerOutcome::Status::kFailed && result.broker.agent_gone &&
      cancel_signal.load() != 0) {
    // The broker ended the session when the agent's connection went; the operator's request,
    // which reached the agent first, is why. The reason is the one a cancel that reached cagent
    // first gives, word for word: which process a job-wide signal reached first is a race, and
    // the same stop must read the same in result.json whatever its order (batch reports compare
    // them). The event log keeps the broker's own record of the connection closing.
    result.broker.status = BrokerOutcome::Status::kCancelled;
    result.broker.reason =
        std::string("cancelled by the operator (") + sigabbrev_np(cancel_signal.load()) + ")";
  }
  result.audit_entries = audit->entries();
  result.audit_lost = audit->lost();
  result.audit_head = audit->head();
  if (egress && egress->filtered()) {
    result.egress = true;
    result.egress_connections = egress->records();
    result.egress_budget_exhausted = egress->budget_exhausted();
  }
  return result;
}

}  // namespace cagent::launcher::session
