#include "launcher/cli/profile_command.h"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "common/json_text.h"
#include "launcher/profile/init.h"
#include "launcher/profile/repo_profiles.h"
#include "policy/language/loader.h"

namespace cagent::launcher::cli {
namespace {

std::string HomeDir() {
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') return h;
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) {
    return pw->pw_dir;
  }
  return "";
}

int RunInit(const ProfileOptions& o) {
  InitOptions init;
  init.dir = o.dir;
  init.name = o.name;
  init.force = o.force;
  init.in_repository = o.in_repository;
  init.home = HomeDir();
  init.config_dir = policy::ConfigDir(init.home);
  const char* path = std::getenv("PATH");
  init.path_env = path != nullptr ? path : "";
  // As `cagent policy`, `cagent run` ... will resolve the profile when run from DIR: DIR/.cagent
  // first, then DIR's repository's own directory CONFIG/repos/KEY
  // (launcher/profile/repo_profiles.h).
  init.search = ProfileSearchPath(init.home, CAGENT_PROFILE_DIR, o.dir);
  init.search.dirs.front() = o.dir + "/.cagent";

  auto plan = PlanProfile(init);
  if (!plan) {
    const Error& e = plan.error();
    const ExitCode status = ExitCodeFor(e, ExitCode::kFailed);
    if (status == ExitCode::kFailed) {
      // The generated text does not compile: the detail is the rendered diagnostics.
      std::cerr << e.detail;
      spdlog::error("{}", e.op);
    } else {
      spdlog::error("{}{}", e.op, e.detail.empty() ? "" : "; " + e.detail);
    }
    return ToInt(status);
  }
  if (o.dry_run && !o.json) {
    std::cout << plan->text;
    return ToInt(ExitCode::kOk);
  }
  if (!o.dry_run) {
    if (auto written = WriteProfile(*plan, o.force); !written) {
      const Error& e = written.error();
      spdlog::error("cannot write the profile: {}", e.Message());
      return ToInt(ExitCode::kFailed);
    }
  }
  if (o.json) {
    nlohmann::json exposed = nlohmann::json::array();
    for (const Toolchain& t : plan->exposed) exposed.push_back({{"path", t.path}, {"why", t.why}});
    nlohmann::json out = {{"path", plan->path},
                          {"name", plan->name},
                          {"in_repository", plan->in_repository},
                          {"repository", plan->repository},
                          {"repository_key", plan->repository_key},
                          {"written", !o.dry_run},
                          {"extends", plan->parent},
                          {"found", plan->found},
                          {"verify", plan->verify},
                          {"setup", plan->setup},
                          {"setup_hosts", plan->setup_hosts},
                          {"caches", plan->caches},
                          {"outputs", plan->outputs},
                          {"notes", plan->notes},
                          {"read_only", exposed},
                          {"already_shown", plan->already},
                          {"text", plan->text}};
    std::cout << JsonText(out, 2) << std::endl;
    return ToInt(ExitCode::kOk);
  }
  std::cout << "wrote " << plan->path << "\n";
  std::cout << "  name:      " << plan->name
            << (plan->in_repository ? " (in the repository: commit it to share it)"
                                    : " (outside the repository: nothing to commit)")
            << "\n";
  std::cout << "  extends:   " << plan->parent << "\n";
  std::cout << "  found:     ";
  for (std::size_t i = 0; i < plan->found.size(); ++i) {
    std::cout << (i ? ", " : "") << plan->found[i];
  }
  std::cout << "\n  verify:    "
            << (plan->verify.empty() ? "(none recognised; see the comment)" : plan->verify) << "\n";
  for (const auto& c : plan->setup) std::cout << "  setup:     " << c << "\n";
  if (!plan->caches.empty()) {
    std::cout << "  caches:   ";
    for (const auto& c : plan->caches) std::cout << " " << c;
    std::cout << "\n";
  }
  if (!plan->outputs.empty()) {
    std::cout << "  outputs:  ";
    for (const auto& c : plan->outputs) std::cout << " " << c;
    std::cout << "\n";
  }
  if (!plan->exposed.empty()) {
    std::cout << "  read-only:";
    for (const auto& t : plan->exposed) std::cout << " " << t.path;
    std::cout << " (toolchains the parent does not show)\n";
  }
  std::cout << "Next: review it, then `cagent policy check " << plan->name
            << "` and `cagent policy audit " << plan->name
            << "` from the repository, and `cagent run "
            << "--profile " << plan->name << " TASK.md`.\n";
  return ToInt(ExitCode::kOk);
}

}  // namespace

