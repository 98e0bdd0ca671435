#include "launcher/profile/workspace_guard.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>

#include "common/terminal_text.h"
#include "launcher/profile/spec.h"
#include "policy/match/host_secrets.h"

namespace cagent::launcher {
namespace {

// Refused as themselves. /root is added by HostGuardContext when it is not the caller's home.
constexpr std::array<std::string_view, 19> kSystemDirs = {
    "/",    "/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32",  "/media",     "/mnt",
    "/opt", "/run", "/sbin", "/srv", "/tmp", "/usr",   "/var",   "/var/tmp", "/usr/local",
};
// Refused with everything below them: kernel interfaces, never a project.
constexpr std::array<std::string_view, 3> kSystemTrees = {"/dev", "/proc", "/sys"};

bool AtOrUnder(std::string_view path, std::string_view dir) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  return path.starts_with(dir) && (path.size() == dir.size() || path[dir.size()] == '/');
}

std::string Canonical(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  return real ? std::string(real.get()) : std::string();
}

void AddWithCanonical(std::vector<std::string>& out, const std::string& path) {
  out.push_back(path);
  const std::string real = Canonical(path);
  if (!real.empty() && real != path) out.push_back(real);
}

std::string Shown(std::string_view path) { return TerminalSafe(path, TerminalLines::kOne); }

}  // namespace

const char* const kAllowHomeHelp =
    "Accept the home directory, or a directory that contains it (/home), as the workspace; only "
    "together with --workspace naming it. The host secret set (~/.ssh, ~/.gnupg, ~/.aws, "
    "~/.netrc, ~/.npmrc, ~/.config/gh, ...) stays hidden inside. System directories (/usr, /etc, "
    "/tmp, ...) are refused whatever the flags.";

WorkspaceGuardContext HostGuardContext() {
  WorkspaceGuardContext ctx;
  ctx.home = Canonical(CallerHome());
  for (std::string_view d : kSystemDirs) AddWithCanonical(ctx.system_dirs, std::string(d));
  if (ctx.home != "/root") AddWithCanonical(ctx.system_dirs, "/root");
  for (std::string_view d : kSystemTrees) AddWithCanonical(ctx.system_trees, std::string(d));
  // A system directory that resolves to the caller's home (a home at /opt?) is the home's class.
  std::erase(ctx.system_dirs, ctx.home);
  return ctx;
}

WorkspaceClass ClassifyWorkspace(std::string_view ws, const WorkspaceGuardContext& ctx) {
  for (const auto& t : ctx.system_trees) {
    if (AtOrUnder(ws, t)) return WorkspaceClass::kSystem;
  }
  if (ws == "/") return WorkspaceClass::kSystem;
  const bool has_home = !ctx.home.empty() && ctx.home != "/";
  if (has_home && ws == ctx.home) return WorkspaceClass::kHome;
  // Before the ancestors: a home below a system directory (HOME=/tmp/x, /var/lib/svc) does not
  // make the system directory a home.
  if (std::find(ctx.system_dirs.begin(), ctx.system_dirs.end(), ws) != ctx.system_dirs.end()) {
    return WorkspaceClass::kSystem;
  }
  if (has_home) {
    if (AtOrUnder(ctx.home, ws)) return WorkspaceClass::kHomeAncestor;
    if (AtOrUnder(ws, ctx.home) && policy::IsHostSecretPath(ws.substr(ctx.home.size() + 1))) {
      return WorkspaceClass::kHostSecret;
    }
  }
  if (ws == "/home") return WorkspaceClass::kHomeAncestor;
  return WorkspaceClass::kOrdinary;
}

Status CheckWorkspace(const std::string& ws, const WorkspaceChoice& choice,
                      const WorkspaceGuardContext& ctx) {
  const std::string& flag = choice.flag;
  if (choice.allow_home && !choice.named) {
    return PlainError("--allow-home needs " + flag + " naming the directory it allows (e.g. " +
                      flag + " " + Shown(ctx.home.empty() ? ws : ctx.home) + " --allow-home)")
        .WithCode(Error::Code::kInvalidInput);
  }
  const std::string where = choice.named
                                ? "the workspace " + Shown(ws)
                                : "the workspace (the current directory, " + Shown(ws) + ")";
  const std::string fix = choice.named
                              ? "pass " + flag + " with a project directory"
                              : "run cagent from a project directory, or pass " + flag + " DIR";
  switch (ClassifyWorkspace(ws, ctx)) {
    case WorkspaceClass::kOrdinary:
      return Ok{};
    case WorkspaceClass::kSystem:
      return PlainError(where +
                            " is a system directory: the sandboxed command would get it "
                            "read-write; cagent never uses one as a workspace",
                        fix + " (a system directory can be shown read-only with --ro)")
          .WithCode(Error::Code::kInvalidInput);
    case WorkspaceClass::kHostSecret:
      return PlainError(where +
                            " is inside the host secret set (~/.ssh, ~/.gnupg, ~/.aws, ...) "
                            "that cagent hides in every sandbox; it cannot be a workspace",
                        fix)
          .WithCode(Error::Code::kInvalidInput);
    case WorkspaceClass::kHome:
    case WorkspaceClass::kHomeAncestor:
      break;
  }
  if (choice.named && choice.allow_home) return Ok{};
  const bool is_home = ClassifyWorkspace(ws, ctx) == WorkspaceClass::kHome;
  return PlainError(where + (is_home ? " is your home directory" : " contains home directories") +
                        ": the sandboxed command would get all of it read-write",
                    fix + "; to use it anyway, name it: " + flag + " " + Shown(ws) +
                        " --allow-home (the host secret set, ~/.ssh and the rest, stays hidden)")
      .WithCode(Error::Code::kInvalidInput);
}

Status CheckWorkspace(const std::string& workspace, const WorkspaceChoice& choice) {
  return CheckWorkspace(workspace, choice, HostGuardContext());
}

}  // namespace cagent::launcher
