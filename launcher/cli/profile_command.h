// `cagent profile init`: write a starting profile for a repository (launcher/profile/init.h).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct ProfileOptions {
  std::string dir = ".";
  std::string name;            // "" = the repository's name (RepositoryProfileName)
  bool in_repository = false;  // --in-repo: DIR/.cagent/NAME.cagent instead of CONFIG/repos/KEY/
  bool force = false;
  bool dry_run = false;
  bool json = false;

  CLI::App* init_cmd = nullptr;
};

// Adds `profile` and its `init` subcommand to `app`; `options` must outlive parsing.
CLI::App* AddProfileCommand(CLI::App& app, ProfileOptions& options);

// Runs the parsed `cagent profile` subcommand: 0 written (or printed with --dry-run), 1 refused
// (the file exists, or the generated profile does not compile), 2 usage error.
int RunProfileCommand(const ProfileOptions& options);

}  // namespace cagent::launcher::cli
