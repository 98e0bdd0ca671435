#include "launcher/broker/denial.h"

#include <algorithm>
#include <array>
#include <set>

#include "policy/match/shell.h"

namespace cagent::launcher::broker {
namespace {

using policy::Tool;
using policy::Verdict;

constexpr std::array<std::string_view, 12> kNetworkTools = {"curl",  "wget",   "ssh",  "scp",
                                                            "sftp",  "nc",     "ncat", "netcat",
                                                            "socat", "telnet", "ftp",  "rsync"};

// Subcommands that fetch from or publish to other machines.
bool IsNetworkCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return false;
  std::string_view name = argv[0];
  if (auto slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (std::find(kNetworkTools.begin(), kNetworkTools.end(), name) != kNetworkTools.end()) {
    return true;
  }
  if (argv.size() < 2) return false;
  const std::string& sub = argv[1];
  if (name == "git") {
    return sub == "push" || sub == "fetch" || sub == "pull" || sub == "clone" || sub == "remote" ||
           sub == "submodule";
  }
  if (name == "pip" || name == "pip3" || name == "npm" || name == "pnpm" || name == "yarn" ||
      name == "cargo" || name == "go" || name == "gem" || name == "twine") {
    return sub == "install" || sub == "add" || sub == "get" || sub == "ci" || sub == "update" ||
           sub == "publish" || sub == "upload" || sub == "download" || sub == "fetch";
  }
  if ((name == "python" || name == "python3") && argv.size() >= 4 && argv[1] == "-m" &&
      argv[2] == "pip") {
    return true;
  }
  return false;
}

std::string_view BaseName(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (auto slash = path.rfind('/'); slash != std::string_view::npos) path.remove_prefix(slash + 1);
  return path;
}

std::string Quote(std::string_view s) {
  // Short enough to read in a sentence; the full action is in the audit log.
  constexpr std::size_t kMax = 200;
  std::string out = "`";
  if (s.size() > kMax) {
    out.append(s.substr(0, kMax));
    out.append("...");
  } else {
    out.append(s);
  }
  out.push_back('`');
  return out;
}

std::string WhatWasRefused(const MappedTool& call) {
  switch (call.request.tool) {
    case Tool::kReadFile:
      return "reading " + call.request.path;
    case Tool::kWriteFile:
      return "writing " + call.request.path;
    case Tool::kEditFile:
      return "editing " + call.request.path;
    case Tool::kListDir:
      return "listing " + call.request.path;
    case Tool::kGlob:
    case Tool::kGrep:
      return std::string(policy::ToolName(call.request.tool)) + " in " + call.request.path;
    case Tool::kRunCommand:
      return "running " + Quote(call.request.script);
    case Tool::kFinish:
    case Tool::kCount:
      break;
  }
  return std::string(policy::ToolName(call.request.tool));
}

// Collects alternatives, offering each only when the engine allows it outright.
class Offer {
 public:
  explicit Offer(const policy::Engine& engine) : engine_(engine) {}

  bool Try(Tool tool, const std::string& path, const std::string& command, std::string text) {
    const std::string key = std::string(policy::ToolName(tool)) + '\0' + path + '\0' + command;
    if (!seen_.insert(key).second) return false;
    policy::Request request =
        policy::Request::ToolCall(tool, tool == Tool::kRunCommand ? command : path);
    if (engine_.Decide(request).verdict != Verdict::kAllow) return false;
    out_.push_back(Suggestion{std::move(request), std::move(text)});
    return true;
  }
  std::vector<Suggestion> Take() { return std::move(out_); }

