#include "launcher/session/agent.h"

#include <fcntl.h>
#include <signal.h>
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

#include "common/unique_fd.h"
#include "launcher/broker/approver.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/redactor.h"
#include "launcher/profile/spec.h"
#include "launcher/session/egress.h"
#include "launcher/session/session.h"

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

// The agent's session: its sandbox from the profile, the run's approvals and audit log, egress by
// the profile's hosts rules; a broker (and its io thread) in any case.
SessionOptions AgentSessionFor(const AgentSessionOptions& o, const std::string& agent_binary,
                               const std::vector<std::string>& caller_env) {
  SessionOptions so;
  so.policy = o.policy;
  so.argv = {agent_binary};
  so.argv.insert(so.argv.end(), o.agent_args.begin(), o.agent_args.end());
  so.profile.binding = o.binding;
  so.profile.environ = caller_env;
  so.profile.cache_root = o.cache_root;
  so.profile.cache_scope = o.cache_scope;
  so.profile.carry_from = o.carry_from;
  so.egress_policy = o.policy;
  so.resolve = o.resolve;
  so.hint.profile = o.policy->name;
  so.phase = "agent";
  so.approval = o.approval;
  so.pre_approvals = o.pre_approvals;
  so.pre_approval_file = o.pre_approval_file;
  so.tty_fd = o.tty_fd;
  so.make_approver = o.make_approver;
  so.audit = o.audit;
  so.audit_log_path = o.audit_log_path;
  so.run_id = o.run_id;
  so.resume_audit_log = o.resume_audit_log;
  so.on_audit_entry = o.on_entry;
  so.io_thread = true;  // the broker's
  return so;
}

// The payload's descriptors: the broker's socketpair (the agent's end crosses into the sandbox at
// the same number), the agent's stdin (/dev/null: the operator's terminal belongs to the prompts)
// and its log.
struct AgentChannel {
  UniqueFd broker_end;
  UniqueFd agent_end;
  UniqueFd dev_null;
  UniqueFd agent_log;  // invalid: cagent's stderr
};

Result<AgentChannel> OpenAgentChannel(const AgentSessionOptions& o, LaunchSpec& spec) {
  AgentChannel c;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return ErrnoError("socketpair");
  }
  c.broker_end.Reset(pair[0]);
  c.agent_end.Reset(pair[1]);
  // execve must not close it; the agent sets FD_CLOEXEC again so its commands do not inherit it.
  if (::fcntl(c.agent_end.get(), F_SETFD, 0) != 0) return ErrnoError("fcntl F_SETFD");
  spec.keep_fds.push_back(c.agent_end.get());
  spec.env_set.push_back({protocol::kBrokerFdEnv, std::to_string(c.agent_end.get())});
  c.dev_null.Reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!c.dev_null.valid()) return ErrnoError("open /dev/null");
  if (!o.agent_log_path.empty()) {
    c.agent_log.Reset(::open(o.agent_log_path.c_str(),
                             O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!c.agent_log.valid()) return ErrnoError("open " + o.agent_log_path);
  }
  return c;
}

Result<broker::BrokerConfig> BrokerConfigFor(const AgentSessionOptions& o,
                                             const std::string& policy_digest) {
  broker::BrokerConfig config;
  config.run_id = o.run_id;
  config.policy = o.policy;
  config.bindings = o.binding;
  config.policy_digest = policy_digest;
  config.task = o.task;
  config.budgets = broker::BudgetsFromPolicy(*o.policy);
  if (auto s = broker::LowerBudgets(config.budgets, o.budget_overrides); !s) return s.error();
  if (auto s = broker::CheckCostBudget(config.budgets, o.model.prices,
                                       o.model.provider + ":" + o.model.model);
      !s) {
    return s.error();
  }
  config.model_prices = o.model.prices;
  config.approval = o.approval;
  config.serve = o.calls != nullptr;
  config.client_name = o.client_name;
  return config;
}

