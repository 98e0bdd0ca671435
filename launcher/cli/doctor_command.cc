#include "launcher/cli/doctor_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/exit_codes.h"
#include "common/json_text.h"
#include "common/terminal_text.h"
#include "launcher/cli/downgrade_notes.h"
#include "launcher/profile/spec.h"
#include "launcher/sandbox/doctor.h"

namespace cagent::launcher::cli {

CLI::App* AddDoctorCommand(CLI::App& app, DoctorOptions& o) {
  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "Report what this kernel and machine support (user namespaces, pidfd and the new mount API, "
      "Landlock ABI, seccomp, cgroup v2 controllers and delegation, overlayfs, SELinux, AppArmor's "
      "user-namespace restriction) and build "
      "a trial sandbox. Exits 0 when a sandbox can be built, 1 when it cannot.");
  doctor->add_flag("--json", o.json, "Print the report as one JSON object.");
  doctor->add_option(
      "--acknowledge", o.acknowledge,
      "A downgrade this machine cannot fix (its layer, as the warning names it: cgroup): record "
      "that you know, so exec, run and agent stop warning about it on the terminal. It is still "
      "recorded in --json output, result.json and session records. Repeatable; kept in "
      "~/.config/cagent/acknowledged-downgrades.");
  return doctor;
}

int RunDoctorCommand(const DoctorOptions& o) {
  const std::string home = CallerHome();
  if (!o.acknowledge.empty()) {
    if (auto s = AcknowledgeDowngrades(home, o.acknowledge); !s) {
      std::fprintf(stderr, "cagent doctor: %s\n", s.error().Message().c_str());
      return ToInt(ExitCodeFor(s.error(), ExitCode::kFailed));
    }
  }
  const std::set<std::string> acknowledged = AcknowledgedDowngrades(home);
  const DoctorReport r = RunDoctor();
  if (o.json) {
    nlohmann::json j;
    j["kernel"] = r.kernel;
    j["probes"] = nlohmann::json::array();
    for (const auto& p : r.probes) {
      j["probes"].push_back({{"name", p.name}, {"status", p.status}, {"detail", p.detail}});
    }
    j["sandbox"] = {{"ok", r.sandbox_ok}, {"detail", r.sandbox_detail}, {"layers", r.layers}};
    j["acknowledged_downgrades"] = acknowledged;
    std::cout << JsonText(j, 2) << std::endl;
  } else {
    std::printf("cagent doctor: %s\n\n", r.kernel.c_str());
    for (const auto& p : r.probes) {
      std::printf("  %-22s %-9s %s\n", p.name.c_str(), p.status.c_str(), p.detail.c_str());
    }
    std::printf("\n  %-22s %-9s %s\n", "trial sandbox", r.sandbox_ok ? "ok" : "FAILED",
                r.sandbox_detail.c_str());
    if (!r.layers.empty()) std::printf("\nA sandbox started now gets:\n");
    for (const auto& l : r.layers) std::printf("  - %s\n", l.c_str());
    if (!acknowledged.empty()) {
      std::printf("\nDowngrades acknowledged (not warned about; %s):\n",
                  AcknowledgedDowngradesFile(home).c_str());
      for (const auto& a : acknowledged) {
        std::printf("  - %s\n", TerminalSafe(a, TerminalLines::kOne).c_str());
      }
    }
  }
  return ToInt(r.sandbox_ok ? ExitCode::kOk : ExitCode::kFailed);
}

}  // namespace cagent::launcher::cli