CLI::App* AddProfileCommand(CLI::App& app, ProfileOptions& o) {
  CLI::App* profile = app.add_subcommand("profile", "Create profiles for repositories.");
  profile->require_subcommand(1);
  o.init_cmd = profile->add_subcommand(
      "init",
      "Inspect a repository (package.json, pyproject.toml, requirements*.txt, setup.py, "
      "Cargo.toml, go.mod, CMakeLists.txt, Makefile, pom.xml, build.gradle, documentation) and "
      "this machine's toolchains (~/.rustup, ~/.cargo, ~/.pyenv, ~/.nvm, ~/go, ... and node, "
      "python3, cargo, go on PATH), and write a commented starting profile for it to "
      "CONFIG/repos/KEY/NAME.cagent (CONFIG is ~/.config/cagent, or $XDG_CONFIG_HOME/cagent or "
      "$CAGENT_CONFIG_DIR; KEY names the repository by its path on this machine), where "
      "--profile NAME finds it from the repository without a commit and where it never enters a "
      "run's workspace or patch (--in-repo writes DIR/.cagent/NAME.cagent instead, to commit). "
      "The profile extends the closest built-in (backend, frontend or docs) and, per ecosystem "
      "(Python, Node, Go, Rust, C/C++ with Make, CMake or Meson, Java with Maven or Gradle, "
      "shell), has a setup that installs the dependencies from the package registries, the "
      "caches of the package manager and the build, the outputs the build leaves in the tree "
      "(left out of the agent's patch), and the tests as its verify command; it exposes "
      "read-only the toolchain directories the parent does not already show. The profile is "
      "compiled before it is written; one that would fail `cagent policy check` is never "
      "written. Only file names and a few build files are read; nothing in the repository is "
      "run.");
  o.init_cmd->add_option("dir", o.dir, "The repository's root directory (default: .).");
  o.init_cmd->add_option("-n,--name", o.name,
                         "The profile's name, used with --profile NAME from the repository "
                         "(default: the repository directory's name, sanitised). Built-in names "
                         "are refused: the repository's profile would shadow the built-in one.");
  o.init_cmd->add_flag("--in-repo", o.in_repository,
                       "Write DIR/.cagent/NAME.cagent, to commit with the repository, instead of "
                       "CONFIG/repos/KEY/NAME.cagent.");
  o.init_cmd->add_flag("-f,--force", o.force, "Replace an existing profile file.");
  o.init_cmd->add_flag("--dry-run", o.dry_run, "Print the profile instead of writing it.");
  o.init_cmd->add_flag("--json", o.json,
                       "Print what was found and written as one JSON object on stdout: path, "
                       "name, in_repository, repository, repository_key, written (false with "
                       "--dry-run), extends, found, verify, setup, setup_hosts, caches, outputs, "
                       "notes, read_only (toolchains added), already_shown and text (the "
                       "profile).");
  o.init_cmd->footer(
      "EXIT STATUS\n"
      "  0  written (or printed with --dry-run)\n"
      "  1  refused: the file exists (use --force), or the generated profile does not compile "
      "(its diagnostics are printed; e.g. a broken copy of the parent on the search path)\n"
      "  2  usage error: DIR is not a directory, NAME is invalid or a built-in name, or there is "
      "no configuration directory (no HOME) without --in-repo\n\n"
      "EXAMPLES\n"
      "  cagent profile init\n"
      "  cagent profile init ~/src/app --name app --force\n"
      "  cagent profile init --in-repo");
  return profile;
}

int RunProfileCommand(const ProfileOptions& o) {
  if (o.init_cmd != nullptr && o.init_cmd->parsed()) return RunInit(o);
  spdlog::error("cagent profile: give a subcommand (init)");
  return ToInt(ExitCode::kUsage);
}

}  // namespace cagent::launcher::cli
