// `cagent doctor`: what this kernel and machine support, and what a sandbox started now gets.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct DoctorOptions {
  bool json = false;
  // --acknowledge LAYER: stop warning about that downgrade (cli/downgrade_notes.h).
  std::vector<std::string> acknowledge;
};

CLI::App* AddDoctorCommand(CLI::App& app, DoctorOptions& options);

// Prints the report; returns 0 when a sandbox can be built, 1 otherwise.
int RunDoctorCommand(const DoctorOptions& options);

}  // namespace cagent::launcher::cli
