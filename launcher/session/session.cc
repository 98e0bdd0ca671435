#include "launcher/session/session.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdint>
#include <optional>
#include <thread>
#include <utility>

#include "common/sha256.h"
#include "launcher/egress/tls.h"
#include "launcher/session/git_identity.h"
#include "policy/language/dump.h"
#include "policy/match/hosts.h"

namespace cagent::launcher::session {

std::string PolicyDigest(const policy::Policy& policy) {
  return Sha256Hex(policy::Dump(policy, /*with_locations=*/false));
}

SessionPlan::~SessionPlan() = default;

const std::string& SessionPlan::policy_digest() const {
  if (!policy_digest_) policy_digest_ = policy_ ? PolicyDigest(*policy_) : std::string();
  return *policy_digest_;
}

Result<std::vector<std::string>> CredentialHosts(const LoadedCredentials& loaded) {
  std::vector<std::string> hosts;
  for (const auto& [name, patterns] : loaded.hosts) {
    for (const policy::HostPattern& h : patterns) {
      if (h.kind == policy::HostPattern::Kind::kSuffix ||
          h.kind == policy::HostPattern::Kind::kAny) {
        return PlainError("credential '" + name + "'",
                          "is bound to " + h.Text() +
                              ", a wildcard: cagent makes the sandbox's CA for each named host "
                              "and vouches for nothing else; name the hosts (e.g. api." +
                              (h.host.empty() ? std::string("example.org") : h.host) + ")")
            .WithCode(Error::Code::kInvalidInput);
      }
      hosts.push_back(h.host);
    }
  }
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  return hosts;
}

namespace {

// environ as a map (the first of a name wins, as getenv reads it).
std::map<std::string, std::string> OwnEnvironment() {
  std::map<std::string, std::string> out;
  for (const std::string& e : CallerEnviron()) {
    const std::size_t eq = e.find('=');
    if (eq == std::string::npos) continue;
    out.emplace(e.substr(0, eq), e.substr(eq + 1));
  }
  return out;
}

}  // namespace

void SessionPlan::StopSandbox() const {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(stop_fd_.get(), &one, sizeof(one));
}

Result<std::unique_ptr<SessionPlan>> Prepare(SessionOptions o) {
  std::unique_ptr<SessionPlan> plan(new SessionPlan());

  // 1. The sandbox's description: given, or the profile's (with the caller's git identity).
  if (o.spec) {
    plan->spec_ = std::move(*o.spec);
  } else {
    if (!o.policy) return PlainError("start the session", "neither a profile nor a launch spec");
    if (o.profile.git_identity.empty()) o.profile.git_identity = CallerGitIdentity().Env();
    auto launch = SpecFromPolicy(*o.policy, o.argv, o.profile);
    if (!launch) return std::move(launch).Context("build the sandbox from the profile").error();
    plan->spec_ = std::move(launch->spec);
    plan->notes_ = std::move(launch->notes);
  }
  plan->policy_ = o.policy;

  // The credentials (issue 36): every value read now, before anything runs; the CA for their
  // hosts. The egress session (5.) shows the sandbox placeholders and gives the proxy the rest.
  const policy::Policy* with_credentials =
      o.credentials_policy ? o.credentials_policy.get() : o.policy.get();
  std::optional<egress::MadeCa> ca;
  const egress::Tls* tls = egress::InstalledTls();
  std::string upstream_ca_file;
  if (with_credentials != nullptr && !with_credentials->credentials.empty()) {
    const std::map<std::string, std::string> env =
        o.credential_env ? *o.credential_env : OwnEnvironment();
    auto loaded = LoadCredentials(*with_credentials, env, o.profile.binding.home);
    if (!loaded) return std::move(loaded).Context("read the profile's credentials").error();
    for (const std::string& skipped : loaded->skipped) {
      plan->notes_.push_back("credential " + skipped);
    }
    if (!loaded->credentials.empty()) {
      auto hosts = CredentialHosts(*loaded);
      if (!hosts) return hosts.error();
      egress::SandboxCaOptions ca_options;
      ca_options.label = "cagent sandbox CA" + (o.run_id.empty() ? "" : " " + o.run_id);
      ca_options.hosts = std::move(*hosts);
      if (tls == nullptr) {
        // Only a program without OpenSSL (the launcher) gets here; its `exec` hands a profile
        // with credentials to cagent-full before this point.
        return PlainError("apply the profile's credentials",
                          "this program was built without TLS, which intercepting needs; run "
                          "it with cagent-full")
            .WithCode(Error::Code::kInvalidInput);
      }
      auto made = tls->MakeCa(std::move(ca_options));
      if (!made) return std::move(made).Context("make the sandbox's CA").error();
      ca = std::move(*made);
      if (auto it = env.find("SSL_CERT_FILE"); it != env.end()) upstream_ca_file = it->second;
    }
    plan->credentials_ = std::make_shared<const LoadedCredentials>(std::move(*loaded));
  }

  // 2. What the operator approved in advance.
  for (const auto& line : o.pre_approvals) {
    if (auto s = plan->approvals_.AddPreApproval(line, "--pre-approve"); !s) return s.error();
  }
  if (!o.pre_approval_file.empty()) {
    if (auto s = plan->approvals_.LoadPreApprovals(o.pre_approval_file); !s) return s.error();
  }

  plan->stop_fd_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!plan->stop_fd_.valid()) return ErrnoError("eventfd");

