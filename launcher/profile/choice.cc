#include "launcher/profile/choice.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <memory>

#include "common/sha256.h"
#include "common/unique_fd.h"

namespace cagent::launcher {
namespace {

constexpr std::string_view kBuiltinPrefix = "<built-in>/";
constexpr std::string_view kSuffix = ".cagent";
// The loader refuses larger profiles; the digest never needs to read more.
constexpr std::size_t kMaxProfileBytes = (1U << 20) + 1;

bool IsPath(std::string_view s) {
  return s.find('/') != std::string_view::npos || s.ends_with(kSuffix);
}

// The text of a profile file, bounded, refusing what is not a regular file (a repository's
// ./.cagent/x.cagent can be a FIFO or a link to /dev/zero).
Result<std::string> ReadBounded(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) {
    return ErrnoError("open profile '" + path + "'").WithCode(Error::Code::kInvalidInput);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return ErrnoError("stat profile '" + path + "'").WithCode(Error::Code::kInvalidInput);
  }
  if (!S_ISREG(st.st_mode)) {
    return PlainError("profile '" + path + "'", "is not a regular file")
        .WithCode(Error::Code::kInvalidInput);
  }
  std::string text;
  char buf[65536];
  while (text.size() < kMaxProfileBytes) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return ErrnoError("read profile '" + path + "'").WithCode(Error::Code::kInvalidInput);
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

std::string Absolute(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  return real ? std::string(real.get()) : path;
}

bool SameDir(const std::string& a, std::string_view b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(std::string(b).c_str(), &sb) != 0) return a == b;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

const char* const kTrustRepoProfileHelp =
    "Accept a profile from the repository's ./.cagent/ even when it has the name of a user or "
    "built-in profile it would replace. Without it such a profile is refused (a repository "
    "cannot swap the rules you asked for by name); naming the file by path also accepts it.";

Result<ProfileChoice> ChooseProfile(std::string_view requested, const policy::SearchPath& search,
                                    bool trust_repo_profile, std::string_view repo_dir_arg) {
  // By default the repository's entry is the first of the search path, wherever
  // SearchPath::Default found it (./.cagent, or ../.cagent from a subdirectory).
  const std::string repo_dir = !repo_dir_arg.empty() ? std::string(repo_dir_arg)
                               : search.dirs.empty() ? std::string()
                                                     : search.dirs.front();
  ProfileChoice c;
  std::string name(requested);
  if (name.starts_with(kBuiltinPrefix)) {
    std::string stem = name.substr(kBuiltinPrefix.size());
    if (stem.ends_with(kSuffix)) stem.resize(stem.size() - kSuffix.size());
    name = stem;
    for (const auto& b : policy::BuiltinProfiles()) {
      if (b.name != stem) continue;
      c.path = c.file = std::string(kBuiltinPrefix) + stem + std::string(kSuffix);
      c.sha256 = Sha256Hex(b.text);
      return c;
    }
    return PlainError("no built-in profile named '" + stem + "'",
                      "`cagent policy list` shows what exists")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (IsPath(name)) {
    // Named by path: the caller chose this file, wherever it is.
    auto text = ReadBounded(name);
    if (!text) return text.error();
    c.path = name;
    c.file = Absolute(name);
    c.sha256 = Sha256Hex(*text);
    const auto slash = name.rfind('/');
    c.from_repository = !repo_dir.empty() &&
                        SameDir(slash == std::string::npos ? "." : name.substr(0, slash), repo_dir);
    return c;
  }
  const auto entries = policy::ListProfiles(search);
  const policy::ProfileEntry* hit = nullptr;
  for (const auto& e : entries) {
    if (e.name == name) hit = &e;
  }
  if (hit == nullptr) {
    // Let the loader produce its usual "not found, looked in ..." diagnostic.
    c.path = name;
    return c;
  }
  c.shadows = hit->shadows;
  c.from_repository = !repo_dir.empty() && SameDir(hit->origin, repo_dir);
  if (c.from_repository && !hit->shadows.empty() && !trust_repo_profile) {
    const std::string& other = hit->shadows.front();
    const std::string which =
        other.starts_with(kBuiltinPrefix) ? "the built-in profile '" + name + "'" : other;
    return PlainError("profile '" + name + "'",
                      "the repository's " + Absolute(hit->path) + " has the same name as " + which +
                          " and would replace it; cagent does not let a repository swap the rules "
                          "you asked "
                          "for by name. Review it (cagent policy show " +
                          hit->path +
                          "), then name it by path "
                          "(--profile " +
                          hit->path + ") or pass --trust-repo-profile to use it; to use " + which +
                          " instead, pass --profile '" + other + "'")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (hit->path.starts_with(kBuiltinPrefix)) {
    for (const auto& b : policy::BuiltinProfiles()) {
      if (b.name == name) c.sha256 = Sha256Hex(b.text);
    }
    c.path = c.file = hit->path;
    return c;
  }
  auto text = ReadBounded(hit->path);
  if (!text) return text.error();
  c.path = hit->path;
  c.file = Absolute(hit->path);
  c.sha256 = Sha256Hex(*text);
  return c;
}

}  // namespace cagent::launcher
