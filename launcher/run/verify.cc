#include "launcher/run/verify.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "common/unique_fd.h"
#include "launcher/sandbox/sandbox.h"
#include "launcher/session/session.h"

namespace cagent::launcher::run {

std::chrono::milliseconds VerifyTimeout(const policy::Policy& policy,
                                        const policy::VerifyCommand& v) {
  if (v.timeout_ms) return std::chrono::milliseconds(*v.timeout_ms);
  const auto& t = policy.limit(policy::Limit::kCommandTimeout);
  if (t.bounded()) return std::chrono::milliseconds(t.value);
  return std::chrono::minutes(10);
}

std::vector<VerifyEntry> PlannedVerification(const policy::Policy& policy) {
  std::vector<VerifyEntry> out;
  for (const auto& v : policy.verify) {
    VerifyEntry e;
    e.command = v.command;
    e.detail = "not run";
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

// One trusted command in a fresh sandbox built from `policy` over `dir`, its output to `log_path`.
VerifyEntry RunTrusted(const policy::Policy& policy, const policy::VerifyCommand& v,
                       const std::string& dir, const std::string& log_path,
                       const ProfileContext& ctx, const VerifyEgress* egress,
                       const std::string& phase) {
  VerifyEntry e;
  e.command = v.command;
  e.log_path = log_path;
  UniqueFd log(
      ::open(e.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  UniqueFd null_in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!log.valid() || !null_in.valid()) {
    e.status = VerifyEntry::Status::kInfrastructure;
    e.detail = "cannot open the log file " + e.log_path;
    return e;
  }
  // A fresh session: the run's binding over `dir` instead of the agent's workspace; filtered
  // egress with the profile's hosts rules, or no network: either way refusals the entry reports
  // when the command fails. Nothing is asked: a person is not watching verification.
  session::SessionOptions so;
  so.policy = std::shared_ptr<const policy::Policy>(std::shared_ptr<void>(), &policy);
  so.argv = {"/bin/sh", "-c", v.command};
  so.profile = ctx;
  so.profile.binding.workspace = dir;
  if (egress != nullptr) {
    so.egress_policy = egress->policy;
    so.resolve = egress->overrides;
    so.hint.profile = egress->profile;
    so.audit_sink = egress->audit;
  }
  so.hint.resolve_flag = true;  // cagent run --resolve
  so.approval = broker::ApprovalMode::kNever;
  so.phase = phase;
  auto prepared = session::Prepare(std::move(so));
  if (!prepared) {
    e.status = VerifyEntry::Status::kInfrastructure;
    e.detail = "could not set up the sandbox: " + prepared.error().Message();
    return e;
  }
  session::SessionPlan& plan = **prepared;
  plan.spec().timeout = VerifyTimeout(policy, v);
  session::Payload payload;
  payload.control = [&](SandboxControl& control) {
    control.stdin_fd = null_in.get();
    control.stdout_fd = log.get();
    control.stderr_fd = log.get();
  };
  auto outcome = session::Run(plan, payload);
  const session::EgressSession* proxy = plan.egress();
  const LaunchSpec& spec = plan.spec();
  if (!outcome) {
    e.status = VerifyEntry::Status::kInfrastructure;
    e.detail = outcome.error().Message();
    return e;
  }
  e.duration = outcome->duration;
  e.downgrades = outcome->downgrades;
  e.exit_code = outcome->exit_code;
  switch (outcome->kind) {
    case SandboxOutcome::Kind::kExited:
      e.status =
          outcome->exit_code == 0 ? VerifyEntry::Status::kPassed : VerifyEntry::Status::kFailed;
      e.detail = "exit status " + std::to_string(outcome->exit_code);
      break;
    case SandboxOutcome::Kind::kSignaled:
      e.status = VerifyEntry::Status::kFailed;
      e.detail = DescribeOutcome(*outcome);
      if (!outcome->limit_hit.empty()) e.detail += " (" + outcome->limit_hit + ")";
      break;
    case SandboxOutcome::Kind::kTimedOut:
      e.status = VerifyEntry::Status::kTimedOut;
      e.detail = "timed out after " + std::to_string(spec.timeout.count() / 1000) + " s";
      break;
    case SandboxOutcome::Kind::kSetupFailed:
    case SandboxOutcome::Kind::kExecFailed:
      e.status = VerifyEntry::Status::kInfrastructure;
      e.detail = DescribeOutcome(*outcome);
      break;
  }
  // A failure after a refusal: most likely its cause, so the summary line says what was refused
  // and how to allow it (the command's own error, e.g. npm's E403, does not).
  if (proxy && e.status != VerifyEntry::Status::kPassed) {
    e.network_refused = proxy->refusals().refused();
    e.network_hints = proxy->refusals().hints();
    e.detail = session::WithRefusals(std::move(e.detail), proxy->refusals());
  }
  return e;
}

std::string LogName(const char* kind, std::size_t i) {
  char name[48];
  std::snprintf(name, sizeof(name), "%02zu-%s.log", i + 1, kind);
  return name;
}

}  // namespace

std::vector<VerifyEntry> RunVerification(const policy::Policy& policy, const VerifyTree& tree,
                                         const std::string& logs_dir, const ProfileContext& ctx,
                                         const std::function<void(const std::string&)>& on_start,
                                         const VerifyEgress* egress) {
  std::vector<VerifyEntry> out;
  for (std::size_t i = 0; i < policy.verify.size(); ++i) {
    const auto& v = policy.verify[i];
    if (on_start) on_start(v.command);
    VerifyEntry e = RunTrusted(policy, v, tree.dir, logs_dir + "/" + LogName("verify", i), ctx,
                               egress, "verify");
    e.tree = tree.tree;
    out.push_back(std::move(e));
  }
  return out;
}

std::shared_ptr<const policy::Policy> SetupPolicy(const policy::Policy& policy) {
  auto out = std::make_shared<policy::Policy>(policy);
  if (policy.setup.egress.value) {
    out->network = {policy::NetworkMode::kLoopback, true, policy.setup.egress.loc};
    out->egress = policy.setup.egress;
    out->hosts = policy.setup.hosts;
  }
  return out;
}

std::vector<VerifyEntry> RunSetup(const std::shared_ptr<const policy::Policy>& setup_policy,
                                  const std::string& dir, const std::string& logs_dir,
                                  const char* log_kind, const ProfileContext& ctx,
                                  const std::function<void(const std::string&)>& on_start,
                                  const VerifyEgress* egress, bool caches_writable) {
  std::vector<VerifyEntry> out;
  const policy::Policy& policy = *setup_policy;
  ProfileContext setup_ctx = ctx;
  setup_ctx.caches_writable = caches_writable;
  bool failed = false;
  for (std::size_t i = 0; i < policy.setup.commands.size(); ++i) {
    const auto& v = policy.setup.commands[i];
    if (failed) {
      VerifyEntry skipped;
      skipped.command = v.command;
      skipped.detail = "not run: an earlier setup command failed";
      out.push_back(std::move(skipped));
      continue;
    }
    if (on_start) on_start(v.command);
    VerifyEgress setup_egress;
    if (egress != nullptr) {
      setup_egress = *egress;
      setup_egress.policy = setup_policy;
    }
    out.push_back(RunTrusted(policy, v, dir, logs_dir + "/" + LogName(log_kind, i), setup_ctx,
                             egress != nullptr ? &setup_egress : nullptr, "setup"));
    failed = out.back().status != VerifyEntry::Status::kPassed;
  }
  return out;
}

}  // namespace cagent::launcher::run