// A stop signal sent to every process of a job (Slurm's linuxproc and cgroup process tracking,
// systemd's control-group kill) reaches the agent as well as cagent, one process after the other:
// the agent may die, and the broker see its connection go, before cagent's own signal is handled.
// An agent killed by such a signal gives that request a moment to arrive; any other death is
// final at once.
void AwaitOperatorsSignal(const Result<SandboxOutcome>& sandbox, const std::atomic<int>& signal) {
  if (!sandbox || sandbox->kind != SandboxOutcome::Kind::kSignaled ||
      !IsStopSignal(sandbox->signal)) {
    return;
  }
  const auto until = std::chrono::steady_clock::now() + kCancelSignalGrace;
  while (signal.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The session's result once it ended: the sandbox's and the broker's outcomes, the log's head.
AgentSessionResult SessionResult(SessionPlan& plan, SandboxOutcome sandbox,
                                 BrokerOutcome broker_outcome, int cancel_signal) {
  AgentSessionResult result;
  result.policy_digest = plan.policy_digest();
  result.notes = plan.notes();
  result.sandbox = std::move(sandbox);
  result.broker = std::move(broker_outcome);
  if (result.broker.status == BrokerOutcome::Status::kFailed && result.broker.agent_gone &&
      cancel_signal != 0) {
    // The broker ended the session when the agent's connection went; the operator's request,
    // which reached the agent first, is why. The reason is the one a cancel that reached cagent
    // first gives, word for word: which process a job-wide signal reached first is a race, and
    // the same stop must read the same in result.json whatever its order (batch reports compare
    // them). The event log keeps the broker's own record of the connection closing.
    result.broker.status = BrokerOutcome::Status::kCancelled;
    result.broker.reason =
        std::string("cancelled by the operator (") + sigabbrev_np(cancel_signal) + ")";
  }
  const broker::AuditLog& audit = *plan.audit();
  result.audit_entries = audit.entries();
  result.audit_lost = audit.lost();
  result.audit_head = audit.head();
  if (const EgressSession* egress = plan.egress(); egress != nullptr && egress->filtered()) {
    result.egress = true;
    result.egress_connections = egress->records();
    result.egress_budget_exhausted = egress->budget_exhausted();
    result.egress_exchanges = egress->exchanges();
  }
  if (const LoadedCredentials* loaded = plan.credentials(); loaded != nullptr) {
    for (const egress::SandboxCredential& c : loaded->credentials) {
      result.credentials_loaded.push_back(c.name);
    }
    result.credentials_skipped = loaded->skipped;
  }
  return result;
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
  // The build tree (launcher/ beside agent/), cagent-full's own directory once installed
  // (libexec/cagent/), a relocated install's bin/ beside libexec/.
  for (const fs::path& candidate : {dir / ".." / "agent" / "cagent-agent", dir / "cagent-agent",
                                    dir / ".." / "libexec" / "cagent" / "cagent-agent"}) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(candidate, ec);
    if (!ec && IsExecutableFile(canonical.string())) return canonical.string();
  }
  return PlainError(
      "find cagent-agent",
      "not found beside " + dir.string() +
          " (looked in ../agent/, ./ and ../libexec/cagent/); set CAGENT_AGENT_BINARY");
}

Result<AgentSessionResult> RunAgentSession(const AgentSessionOptions& o) {
  if (!o.policy) return PlainError("start agent session", "no policy");
  std::string agent_binary = o.agent_binary;
  if (agent_binary.empty()) {
    auto found = FindAgentBinary();
    if (!found) return found.error();
    agent_binary = *found;
  }
  const std::vector<std::string> caller_env = CallerEnviron();
  auto prepared = Prepare(AgentSessionFor(o, agent_binary, caller_env));
  if (!prepared) return prepared.error();
  SessionPlan& plan = **prepared;
  boost::asio::io_context& io = *plan.io();

  // ---- the broker's parts ----
  std::vector<std::string> scrub;
  for (const auto& p : o.policy->env_scrub) scrub.push_back(p.name.pattern());
  // The sandbox's credentials (issue 36) are redacted like the scrubbed variables: the sandbox
  // never holds them, but an upstream answer or an error text might echo one.
  std::vector<std::pair<std::string, std::string>> credential_values;
  if (const LoadedCredentials* loaded = plan.credentials(); loaded != nullptr) {
    for (const egress::SandboxCredential& c : loaded->credentials) {
      credential_values.emplace_back("credential:" + c.name, c.value);
    }
  }
  const broker::Redactor redactor =
      broker::Redactor::FromEnvironment(caller_env, scrub).With(std::move(credential_values));
  std::unique_ptr<model::ModelProvider> provider;
  if (o.calls == nullptr) {
    auto made = model::MakeModelProvider(io, o.model, EnvironmentMap(caller_env));
    if (!made) return std::move(made).Context("set up the model provider").error();
    provider = std::move(*made);
  }
  auto config = BrokerConfigFor(o, plan.policy_digest());
  if (!config) return config.error();
  if (!UnderSystemTree(agent_binary)) plan.spec().read_only_paths.push_back(agent_binary);
  auto channel = OpenAgentChannel(o, plan.spec());
  if (!channel) return channel.error();

  broker::BrokerServices services;
  services.audit = plan.audit();
  services.redactor = &redactor;
  services.approver = plan.approver();
  services.approvals = &plan.approvals();
  services.model = provider.get();
  services.calls = o.calls;
  broker::Broker session(io, std::move(*config), services);
  // After a finish the agent exits by itself; it gets a moment to do so before the sandbox is
  // stopped (so its exit is an exit, not a SIGTERM). Any other end stops the sandbox at once.
  boost::asio::steady_timer exit_grace(io);
  session.SetOnEnd([&](const BrokerOutcome& outcome) {
    if (outcome.status != BrokerOutcome::Status::kFinished) {
      plan.StopSandbox();
      return;
    }
    exit_grace.expires_after(std::chrono::seconds(3));
    exit_grace.async_wait([&plan](const boost::system::error_code& ec) {
      if (!ec) plan.StopSandbox();
    });
  });
  if (o.on_event) session.SetOnEvent(o.on_event);

  // ---- the payload: the broker on the agent's socket ----
  std::atomic<int> cancel_signal{0};  // the operator's request, once one arrived
  Payload payload;
  // The signals go to the broker's thread, which cancels the run (mcp serve handles its own).
  payload.route_signals = true;
  if (o.handle_signals) {
    payload.on_signal = [&](int sig) {
      cancel_signal.store(sig);
      session.Stop(BrokerOutcome::Status::kCancelled,
                   std::string("cancelled by the operator (") + sigabbrev_np(sig) + ")");
    };
  }
  payload.start = [&] {
    session.Start(std::move(channel->broker_end));
    if (o.on_broker) {
      boost::asio::post(io, [&o, &io, &session] { o.on_broker(&io, &session); });
    }
  };
  UniqueFd& agent_end = channel->agent_end;
  const int agent_fd = agent_end.get();
  payload.control = [&](SandboxControl& control) {
    control.stdin_fd = channel->dev_null.get();
    control.stdout_fd = channel->agent_log.get();
    control.stderr_fd = channel->agent_log.get();
    // cagent's copy of the agent's end goes right after clone: the broker sees EOF when the
    // agent is gone.
    control.after_clone = [&agent_end, agent_fd] {
      if (agent_end.get() == agent_fd) agent_end.Reset();
    };
  };
  payload.exited = [&](const Result<SandboxOutcome>&) { agent_end.Reset(); };
  payload.wind_down = [&](const Result<SandboxOutcome>& sandbox) {
    if (o.handle_signals) AwaitOperatorsSignal(sandbox, cancel_signal);
    // The sandbox is gone. If the broker is still waiting, the agent ended without finishing.
    std::string why = "the agent exited without finishing";
    if (sandbox) why = "the agent ended without finishing (" + DescribeOutcome(*sandbox) + ")";
    boost::asio::post(io, [&session, &exit_grace, why] {
      session.Stop(BrokerOutcome::Status::kFailed, why);
      exit_grace.cancel();
    });
  };
  auto sandbox = Run(plan, payload);
  if (o.on_broker) o.on_broker(nullptr, nullptr);
  if (!sandbox) return sandbox.error();
  return SessionResult(plan, std::move(*sandbox), session.outcome(), cancel_signal.load());
}

}  // namespace cagent::launcher::session