 private:
  const policy::Engine& engine_;
  std::set<std::string> seen_;
  std::vector<Suggestion> out_;
};

// Words of argv that are not options.
std::vector<std::string> Operands(const std::vector<std::string>& argv, std::size_t from) {
  std::vector<std::string> out;
  for (std::size_t i = from; i < argv.size(); ++i) {
    if (!argv[i].empty() && argv[i][0] != '-') out.push_back(argv[i]);
  }
  return out;
}

// A refused shell command: the tool that does the same job, where the policy allows it there.
void SuggestToolsForCommand(Offer& offer, const policy::SimpleCommand& cmd) {
  std::string_view name = BaseName(cmd.argv[0]);
  if (name == "cat" || name == "head" || name == "tail" || name == "less" || name == "more" ||
      name == "nl") {
    for (const std::string& file : Operands(cmd.argv, 1)) {
      offer.Try(Tool::kReadFile, file, "",
                "use the read_file tool on " + file + " instead of " + std::string(name));
    }
  } else if (name == "ls" || name == "tree") {
    auto dirs = Operands(cmd.argv, 1);
    if (dirs.empty()) dirs.emplace_back(".");
    for (const std::string& dir : dirs) {
      offer.Try(Tool::kListDir, dir, "",
                "use the list_dir tool on " + dir + " instead of " + std::string(name));
    }
  } else if (name == "grep" || name == "rg" || name == "ag") {
    auto operands = Operands(cmd.argv, 1);
    std::string dir = operands.size() >= 2 ? operands[1] : std::string(".");
    offer.Try(Tool::kGrep, dir, "",
              "use the grep tool (path " + dir + ") instead of " + std::string(name));
  } else if (name == "find") {
    auto operands = Operands(cmd.argv, 1);
    std::string dir = operands.empty() ? std::string(".") : operands[0];
    offer.Try(Tool::kGlob, dir, "", "use the glob tool (path " + dir + ") instead of find");
  }
}

// A refused write: the same file name in another directory the policy lets this tool write.
void SuggestWritableElsewhere(Offer& offer, const MappedTool& call) {
  const std::string name(BaseName(call.request.path));
  if (name.empty() || name == "." || name == "..") return;
  static constexpr std::array<std::string_view, 7> kDirs = {"src",   "lib",  "app", "docs",
                                                            "tests", "test", ""};
  for (std::string_view dir : kDirs) {
    std::string candidate = dir.empty() ? name : std::string(dir) + "/" + name;
    if (candidate == call.request.path) continue;
    std::string where =
        dir.empty() ? "at the top of the workspace" : "under " + std::string(dir) + "/";
    if (offer.Try(call.request.tool, candidate, "",
                  "if the change can live elsewhere, " +
                      std::string(policy::ToolName(call.request.tool)) + " is allowed " + where +
                      " (e.g. " + candidate + ")")) {
      return;  // one place is enough
    }
  }
}

}  // namespace

Denial ExplainDenial(const policy::Engine& engine, const MappedTool& call,
                     const policy::Decision& decision, std::string_view location, DenialCause cause,
                     std::string_view why) {
  const policy::Policy& p = engine.policy();
  std::string msg = "Refused: " + WhatWasRefused(call) + ". ";
  std::string rule = decision.rule.empty() ? std::string("default") : decision.rule;
  std::string where = location.empty() ? std::string() : " (" + std::string(location) + ")";
  switch (cause) {
    case DenialCause::kPolicy: {
      std::string reason = decision.reason;
      while (!reason.empty() && (reason.back() == '.' || reason.back() == ' ')) reason.pop_back();
      msg += "Rule: " + rule + where + (reason.empty() ? "." : ": " + reason + ".");
      break;
    }
    case DenialCause::kApprovalDeclined:
      msg += "The rule " + rule + where +
             " requires a person's approval, and the operator declined it.";
      break;
    case DenialCause::kHeadless:
      msg += "The rule " + rule + where +
             " requires a person's approval, and nobody can approve it in this run (" +
             (why.empty() ? std::string("approvals are off or the run is unattended")
                          : std::string(why)) +
             "), so it is denied.";
      break;
  }

  Offer offer(engine);
  std::vector<std::string> notes;
  bool network = false;
  if (call.request.tool == Tool::kRunCommand) {
    const policy::ShellParse parsed = policy::ParseShell(call.request.script);
    for (const policy::SimpleCommand& cmd : parsed.commands) {
      if (IsNetworkCommand(cmd.argv)) network = true;
      SuggestToolsForCommand(offer, cmd);
    }
  } else if (call.request.tool == Tool::kWriteFile || call.request.tool == Tool::kEditFile) {
    if (cause == DenialCause::kPolicy) SuggestWritableElsewhere(offer, call);
  } else if (call.request.tool == Tool::kReadFile || call.request.tool == Tool::kListDir ||
             call.request.tool == Tool::kGlob || call.request.tool == Tool::kGrep) {
    notes.push_back(
        "This path is off-limits in this run: do not try to reach it another way (another tool "
        "or a shell command is refused as well). Continue without it, or say in your final "
        "answer what you needed from it.");
  }
  const std::vector<std::string> enabled = EnabledTools(p);
  if (std::find(enabled.begin(), enabled.end(), policy::ToolName(call.request.tool)) ==
      enabled.end()) {
    std::string list;
    for (const std::string& t : enabled) list += (list.empty() ? "" : ", ") + t;
    notes.push_back(std::string(policy::ToolName(call.request.tool)) +
                    " is not enabled in this run; the enabled tools are: " +
                    (list.empty() ? std::string("(none)") : list) + ".");
  }
  if (network) {
    notes.push_back(p.network.value == policy::NetworkMode::kNone
                        ? "The sandbox has no network access at all: nothing can be downloaded, "
                          "installed from a registry or sent to another machine. Work with what "
                          "is already in the workspace and on the system."
                        : "The sandbox reaches only the loopback interface (servers started "
                          "inside it): nothing can be downloaded, installed from a registry or "
                          "sent to another machine. Work with what is already present.");
  }

  Denial out;
  out.suggestions = offer.Take();
  if (!out.suggestions.empty()) {
    msg += " Instead: ";
    for (std::size_t i = 0; i < out.suggestions.size(); ++i) {
      if (i > 0) msg += "; ";
      msg += out.suggestions[i].text;
    }
    msg += ".";
  }
  for (const std::string& note : notes) msg += " " + note;
  if (out.suggestions.empty() && notes.empty()) {
    msg += cause == DenialCause::kPolicy
               ? " Do not retry the same call; choose another way to reach the goal within the "
                 "policy, or explain in your final answer what is needed."
               : " Do not retry the same call; continue without it, or explain in your final "
                 "answer why it is needed.";
  }
  out.message = std::move(msg);
  return out;
}

std::string UnknownToolMessage(std::string_view tool, const std::vector<std::string>& enabled) {
  std::string name(tool.substr(0, 64));
  std::string msg =
      "Refused: there is no tool named \"" + name + "\". The tools this run enables are: ";
  for (std::size_t i = 0; i < enabled.size(); ++i) {
    if (i > 0) msg += ", ";
    msg += enabled[i];
  }
  if (enabled.empty()) msg += "(none)";
  msg += ". Call one of those.";
  return msg;
}

std::string ArgumentMessage(const MappedTool& call) {
  return "Refused: " + call.argument_error + ". Call " +
         std::string(policy::ToolName(call.request.tool)) +
         " again with the arguments its schema describes.";
}

}  // namespace cagent::launcher::broker