  // 3. The audit log, last of what the options can make fail: a bad option leaves no log behind.
  if (o.audit != nullptr) {
    plan->audit_ = o.audit;
  } else if (!o.audit_log_path.empty()) {
    if (o.before_audit) {
      if (auto s = o.before_audit(); !s) return s.error();
    }
    auto opened = broker::AuditLog::Open(o.audit_log_path, o.run_id, plan->policy_digest(),
                                         o.resume_audit_log);
    if (!opened) return std::move(opened).Context("open the audit log").error();
    plan->own_audit_.emplace(std::move(*opened));
    if (o.on_audit_entry) plan->own_audit_->SetObserver(std::move(o.on_audit_entry));
    plan->audit_ = &*plan->own_audit_;
  }

  // 4. The io thread's parts: the approver lives on it.
  const bool terminal_prompt = o.approval != broker::ApprovalMode::kNever && o.tty_fd >= 0;
  if (o.io_thread || o.make_approver || terminal_prompt) {
    plan->io_ = std::make_unique<boost::asio::io_context>();
  }
  if (o.make_approver) {
    plan->approver_ = o.make_approver(*plan->io_);
  } else if (terminal_prompt) {
    plan->approver_ = broker::MakeTerminalApprover(*plan->io_, o.tty_fd);
  }

  // 5. Egress: filtered by the hosts rules, asked through the same approver and audited in the
  // same log; or no network, where a name lookup answers "no such name" at once
  // (launcher/sandbox/egress_view.h). None when the sandbox shares the host's network.
  LaunchSpec& spec = plan->spec_;
  const bool has_hosts = o.egress_policy != nullptr && o.egress_policy->egress.value;
  const bool filtered = has_hosts && (o.egress_required || spec.network == NetworkMode::kLoopback);
  if (ca && !filtered) {
    // Fail closed: the proxy is what applies a credential, and nothing else keeps the value out
    // while letting the tool use it.
    return PlainError("apply the profile's credentials",
                      "they need filtered egress: cagent's egress proxy puts each value into the "
                      "requests to its hosts. Give the profile network loopback and a hosts "
                      "section allowing the bound hosts (and keep the net layer on)")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (filtered || EgressSession::Applies(spec)) {
    EgressSessionConfig ec;
    if (filtered) ec.policy = o.egress_policy;
    ec.binding = o.profile.binding;
    ec.overrides = std::move(o.resolve);
    ec.approval = o.approval;
    ec.phase = o.phase;
    ec.hint = std::move(o.hint);
    if (ca) {
      ec.credentials = plan->credentials_;
      ec.ca = *ca;
      ec.tls = tls;
      ec.upstream_ca_file = upstream_ca_file;
    }
    EgressSessionServices es;
    es.io = plan->io_.get();
    es.approver = plan->approver_.get();
    es.approvals = &plan->approvals_;
    if (plan->audit_ != nullptr) {
      es.audit = [audit = plan->audit_](const broker::AuditEvent& e) { audit->Append(e); };
    } else if (o.audit_sink) {
      es.audit = std::move(o.audit_sink);
    }
    es.on_record = std::move(o.on_record);
    es.on_exchange = std::move(o.on_exchange);
    es.on_hint = std::move(o.on_hint);
    auto prepared = EgressSession::Prepare(spec, std::move(ec), std::move(es));
    if (!prepared) {
      return std::move(prepared)
          .Context(filtered ? "set up filtered egress" : "set up the sandbox's name lookups")
          .error();
    }
    plan->egress_ = std::move(*prepared);
  }
  return plan;
}

Result<SandboxOutcome> Run(SessionPlan& plan, const Payload& payload) {
  boost::asio::io_context* io = plan.io();

  // The caller's signals: blocked on this thread (so every thread made from here on inherits them
  // blocked) and delivered to the io thread, where the payload ends the session. The sandbox then
  // leaves them alone (forward_signals false) and is stopped through the stop descriptor.
  const bool route_signals = payload.route_signals && io != nullptr;
  sigset_t old_mask;
  std::optional<boost::asio::signal_set> signals;
  if (route_signals) {
    sigset_t cancel;
    ::sigemptyset(&cancel);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaddset(&cancel, sig);
    ::pthread_sigmask(SIG_BLOCK, &cancel, &old_mask);
    signals.emplace(*io, SIGINT, SIGTERM, SIGHUP);
    signals->add(SIGQUIT);
    if (payload.on_signal) {
      signals->async_wait([&payload](const boost::system::error_code& ec, int sig) {
        if (!ec) payload.on_signal(sig);
      });
    }
  }

  if (payload.start) payload.start();
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::thread io_thread;
  if (io != nullptr) {
    work.emplace(io->get_executor());
    io_thread = std::thread([io] {
      sigset_t none;
      ::sigemptyset(&none);
      ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
      io->run();
    });
  }

  SandboxControl control;
  control.stop_fd = plan.stop_fd();
  control.forward_signals = !route_signals;
  EgressSession* egress = plan.egress();
  if (egress != nullptr && !plan.spec().net_listeners.empty()) {
    control.on_listeners = [egress](std::vector<UniqueFd> fds) {
      return egress->Start(std::move(fds));
    };
  }
  if (payload.control) payload.control(control);
  Result<SandboxOutcome> outcome = RunSandbox(plan.spec(), control);
  if (payload.exited) payload.exited(outcome);
  // The proxy's last records are posted to the io thread, which is still running.
  if (egress != nullptr) egress->Stop();
  if (payload.wind_down) payload.wind_down(outcome);

  if (io != nullptr) {
    // What still waits on the io thread (a prompt, the signal wait) is cancelled; then it runs dry.
    boost::asio::post(*io, [&signals, approver = plan.approver()] {
      if (signals) {
        boost::system::error_code ignored;
        signals->cancel(ignored);
      }
      if (approver != nullptr) approver->Cancel();
    });
    work.reset();
    io_thread.join();
  }
  if (route_signals) ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  return outcome;
}

}  // namespace cagent::launcher::session
