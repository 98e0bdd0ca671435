#include "launcher/session/git_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/guard/git.h"
#include "launcher/profile/spec.h"

namespace cagent::launcher::session {
namespace {

std::optional<std::string> Lookup(const std::vector<std::string>& env, std::string_view name) {
  for (const std::string& kv : env) {
    if (kv.size() > name.size() && kv.starts_with(name) && kv[name.size()] == '=') {
      return kv.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

// git's reading of a boolean environment variable, enough for GIT_CONFIG_NOSYSTEM.
bool Truthy(const std::optional<std::string>& v) {
  return v.has_value() && !v->empty() && *v != "0" && *v != "false" && *v != "no" && *v != "off";
}

// The files git reads for the system and global scopes, in its order.
std::vector<std::string> ConfigFiles(const std::vector<std::string>& env, const std::string& home) {
  std::vector<std::string> files;
  if (!Truthy(Lookup(env, "GIT_CONFIG_NOSYSTEM"))) {
    const auto sys = Lookup(env, "GIT_CONFIG_SYSTEM");
    files.push_back(sys.has_value() ? *sys : "/etc/gitconfig");
  }
  if (const auto global = Lookup(env, "GIT_CONFIG_GLOBAL"); global.has_value()) {
    files.push_back(*global);
    return files;
  }
  const auto xdg = Lookup(env, "XDG_CONFIG_HOME");
  if (xdg.has_value() && !xdg->empty()) {
    files.push_back(*xdg + "/git/config");
  } else if (!home.empty()) {
    files.push_back(home + "/.config/git/config");
  }
  if (!home.empty()) files.push_back(home + "/.gitconfig");
  return files;
}

std::string Shown(std::string_view text) { return TerminalSafe(text, TerminalLines::kOne); }

// One configuration file as cagent found it.
struct ConfigFile {
  enum class Kind : std::uint8_t {
    kSkip,    // absent, unreadable, not a regular file, or no `user` section nor include in it
    kGit,     // hand it to git (an include, a form the reader below does not take, or > 1 MiB)
    kParsed,  // read here: `entries` are its user.name / user.email settings, in order
  };
  Kind kind = Kind::kSkip;
  std::vector<std::pair<std::string, std::string>> entries;
};

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'; }
bool IsAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A reader of git's configuration syntax for the one thing cagent needs, the user.name and
// user.email settings of a file in order, so that a launch does not start a git process for the
// common ~/.gitconfig. It takes sections (`[user]`, `[user "sub"]`, `[user.sub]`), comments,
// `key = value` with git's value rules (blanks outside quotes collapse to one space and are
// trimmed at both ends; "..." keeps them; \" \\ \n \t \b escapes; a backslash at the end of a
// line continues the value; CRLF is LF). Anything else (a key without `=`, text after a section
// header, an unknown escape, an unterminated quote, a key before any section, a stray character)
// returns nullopt and git reads the file instead, so an odd file is never read differently from
// git, only more slowly.
class IdentityReader {
 public:
  explicit IdentityReader(std::string_view text) : t_(text) {
    if (t_.starts_with("\xEF\xBB\xBF")) t_.remove_prefix(3);
  }

  std::optional<std::vector<std::pair<std::string, std::string>>> Read() {
    std::vector<std::pair<std::string, std::string>> out;
    bool in_section = false;
    bool in_user = false;
    while (true) {
      SkipBlanks();
      if (AtEnd()) return out;
      const char c = Peek();
      if (c == '\n') {
        Next();
        continue;
      }
      if (c == '#' || c == ';') {
        SkipLine();
        continue;
      }
      if (c == '[') {
        ++i_;
        auto user = Header();
        if (!user) return std::nullopt;
        in_section = true;
        in_user = *user;
        SkipBlanks();
        if (!AtEnd() && Peek() != '\n' && Peek() != '#' && Peek() != ';') return std::nullopt;
        continue;
      }
      if (!IsAlpha(c) || !in_section) return std::nullopt;
      std::string key;
      while (!AtEnd() && (IsAlnum(Peek()) || Peek() == '-')) key += t_[i_++];
      SkipBlanks();
      if (AtEnd() || Peek() != '=') return std::nullopt;
      ++i_;
      auto value = Value();
      if (!value) return std::nullopt;
      key = Lower(key);
      if (in_user && (key == "name" || key == "email")) out.emplace_back("user." + key, *value);
    }
  }

 private:
  [[nodiscard]] bool AtEnd() const { return i_ >= t_.size(); }
  // The next character, with "\r\n" read as "\n" (git does the same).
  [[nodiscard]] char Peek() const {
    if (t_[i_] == '\r' && i_ + 1 < t_.size() && t_[i_ + 1] == '\n') return '\n';
    return t_[i_];
  }
  char Next() {
    const char c = Peek();
    i_ += (c == '\n' && t_[i_] == '\r') ? 2 : 1;
    return c;
  }
  void SkipBlanks() {
    while (!AtEnd() && Peek() != '\n' && IsBlank(Peek())) ++i_;
  }
  void SkipLine() {
    while (!AtEnd() && Next() != '\n') {
    }
  }

  // After '[': the header through ']'. True when it names the `user` section itself.
  std::optional<bool> Header() {
    std::string name;
    while (!AtEnd() && (IsAlnum(Peek()) || Peek() == '-' || Peek() == '.')) name += t_[i_++];
    if (name.empty() || AtEnd()) return std::nullopt;
    bool sub = name.find('.') != std::string::npos;  // [user.sub]: a subsection
    if (IsBlank(Peek())) {
      SkipBlanks();
      if (AtEnd() || Peek() != '"') return std::nullopt;
      ++i_;
      while (!AtEnd() && Peek() != '"') {
        if (Peek() == '\n' || Peek() == '\\') return std::nullopt;
        ++i_;
      }
      if (AtEnd()) return std::nullopt;
      ++i_;
      sub = true;
    }
    if (AtEnd() || Peek() != ']') return std::nullopt;
    ++i_;
    return !sub && Lower(name) == "user";
  }

  // After '=': the value through the end of its line.
  std::optional<std::string> Value() {
    std::string v;
    bool quoted = false;
    bool comment = false;
    std::size_t blanks = 0;
    while (true) {
      if (AtEnd()) return quoted ? std::nullopt : std::optional<std::string>(v);
      const char c = Next();
      if (c == '\n') return quoted ? std::nullopt : std::optional<std::string>(v);
      if (comment) continue;
      if (!quoted && IsBlank(c)) {
        if (!v.empty()) ++blanks;
        continue;
      }
      if (!quoted && (c == '#' || c == ';')) {
        comment = true;
        continue;
      }
      v.append(blanks, ' ');
      blanks = 0;
      if (c == '"') {
        quoted = !quoted;
        continue;
      }
      if (c != '\\') {
        v += c;
        continue;
      }
      if (AtEnd()) return std::nullopt;
      const char e = Next();
      switch (e) {
        case '\n':
          continue;  // the value goes on on the next line
        case 't':
          v += '\t';
          break;
        case 'b':
          v += '\b';
          break;
        case 'n':
          v += '\n';
          break;
        case '\\':
        case '"':
          v += e;
          break;
        default:
          return std::nullopt;
      }
    }
  }

  std::string_view t_;
  std::size_t i_ = 0;
};

// Looks at configuration file `path`: whether it can hold an identity, and when it is plain
// enough, what it sets. Not a regular file (a FIFO would block git until its timeout): skipped,
// with a note.
ConfigFile Examine(const std::string& path, std::vector<std::string>& notes) {
  ConfigFile out;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) return out;  // absent or unreadable: git would skip it too
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return out;
  if (!S_ISREG(st.st_mode)) {
    notes.push_back("git identity: skipped " + Shown(path) + ": not a regular file");
    return out;
  }
  constexpr std::size_t kMaxScan = 1 << 20;
  if (static_cast<std::size_t>(st.st_size) > kMaxScan) {
    out.kind = ConfigFile::Kind::kGit;
    return out;
  }
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  const std::string lower = Lower(text);
  if (lower.find("include") != std::string::npos) {
    out.kind = ConfigFile::Kind::kGit;
    return out;
  }
  if (lower.find("user") == std::string::npos) return out;
  if (auto entries = ParseIdentitySettings(text)) {
    out.kind = ConfigFile::Kind::kParsed;
    out.entries = std::move(*entries);
    return out;
  }
  out.kind = ConfigFile::Kind::kGit;
  return out;
}

// git config --file FILE --includes --get-regexp user.(name|email), as entries in order; nullopt
// with a note when git could not read it.
std::optional<std::vector<std::pair<std::string, std::string>>> AskGit(
    const std::string& file, const std::string& home, std::vector<std::string>& notes) {
  GitInvocation inv;
  // --file: this file (and what it includes) only, never a repository's config; cwd "/" and no
  // --git-dir, so there is no repository to discover and includeIf gitdir: matches nothing.
  inv.args = {
      "config", "--file", file, "--includes", "-z", "--get-regexp", "^user\\.(name|email)$"};
  inv.home = home;  // so that include.path = ~/... means the caller's file
  inv.max_output = 64 << 10;
  inv.timeout = std::chrono::milliseconds(5000);
  inv.max_memory = 256ULL << 20;
  inv.max_cpu_seconds = 5;
  inv.max_file_size = 1 << 20;
  auto r = RunGit(inv);
  if (!r) {
    notes.push_back("git identity: could not read " + Shown(file) + ": " + r.error().Message());
    return std::nullopt;
  }
  std::vector<std::pair<std::string, std::string>> out;
  if (r->exit_code == 1) return out;  // neither key set in this file
  if (r->exit_code != 0) {
    notes.push_back("git identity: git could not read " + Shown(file) + " (exit " +
                    std::to_string(r->exit_code) + ")");
    return std::nullopt;
  }
  // -z --get-regexp: "key\nvalue\0" per entry.
  for (const std::string& entry : SplitNul(r->out)) {
    const std::size_t nl = entry.find('\n');
    if (nl == std::string::npos) continue;
    out.emplace_back(entry.substr(0, nl), entry.substr(nl + 1));
  }
  return out;
}

}  // namespace

std::optional<std::vector<std::pair<std::string, std::string>>> ParseIdentitySettings(
    std::string_view text) {
  return IdentityReader(text).Read();
}

std::vector<EnvVar> GitIdentity::Env() const {
  std::vector<EnvVar> out;
  if (!name.empty()) {
    out.push_back({"GIT_AUTHOR_NAME", name});
    out.push_back({"GIT_COMMITTER_NAME", name});
  }
  if (!email.empty()) {
    out.push_back({"GIT_AUTHOR_EMAIL", email});
    out.push_back({"GIT_COMMITTER_EMAIL", email});
  }
  return out;
}

Refusal GitIdentityProblem(const std::string& value) {
  if (value.empty()) return "it is empty";
  if (value.size() > kMaxGitIdentityBytes) {
    return "it is longer than " + std::to_string(kMaxGitIdentityBytes) + " bytes";
  }
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return "it holds a control character";
    if (c == '<' || c == '>') return "it holds '<' or '>'";
  }
  return {};
}

GitIdentity ReadGitIdentity(const std::vector<std::string>& env, const std::string& home) {
  GitIdentity id;
  for (const std::string& file : ConfigFiles(env, home)) {
    if (file.empty() || file[0] != '/') continue;  // git resolves no relative path here either
    ConfigFile found = Examine(file, id.notes);
    if (found.kind == ConfigFile::Kind::kSkip) continue;
    if (found.kind == ConfigFile::Kind::kGit) {
      auto entries = AskGit(file, home, id.notes);
      if (!entries) continue;
      found.entries = std::move(*entries);
    }
    // The last entry of a key wins, as for git config --get.
    for (const auto& [key, value] : found.entries) {
      std::string* slot = key == "user.name" ? &id.name : key == "user.email" ? &id.email : nullptr;
      if (slot == nullptr) continue;
      if (const Refusal why = GitIdentityProblem(value)) {
        // git would use this value; pass none rather than an earlier file's.
        id.notes.push_back("git identity: skipped " + key + " from " + Shown(file) + ": " + *why);
        slot->clear();
        continue;
      }
      *slot = value;
    }
  }
  return id;
}

const GitIdentity& CallerGitIdentity() {
  static const GitIdentity kIdentity = ReadGitIdentity(CallerEnviron(), CallerHome());
  return kIdentity;
}

}  // namespace cagent::launcher::session
