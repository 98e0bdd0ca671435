#include "launcher/cli/entry.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>

#include "common/exit_codes.h"
#include "launcher/cli/parse_hint.h"
#include "launcher/run/last_resort.h"
#include "launcher/sandbox/process.h"

#ifndef CAGENT_LIBEXEC_DIR
#error "CAGENT_LIBEXEC_DIR must name the directory cagent-full is installed in"
#endif

namespace cagent::launcher::cli {
namespace {

namespace fs = std::filesystem;

std::vector<char*>& CommandLine() {
  static std::vector<char*> argv;
  return argv;
}

std::string SelfPath() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  return self;
}

// Where cagent-full is: next to this program (the build tree), in ../libexec/cagent/ (an
// installed or relocated tree), else the libexec directory the build was configured for. Never a
// search of PATH: the program that gets cagent's command line (and its credentials, for a run) is
// the one installed with it.
std::vector<fs::path> FullProgramCandidates() {
  std::vector<fs::path> out;
  if (const std::string self = SelfPath(); !self.empty()) {
    const fs::path dir = fs::path(self).parent_path();
    out.push_back(dir / "cagent-full");
    out.push_back(dir / ".." / "libexec" / "cagent" / "cagent-full");
  }
  out.push_back(fs::path(CAGENT_LIBEXEC_DIR) / "cagent-full");
  return out;
}

}  // namespace

std::string LauncherPath() {
  std::string self = SelfPath();
  if (self.empty()) return "";
  const fs::path dir = fs::path(self).parent_path();
  if (dir.filename() == "cagent" || fs::exists(dir / "cagent-full")) {
    for (const fs::path& candidate : {dir / "cagent", dir / ".." / ".." / "bin" / "cagent"}) {
      std::error_code ec;
      const fs::path canonical = fs::canonical(candidate, ec);
      if (!ec && canonical != fs::path(self) && ::access(canonical.c_str(), X_OK) == 0) {
        return canonical.string();
      }
    }
  }
  return self;
}

void RememberCommandLine(int argc, char** argv) {
  CommandLine().assign(argv, argv + argc);
  CommandLine().push_back(nullptr);
}

int RunInFullProgram(std::string_view why) {
  std::vector<char*>& argv = CommandLine();
  if (argv.empty()) {
    std::fputs("cagent: internal error: no command line to hand to cagent-full\n", stderr);
    return ToInt(ExitCode::kSetupFailed);
  }
  std::string tried;
  int last_errno = ENOENT;
  for (const fs::path& candidate : FullProgramCandidates()) {
    ::execv(candidate.c_str(), argv.data());
    last_errno = errno;
    tried += (tried.empty() ? "" : ", ") + candidate.string();
    if (errno != ENOENT) break;  // there but not runnable: say so rather than try further
  }
  std::fprintf(stderr,
               "cagent: %.*s is carried out by cagent-full, which could not be started (%s; "
               "tried %s): reinstall cagent, or build the cagent-full target beside cagent\n",
               static_cast<int>(why.size()), why.data(), std::strerror(last_errno), tried.c_str());
  return ToInt(ExitCode::kSetupFailed);
}

std::optional<int> RewriteHelp(int& argc, char**& argv, std::vector<char*>& storage) {
  if (argc < 2 || std::string_view(argv[1]) != "help") return std::nullopt;
  if (argc > 3) {
    std::fputs("cagent: help takes at most one subcommand, as in 'cagent help exec'\n", stderr);
    return ToInt(ExitCode::kUsage);
  }
  static char help_flag[] = "--help";
  storage.push_back(argv[0]);
  if (argc == 3 && std::string_view(argv[2]) != "help") storage.push_back(argv[2]);
  storage.push_back(help_flag);
  storage.push_back(nullptr);
  argc = static_cast<int>(storage.size()) - 1;
  argv = storage.data();
  return std::nullopt;
}

void SetUpProcess(int argc, char** argv) {
  RememberArgvArea(argc, argv);
  // A closed stdout or stderr (`cagent run ... | head`) must not kill cagent mid-run with SIGPIPE:
  // the run would end unrecorded and its sandbox unsupervised. Writes fail with EPIPE instead.
  // Everything cagent starts gets the default back (process.cc before the sandboxed execve,
  // guard/git.cc for git).
  std::signal(SIGPIPE, SIG_IGN);
  // Every message cagent prints goes to stderr as "cagent: ..."; stdout belongs to the command
  // and to --json.
  // Multi-threaded sink: `cagent run` and `cagent agent` log from the broker's thread too.
  auto logger = spdlog::stderr_logger_mt("cagent");
  logger->set_pattern("cagent: %v");
  spdlog::set_default_logger(logger);
}

std::unique_ptr<CLI::App> MakeApp() {
  auto app = std::make_unique<CLI::App>(
      "cagent runs coding agents and arbitrary commands inside a setuid-free Linux sandbox "
      "(namespaces, a workspace-only filesystem view, no network, no capabilities).",
      "cagent");
  app->set_version_flag("--version", "cagent " CAGENT_VERSION);
  app->require_subcommand(1);
  app->footer(
      "Run 'cagent help SUBCOMMAND' (or 'cagent SUBCOMMAND --help') for the options of each "
      "subcommand; 'man cagent' for the full manual.");
  return app;
}

std::optional<int> Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Below the top level, the subcommand reached and the nearest name to a misspelt word.
    const std::string hint = ParseErrorHint(app, e);
    if (hint.empty()) {
      app.exit(e);
    } else {
      std::fprintf(stderr, "cagent: %s\n", hint.c_str());
    }
    return ToInt(ExitCode::kUsage);
  }
  return std::nullopt;
}

int RunGuarded(const std::function<int()>& run) {
  // Last resort: an exception no subcommand caught, or std::terminate (a throw from a thread or a
  // noexcept function), must not end a run without its result.json. The run arms a prebuilt
  // "failed" record (run/last_resort.h); these write it, say so, and exit setup-failed (125) /
  // abort.
  run::InstallLastResortHandler();
  try {
    return run();
  } catch (const std::exception& e) {
    const bool recorded = run::WriteLastResortRecord();
    spdlog::error("internal error: {}{}", e.what(),
                  recorded ? "; the run is recorded as failed in its result.json" : "");
    return ToInt(ExitCode::kSetupFailed);
  }
}

}  // namespace cagent::launcher::cli
