#include "launcher/profile/repo_profiles.h"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <memory>

#include "common/sha256.h"

namespace cagent::launcher {
namespace {

constexpr std::size_t kMaxName = 48;
constexpr std::size_t kHashDigits = 12;

std::string Canonical(const std::string& dir) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(dir.c_str(), nullptr), &std::free);
  return real ? std::string(real.get()) : std::string();
}

bool HasGitEntry(const std::string& dir) {
  struct stat st {};
  return ::lstat((dir == "/" ? std::string("/.git") : dir + "/.git").c_str(), &st) == 0;
}

}  // namespace

std::string RepositoryProfileName(const std::string& dir_name) {
  std::string out;
  bool dash = false;
  for (char c : dir_name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (keep) {
      out += c;
      dash = false;
    } else if (!dash) {
      out += '-';
      dash = true;
    }
  }
  const auto first = out.find_first_not_of(".-");
  out = first == std::string::npos ? std::string() : out.substr(first);
  if (out.size() > kMaxName) out.resize(kMaxName);
  while (!out.empty() && (out.back() == '-' || out.back() == '.')) out.pop_back();
  if (out.empty()) out = "repo";
  for (const auto& b : policy::BuiltinProfiles()) {
    if (b.name == out) return out + "-repo";
  }
  return out;
}

std::optional<RepositoryIdentity> IdentifyRepository(const std::string& dir) {
  const std::string start = Canonical(dir.empty() ? "." : dir);
  if (start.empty()) return std::nullopt;
  RepositoryIdentity id;
  id.root = start;
  for (std::string d = start;;) {
    if (HasGitEntry(d)) {
      id.root = d;
      break;
    }
    if (d == "/") break;
    const auto slash = d.rfind('/');
    d = slash == 0 ? std::string("/") : d.substr(0, slash);
  }
  const auto slash = id.root.rfind('/');
  id.name = RepositoryProfileName(id.root == "/" ? std::string("root") : id.root.substr(slash + 1));
  id.key = id.name + "-" + Sha256Hex(id.root).substr(0, kHashDigits);
  return id;
}

std::string RepositoryProfileDir(const std::string& config_dir, const RepositoryIdentity& id) {
  if (config_dir.empty()) return {};
  return config_dir + "/repos/" + id.key;
}

policy::SearchPath ProfileSearchPath(const std::string& home, const std::string& installed_dir,
                                     const std::string& dir) {
  policy::SearchPath s = policy::SearchPath::Default(home, installed_dir);
  const std::string config = policy::ConfigDir(home);
  if (config.empty()) return s;
  if (auto id = IdentifyRepository(dir)) {
    const auto at = s.dirs.empty() ? s.dirs.begin() : s.dirs.begin() + 1;
    s.dirs.insert(at, RepositoryProfileDir(config, *id));
  }
  return s;
}

std::string CacheScope(const std::string& dir) {
  auto id = IdentifyRepository(dir);
  return id ? id->key : std::string();
}

}  // namespace cagent::launcher
