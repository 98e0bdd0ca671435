// cagent-agent: the LLM agent that runs inside the sandbox. It talks only to the broker, over the
// socket whose fd number is in CAGENT_BROKER_FD; it holds no credential and has no network.
//
// Exit statuses (common/exit_codes.h): 0 finished (the model signalled completion); 3 the session
// did not complete (ended by the broker or a budget, a model/provider error); 2 usage or protocol
// failure. One line on stderr says why.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "agent/broker_client.h"
#include "agent/loop.h"
#include "agent/serve_loop.h"
#include "agent/toolbox.h"
#include "common/exit_codes.h"
#include "common/protocol.h"
#include "common/unique_fd.h"
#include "policy/language/engine.h"
#include "policy/language/loader.h"

#ifndef CAGENT_VERSION
#define CAGENT_VERSION "0.0.0"
#endif

// The ASan build runs this binary inside the sandbox, where LeakSanitizer cannot ptrace.
// NOLINTNEXTLINE(bugprone-reserved-identifier,readability-identifier-naming): ASan's hook name
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

namespace cagent::agent {
namespace {

constexpr const char* kUsage =
    "usage: cagent-agent [--help] [--version]\n"
    "\n"
    "The cagent agent: runs the model loop inside the sandbox. It is started by `cagent run` with\n"
    "the broker's socket inherited; the fd number is in CAGENT_BROKER_FD. It is not meant to be\n"
    "run by hand.\n"
    "\n"
    "exit status: 0 finished; 3 the session did not complete (ended by the broker or a budget,\n"
    "             a model/provider error); 2 usage or protocol failure\n";

int Fail(ExitCode status, const std::string& why) {
  std::fprintf(stderr, "cagent-agent: %s\n", why.c_str());
  return ToInt(status);
}

// The broker socket from the environment: a number naming an open socket. Marked close-on-exec so
// the commands the agent runs do not inherit it.
Result<UniqueFd> BrokerSocket() {
  const char* text = std::getenv(protocol::kBrokerFdEnv);
  if (text == nullptr || *text == '\0') {
    return PlainError(protocol::kBrokerFdEnv,
                      "is not set; cagent-agent is started by `cagent run`, which passes the "
                      "broker's socket");
  }
  const std::string_view value(text);
  int fd = -1;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), fd);
  if (ec != std::errc() || end != value.data() + value.size() || fd < 3) {
    return PlainError(
        protocol::kBrokerFdEnv,
        "must be a file descriptor number (3 or above), got \"" + std::string(value) + "\"");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return ErrnoError(std::string(protocol::kBrokerFdEnv) + "=" + std::string(value) +
                      ": fd is not open");
  }
  if (!S_ISSOCK(st.st_mode)) {
    return PlainError(std::string(protocol::kBrokerFdEnv) + "=" + std::string(value),
                      "fd is not a socket");
  }
  UniqueFd owned(fd);
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0 || ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
    return ErrnoError("fcntl(FD_CLOEXEC) on the broker socket");
  }
  // Blocking I/O: the client waits for each reply.
  const int status = ::fcntl(fd, F_GETFL);
  if (status >= 0 && (status & O_NONBLOCK) != 0) (void)::fcntl(fd, F_SETFL, status & ~O_NONBLOCK);
  return owned;
}

// The path filter the tools apply (the same rules the broker decides with; the broker stays the
// authority). Only deny is mapped: ask is the broker's to resolve.
Result<PathFilter> MakePathFilter(const protocol::Welcome& welcome) {
  if (welcome.policy_source.empty()) return PathFilter{};
  policy::SearchPath search;
  search.builtins = true;
  policy::Compiled compiled =
      policy::CompileText("broker-policy.cagent", welcome.policy_source, search);
  if (!compiled.ok()) {
    std::string first = "unknown error";
    for (const policy::Diagnostic& d : compiled.diags.Sorted()) {
      if (d.severity == policy::Severity::kError) {
        first = d.message;
        break;
      }
    }
    return PlainError("the broker's policy", "does not compile: " + first);
  }
  // The broker's binding (policy/language/binding.h): "~" is the caller's home, as in the broker's
  // engine, not this process's HOME (the sandbox's own tmpfs).
  policy::Binding bindings;
  bindings.workspace = welcome.workspace;
  bindings.home = welcome.home;
  auto engine = std::make_shared<policy::Engine>(*compiled.policy, bindings);
  std::shared_ptr<const policy::Policy> keep = compiled.policy;  // the engine borrows it
  return PathFilter(
      [engine, keep](std::string_view path, PathAccess access) -> std::optional<PathDenial> {
        const policy::Decision d = engine->Path(
            access == PathAccess::kWrite ? policy::Access::kWrite : policy::Access::kRead, path);
        if (d.verdict != policy::Verdict::kDeny) return std::nullopt;
        return PathDenial{d.rule, d.reason};
      });
}

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return ToInt(ExitCode::kOk);
    }
    if (arg == "--version") {
      std::printf("cagent-agent %s (protocol %d)\n", CAGENT_VERSION, protocol::kVersion);
      return ToInt(ExitCode::kOk);
    }
    return Fail(ExitCode::kUsage, "unknown argument \"" + std::string(arg) + "\" (see --help)");
  }

  auto socket = BrokerSocket();
  if (!socket.ok()) return Fail(ExitCode::kUsage, socket.error().Message());
  BrokerClient client(std::move(socket.value()));

  auto welcome = client.Hello(std::string("cagent-agent/") + CAGENT_VERSION);
  if (!welcome.ok()) {
    const bool ended = welcome.failure().kind == BrokerFailure::Kind::kShutdown;
    return Fail(ended ? ExitCode::kRunFailed : ExitCode::kUsage, welcome.failure().Describe());
  }
  const protocol::Welcome& w = welcome.value();

  // Setup failures are reported to the broker too (finish "error"), so the run record says why.
  auto setup_failed = [&](const std::string& why) {
    (void)client.Finish("error", why);
    return Fail(ExitCode::kUsage, why);
  };
  if (w.workspace.empty() || w.workspace[0] != '/') {
    return setup_failed("the broker's workspace path \"" + w.workspace + "\" is not absolute");
  }
  auto filter = MakePathFilter(w);
  if (!filter.ok()) return setup_failed(filter.error().Message());

  ToolLimits limits;
  if (w.command_timeout_ms > 0) {
    limits.command_timeout = std::chrono::milliseconds(w.command_timeout_ms);
  }
  if (w.command_output_bytes > 0) limits.command_output_bytes = w.command_output_bytes;
  auto toolbox = Toolbox::Open(w.workspace, limits, std::move(filter.value()));
  if (!toolbox.ok()) return setup_failed("opening the workspace: " + toolbox.error().Message());

  const LoopResult result = w.mode == "serve" ? RunServeLoop(client, toolbox.value(), w)
                                              : RunLoop(client, toolbox.value(), w);
  switch (result.status) {
    case LoopResult::Status::kDone:
      std::fprintf(stderr, "cagent-agent: finished after %llu turns\n",
                   static_cast<unsigned long long>(result.turns));
      break;
    default:
      std::fprintf(stderr, "cagent-agent: %s\n", result.message.c_str());
      break;
  }
  return result.ExitCode();
}

}  // namespace
}  // namespace cagent::agent

int main(int argc, char** argv) { return cagent::agent::Main(argc, argv); }
