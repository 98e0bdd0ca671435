#include "launcher/cli/downgrade_notes.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/terminal_text.h"
#include "common/text.h"
#include "launcher/session/state_dir.h"
#include "policy/language/loader.h"

namespace cagent::launcher::cli {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// A layer as it may be written in the file: one line of printable text, not too long.
bool PlainLayer(std::string_view layer) {
  constexpr std::size_t kMax = 120;
  if (layer.empty() || layer.size() > kMax || layer.front() == '#') return false;
  return std::all_of(layer.begin(), layer.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7f;
  });
}

}  // namespace

std::string DowngradeLayer(std::string_view downgrade) {
  const std::size_t colon = downgrade.find(':');
  return std::string(
      Trim(colon == std::string_view::npos ? downgrade : downgrade.substr(0, colon)));
}

std::string AcknowledgedDowngradesFile(const std::string& home) {
  const std::string dir = policy::ConfigDir(home);
  return dir.empty() ? std::string() : dir + "/acknowledged-downgrades";
}

std::set<std::string> AcknowledgedDowngrades(const std::string& home) {
  std::set<std::string> out;
  const std::string file = AcknowledgedDowngradesFile(home);
  if (file.empty()) return out;
  std::ifstream in(file);
  std::string line;
  std::size_t lines = 0;
  constexpr std::size_t kMaxLines = 256;
  while (lines++ < kMaxLines && std::getline(in, line)) {
    const std::string_view layer = Trim(line);
    if (PlainLayer(layer)) out.emplace(layer);
  }
  return out;
}

Status AcknowledgeDowngrades(const std::string& home, const std::vector<std::string>& layers) {
  const std::string file = AcknowledgedDowngradesFile(home);
  if (file.empty()) {
    return PlainError("acknowledge downgrades",
                      "no configuration directory (set HOME, XDG_CONFIG_HOME or "
                      "CAGENT_CONFIG_DIR)");
  }
  std::set<std::string> all = AcknowledgedDowngrades(home);
  for (const std::string& l : layers) {
    const std::string layer(Trim(l));
    if (!PlainLayer(layer)) {
      return PlainError("acknowledge '" + TerminalSafe(l, TerminalLines::kOne) + "'",
                        "a layer is one line of printable text (as a downgrade warning names it, "
                        "e.g. cgroup)")
          .WithCode(Error::Code::kInvalidInput);
    }
    all.insert(layer);
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ec);
  if (ec) {
    return PlainError("create " + std::filesystem::path(file).parent_path().string(), ec.message());
  }
  std::string text =
      "# Downgrades cagent no longer warns about on the terminal (`cagent doctor --acknowledge "
      "LAYER`).\n# They are still recorded in --json output, result.json and session records.\n";
  for (const std::string& l : all) text += l + "\n";
  if (auto s = session::WriteFileAtomic(file, text); !s) return s;
  ::chmod(file.c_str(), 0600);
  return Ok{};
}

std::size_t WarnDowngrades(const std::vector<std::string>& downgrades, const std::string& home) {
  if (downgrades.empty()) return 0;
  const std::set<std::string> acknowledged = AcknowledgedDowngrades(home);
  std::vector<std::string> shown;
  std::size_t left_off = 0;
  for (const std::string& d : downgrades) {
    if (acknowledged.contains(DowngradeLayer(d))) {
      ++left_off;
      continue;
    }
    if (std::find(shown.begin(), shown.end(), d) != shown.end()) continue;
    shown.push_back(d);
    spdlog::warn("warning: downgrade: {}", TerminalSafe(d, TerminalLines::kOne));
  }
  if (!shown.empty()) {
    std::set<std::string> named;
    std::string layers;
    for (const std::string& d : shown) {
      const std::string layer = DowngradeLayer(d);
      if (!named.insert(layer).second) continue;
      layers += (layers.empty() ? "" : " --acknowledge ") + ShellWord(layer);
    }
    spdlog::warn(
        "  (the profile accepts this; if this machine cannot give it, `cagent doctor "
        "--acknowledge {}` stops the warning; it stays in --json and the run's records)",
        TerminalSafe(layers, TerminalLines::kOne));
  }
  return left_off;
}

}  // namespace cagent::launcher::cli
