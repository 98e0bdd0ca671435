// list_dir, glob, grep (cagent-agent, inside the sandbox).
//
// The walks never follow symlinks (a symlink is listed, not entered) and open each directory with
// openat(parent_fd, name, O_NOFOLLOW | O_DIRECTORY): a single component relative to a directory
// that was itself reached beneath the workspace fd, so a walk cannot leave the workspace. Every
// entry goes through the PathFilter; denied entries are skipped (and not entered) and counted,
// with the rules that fired, never named.
#include <dirent.h>
#include <fcntl.h>
#include <re2/re2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <set>

#include "agent/tool_internal.h"
#include "policy/match/glob.h"

namespace cagent::agent::internal {
namespace {

constexpr std::uint64_t kMaxWalkEntries = 200000;  // entries a glob/grep walk looks at
constexpr std::size_t kMaxDepth = 64;
constexpr std::size_t kGrepMaxLineBytes = 4096;   // longer lines are not searched
constexpr std::size_t kGrepShownLineBytes = 400;  // a matching line is shown up to this
constexpr std::size_t kMaxPatternBytes = 1000;
// Memory RE2 may use for a grep pattern: its compiled program and the DFA's state cache. A pattern
// whose program does not fit is refused (a 1000-byte pattern needs far less unless it repeats a
// large Unicode class hundreds of times); a search whose DFA cache fills falls back to RE2's NFA,
// still linear in the line.
constexpr std::int64_t kRegexMaxMem = std::int64_t{8} << 20;
constexpr std::chrono::seconds kGrepTimeBudget{20};
constexpr std::size_t kBinarySample = 8 * 1024;

enum class Kind { kFile, kDir, kSymlink, kOther };

Kind KindOf(int dir_fd, const char* name, unsigned char d_type) {
  switch (d_type) {
    case DT_REG:
      return Kind::kFile;
    case DT_DIR:
      return Kind::kDir;
    case DT_LNK:
      return Kind::kSymlink;
    case DT_UNKNOWN:
      break;
    default:
      return Kind::kOther;
  }
  struct stat st {};
  if (::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return Kind::kOther;
  if (S_ISREG(st.st_mode)) return Kind::kFile;
  if (S_ISDIR(st.st_mode)) return Kind::kDir;
  if (S_ISLNK(st.st_mode)) return Kind::kSymlink;
  return Kind::kOther;
}

struct DirEntryInfo {
  std::string name;
  Kind kind;
};

// All entries of the directory `fd` (not consumed), "." and ".." left out, sorted by name.
std::optional<std::vector<DirEntryInfo>> ReadDirectory(int fd) {
  int copy = ::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) return std::nullopt;
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    ::close(copy);
    return std::nullopt;
  }
  std::vector<DirEntryInfo> out;
  while (struct dirent* e = ::readdir(dir)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    out.push_back({e->d_name, KindOf(::dirfd(dir), e->d_name, e->d_type)});
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end(),
            [](const DirEntryInfo& a, const DirEntryInfo& b) { return a.name < b.name; });
  return out;
}

// Counts of what a listing or walk left out, rendered as one note.
struct Skipped {
  std::uint64_t denied = 0;
  std::set<std::string> rules;
  bool git = false;
  bool walk_capped = false;
  bool depth_capped = false;
  std::uint64_t unreadable_dirs = 0;

  void Deny(const PathDenial& d) {
    ++denied;
    rules.insert(d.rule);
  }
  [[nodiscard]] std::string Notes() const {
    std::vector<std::string> notes;
    if (denied > 0) {
      std::string rs;
      for (const auto& r : rules) rs += (rs.empty() ? "`" : ", `") + r + "`";
      notes.push_back(std::to_string(denied) + (denied == 1 ? " entry" : " entries") +
                      " skipped: denied by policy (" + rs + ")");
    }
    if (git) notes.push_back(".git/ was not searched");
    if (unreadable_dirs > 0) {
      notes.push_back(std::to_string(unreadable_dirs) + " unreadable director" +
                      (unreadable_dirs == 1 ? "y" : "ies") + " skipped");
    }
    if (depth_capped) {
      notes.push_back("directories deeper than " + std::to_string(kMaxDepth) +
                      " levels were not entered");
    }
    if (walk_capped) {
      notes.push_back("the walk stopped after " + std::to_string(kMaxWalkEntries) +
                      " entries; narrow the path");
    }
    std::string out;
    for (const auto& n : notes) out += (out.empty() ? "" : "; ") + n;
    return out;
  }
};

struct WalkEntry {
  int dir_fd;  // the directory holding the entry
  const std::string* name;
  std::string rel_base;  // relative to the walk's start
  std::string rel_ws;    // workspace-relative
  Kind kind;
};

// Depth-first walk below `fd` (sorted per directory). `prefix`: components the first levels must
// equal (a glob's literal prefix). `visit` returns false to stop the walk.
class Walker {
 public:
  Walker(const ToolEnv& env, std::string base_rel, std::vector<std::string> prefix,
         std::function<bool(const WalkEntry&)> visit, Skipped* skipped)
      : env_(env),
        base_rel_(std::move(base_rel)),
        prefix_(std::move(prefix)),
        visit_(std::move(visit)),
        skipped_(skipped) {}

  void Run(int fd) { Dir(fd, "", 0); }

 private:
  bool Dir(int fd, const std::string& rel_base, std::size_t depth) {
    auto entries = ReadDirectory(fd);
    if (!entries) {
      ++skipped_->unreadable_dirs;
      return true;
    }
    for (const auto& e : *entries) {
      if (depth < prefix_.size() && e.name != prefix_[depth]) continue;
      if (++visited_ > kMaxWalkEntries) {
        skipped_->walk_capped = true;
        return false;
      }
      std::string child_base = rel_base.empty() ? e.name : rel_base + "/" + e.name;
      std::string child_ws = JoinRelative(base_rel_, child_base);
      if (env_.filter) {
        if (auto d = env_.filter(child_ws, PathAccess::kRead)) {
          skipped_->Deny(*d);
          continue;
        }
      }
      if (e.kind == Kind::kDir && e.name == ".git") {
        skipped_->git = true;
        continue;
      }
      if (!visit_(WalkEntry{fd, &e.name, child_base, child_ws, e.kind})) return false;
      if (e.kind != Kind::kDir) continue;
      if (depth + 1 >= kMaxDepth) {
        skipped_->depth_capped = true;
        continue;
      }
      int sub = ::openat(fd, e.name.c_str(),
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      if (sub < 0) {
        ++skipped_->unreadable_dirs;
        continue;
      }
      UniqueFd guard(sub);
      if (!Dir(sub, child_base, depth + 1)) return false;
    }
    return true;
  }

  const ToolEnv& env_;
  std::string base_rel_;
  std::vector<std::string> prefix_;
  std::function<bool(const WalkEntry&)> visit_;
  Skipped* skipped_;
  std::uint64_t visited_ = 0;
};

// Opens a directory argument beneath the root and applies the filter.
std::variant<OpenedPath, ToolOutcome> OpenDirArg(const ToolEnv& env, std::string_view tool,
                                                 const std::string& path, int flags) {
  auto rel = env.fs.Relativize(path);
  if (auto* f = std::get_if<FsFailure>(&rel)) return FromFs(tool, *f);
  auto opened = env.fs.Open(std::get<std::string>(rel), flags);
  if (auto* f = std::get_if<FsFailure>(&opened)) {
    ToolOutcome out = FromFs(tool, *f);
    if (f->code == "not_a_directory" && (flags & O_DIRECTORY) != 0) {
      out.hint = "it is a file: use read_file to read it";
    }
    return out;
  }
  auto& o = std::get<OpenedPath>(opened);
  if (auto d =
          CheckDeniedBoth(env, tool, o.relative, std::get<std::string>(rel), PathAccess::kRead)) {
    return *d;
  }
  return std::move(o);
}

std::string WithNotes(std::string message, const Skipped& skipped) {
  std::string notes = skipped.Notes();
  if (!notes.empty()) message += " (" + notes + ")";
  return message;
}

// ---------------------------------------------------------------------------------------------
// list_dir

class ListDirCall : public PreparedCall {
 public:
  ListDirCall(EnvPtr env, OpenedPath dir) : env_(std::move(env)), dir_(std::move(dir)) {
    paths_.push_back(dir_.relative);
  }

  ToolOutcome Execute() override {
    auto entries = ReadDirectory(dir_.fd.get());
    if (!entries) {
      return ToolOutcome::Fail(
          "io_error", "cannot list " + Quoted(dir_.relative) + ": " + std::strerror(errno));
    }
    Skipped skipped;
    std::vector<std::string> lines;
    std::uint64_t hidden_by_cap = 0;
    for (const auto& e : *entries) {
      std::string child = JoinRelative(dir_.relative, e.name);
      if (env_->filter) {
        if (auto d = env_->filter(child, PathAccess::kRead)) {
          skipped.Deny(*d);
          continue;
        }
      }
      if (lines.size() >= env_->limits.list_max_entries) {
        ++hidden_by_cap;
        continue;
      }
      std::string line = DisplayName(e.name);
      if (e.kind == Kind::kDir) {
        line += "/";
      } else if (e.kind == Kind::kSymlink) {
        char target[4096];
        ssize_t n = ::readlinkat(dir_.fd.get(), e.name.c_str(), target, sizeof(target));
        line +=
            " -> " + (n >= 0 ? DisplayName(std::string_view(target, static_cast<std::size_t>(n)))
                             : std::string("?"));
      }
      lines.push_back(std::move(line));
    }
    ToolOutcome o;
    for (const auto& l : lines) o.output += l + "\n";
    const std::uint64_t shown = lines.size();
    o.message = Quoted(dir_.relative) + ": " + std::to_string(shown + hidden_by_cap) +
                (shown + hidden_by_cap == 1 ? " entry" : " entries");
    if (hidden_by_cap > 0) {
      o.message += ", first " + std::to_string(shown) + " shown (" + std::to_string(hidden_by_cap) +
                   " more not shown; use glob or list a subdirectory)";
    }
    o.message = WithNotes(std::move(o.message), skipped);
    if (shown == 0 && hidden_by_cap == 0) o.output = "(empty directory)\n";
    return o;
  }

 private:
  EnvPtr env_;
  OpenedPath dir_;
};

// ---------------------------------------------------------------------------------------------
// glob

class GlobCall : public PreparedCall {
 public:
  GlobCall(EnvPtr env, OpenedPath base, policy::PathGlob glob, std::string pattern)
      : env_(std::move(env)),
        base_(std::move(base)),
        glob_(std::move(glob)),
        pattern_(std::move(pattern)) {
    paths_.push_back(base_.relative);
  }

  ToolOutcome Execute() override {
    Skipped skipped;
    std::vector<std::string> matches;
    std::uint64_t total = 0;
    const std::uint64_t cap = env_->limits.glob_max_results;
    Walker walker(
        *env_, base_.relative, SplitComponents(glob_.LiteralPrefix()),
        [&](const WalkEntry& e) {
          if (glob_.Match(e.rel_base)) {
            ++total;
            if (matches.size() < cap) {
              matches.push_back(DisplayName(e.rel_ws) + (e.kind == Kind::kDir ? "/" : ""));
            }
          }
          return true;
        },
        &skipped);
    walker.Run(base_.fd.get());
    std::sort(matches.begin(), matches.end());
    ToolOutcome o;
    for (const auto& m : matches) o.output += m + "\n";
    std::string where = base_.relative == "." ? "" : " under " + Quoted(base_.relative);
    if (total == 0) {
      o.message = "no files match `" + SanitizeUtf8(pattern_) + "`" + where;
    } else {
      o.message = std::to_string(total) + (total == 1 ? " match" : " matches") + " for `" +
                  SanitizeUtf8(pattern_) + "`" + where;
      if (total > matches.size()) {
        o.message +=
            ", first " + std::to_string(matches.size()) + " shown (narrow the pattern or the path)";
      }
    }
    o.message = WithNotes(std::move(o.message), skipped);
    return o;
  }

 private:
  EnvPtr env_;
  OpenedPath base_;
  policy::PathGlob glob_;
  std::string pattern_;
};

// ---------------------------------------------------------------------------------------------
// grep

bool IsLiteralRegex(std::string_view p) {
  return p.find_first_of(".^$|()[]{}*+?\\") == std::string_view::npos;
}

char LowerAscii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// A compiled search: RE2, whose automata match in time linear in the line whatever the pattern
// (no backtracking, so no back-references or look-around), or a plain substring search when the
// pattern has no metacharacter.
struct Matcher {
  std::unique_ptr<const re2::RE2> re;
  std::string literal;
  bool ignore_case = false;

  [[nodiscard]] bool Match(std::string_view line) const {
    if (re) return re2::RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), *re);
    if (!ignore_case) return line.find(literal) != std::string_view::npos;
    std::string lowered(line);
    std::transform(lowered.begin(), lowered.end(), lowered.begin(), LowerAscii);
    return lowered.find(literal) != std::string::npos;
  }
};

// What is wrong with a pattern RE2 refused, in words, with the offending piece where RE2 names one.
std::string DescribeRegexError(const re2::RE2& re) {
  const std::string& arg = re.error_arg();
  const std::string at = arg.empty() ? "" : ": `" + SanitizeUtf8(arg) + "`";
  switch (re.error_code()) {
    case re2::RE2::ErrorBadEscape:
      if (arg.size() == 2 && arg[0] == '\\' && arg[1] >= '1' && arg[1] <= '9') {
        return "back-references are not supported" + at;
      }
      return "invalid escape" + at;
    case re2::RE2::ErrorTrailingBackslash:
      return "trailing backslash";
    case re2::RE2::ErrorBadCharClass:
      return "invalid character class" + at;
    case re2::RE2::ErrorBadCharRange:
      return "invalid character range" + at;
    case re2::RE2::ErrorMissingBracket:
      return "unbalanced [ ]" + at;
    case re2::RE2::ErrorMissingParen:
    case re2::RE2::ErrorUnexpectedParen:
      return "unbalanced ( )" + at;
    case re2::RE2::ErrorRepeatArgument:
      return "a repeat (* + ? {n}) has nothing to repeat" + at;
    case re2::RE2::ErrorRepeatSize:
      return "invalid or too large a count in { } (at most 1000)" + at;
    case re2::RE2::ErrorRepeatOp:
      return "invalid repeat" + at;
    case re2::RE2::ErrorBadPerlOp:
      return "look-around and this (? ...) group are not supported" + at;
    case re2::RE2::ErrorBadUTF8:
      return "the pattern is not valid UTF-8";
    case re2::RE2::ErrorBadNamedCapture:
      return "invalid named group" + at;
    case re2::RE2::ErrorPatternTooLarge:
      return "the expression is too large (its compiled form does not fit the " +
             std::to_string(kRegexMaxMem >> 20) + " MiB limit)";
    default:
      return SanitizeUtf8(re.error());
  }
}

struct IncludeFilter {
  std::optional<policy::PathGlob> path_glob;  // include with '/'
  std::optional<policy::WordGlob> name_glob;  // include without '/': the file name
  [[nodiscard]] bool Match(std::string_view rel_base, std::string_view name) const {
    if (path_glob) return path_glob->Match(rel_base);
    if (name_glob) return name_glob->Match(name);
    return true;
  }
};

class GrepCall : public PreparedCall {
 public:
  GrepCall(EnvPtr env, OpenedPath target, Matcher matcher, IncludeFilter include,
           std::string pattern)
      : env_(std::move(env)),
        target_(std::move(target)),
        matcher_(std::move(matcher)),
        include_(std::move(include)),
        pattern_(std::move(pattern)) {
    paths_.push_back(target_.relative);
  }

  ToolOutcome Execute() override {
    deadline_ = std::chrono::steady_clock::now() + kGrepTimeBudget;
    Skipped skipped;
    if (S_ISDIR(target_.st.st_mode)) {
      Walker walker(
          *env_, target_.relative, {},
          [&](const WalkEntry& e) {
            if (e.kind != Kind::kFile) return true;
            if (!include_.Match(e.rel_base, *e.name)) return true;
            int fd = ::openat(e.dir_fd, e.name->c_str(),
                              O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
            if (fd < 0) {
              ++unreadable_files_;
              return true;
            }
            UniqueFd guard(fd);
            return ScanFile(fd, e.rel_ws);
          },
          &skipped);
      walker.Run(target_.fd.get());
    } else {
      ScanFile(target_.fd.get(), target_.relative);
    }
    return Result(skipped);
  }

 private:
  // Returns false when the search must stop (match cap, byte cap, time budget).
  bool ScanFile(int fd, const std::string& rel) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ++unreadable_files_;
      return true;
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size > env_->limits.grep_max_file_bytes) {
      ++large_files_;
      return true;
    }
    if (scanned_bytes_ + size > env_->limits.grep_max_scan_bytes) {
      scan_capped_ = true;
      return false;
    }
    auto content = ReadWholeFile(fd, rel);
    if (std::holds_alternative<FsFailure>(content)) {
      ++unreadable_files_;
      return true;
    }
    const auto& text = std::get<std::string>(content);
    // The file may have grown since fstat: only what fits the per-file cap is searched.
    std::string_view view(text.data(),
                          std::min<std::size_t>(text.size(), env_->limits.grep_max_file_bytes));
    std::string_view sample = view.substr(0, std::min(view.size(), kBinarySample));
    if (LooksBinary(sample, view.size() > sample.size())) {
      ++binary_files_;
      return true;
    }
    scanned_bytes_ += view.size();
    ++files_searched_;
    bool file_matched = false;
    std::uint64_t line_no = 0;
    std::size_t start = 0;
    while (start < view.size()) {
      std::size_t nl = view.find('\n', start);
      std::size_t end = nl == std::string_view::npos ? view.size() : nl;
      std::string_view line = view.substr(start, end - start);
      start = end + 1;
      ++line_no;
      if ((line_no & 1023) == 0 && std::chrono::steady_clock::now() > deadline_) {
        time_capped_ = true;
        return false;
      }
      if (line.size() > kGrepMaxLineBytes) {
        ++long_lines_;
        continue;
      }
      if (!matcher_.Match(line)) continue;
      if (matches_ >= env_->limits.grep_max_matches) {
        match_capped_ = true;
        return false;
      }
      ++matches_;
      if (!file_matched) {
        file_matched = true;
        ++files_matched_;
      }
      std::string shown = SanitizeUtf8(line.substr(0, kGrepShownLineBytes));
      if (line.size() > kGrepShownLineBytes) shown += " [...]";
      output_ += DisplayName(rel) + ":" + std::to_string(line_no) + ": " + shown + "\n";
    }
    if (std::chrono::steady_clock::now() > deadline_) {
      time_capped_ = true;
      return false;
    }
    return true;
  }

  ToolOutcome Result(const Skipped& skipped) {
    ToolOutcome o;
    o.output = std::move(output_);
    std::string where = target_.relative == "." ? "" : " in " + Quoted(target_.relative);
    const std::string pat = "/" + SanitizeUtf8(pattern_) + "/";
    if (matches_ == 0) {
      o.message = "no matches for " + pat + where + " (" + std::to_string(files_searched_) +
                  (files_searched_ == 1 ? " file" : " files") + " searched)";
    } else {
      o.message = std::to_string(matches_) + (matches_ == 1 ? " match" : " matches") + " in " +
                  std::to_string(files_matched_) + (files_matched_ == 1 ? " file" : " files") +
                  " for " + pat + where;
    }
    std::vector<std::string> notes;
    if (match_capped_) {
      notes.push_back("stopped after " + std::to_string(env_->limits.grep_max_matches) +
                      " matches; narrow the pattern, path or include");
    }
    if (scan_capped_) {
      notes.push_back("stopped after scanning " + HumanBytes(scanned_bytes_) +
                      "; narrow the path or include");
    }
    if (time_capped_) {
      notes.push_back("stopped after " + std::to_string(kGrepTimeBudget.count()) +
                      " s; narrow the path or include, or simplify the pattern");
    }
    if (binary_files_ > 0) {
      notes.push_back(std::to_string(binary_files_) + " binary file(s) skipped");
    }
    if (large_files_ > 0) {
      notes.push_back(std::to_string(large_files_) + " file(s) above " +
                      HumanBytes(env_->limits.grep_max_file_bytes) + " skipped");
    }
    if (long_lines_ > 0) {
      notes.push_back(std::to_string(long_lines_) + " line(s) longer than " +
                      std::to_string(kGrepMaxLineBytes) + " bytes not searched");
    }
    if (unreadable_files_ > 0) {
      notes.push_back(std::to_string(unreadable_files_) + " unreadable file(s) skipped");
    }
    std::string walk_notes = skipped.Notes();
    if (!walk_notes.empty()) notes.push_back(walk_notes);
    for (const auto& n : notes) o.message += "\nnote: " + n;
    return o;
  }

  EnvPtr env_;
  OpenedPath target_;
  Matcher matcher_;
  IncludeFilter include_;
  std::string pattern_;
  std::chrono::steady_clock::time_point deadline_;
  std::string output_;
  std::uint64_t matches_ = 0;
  std::uint64_t files_matched_ = 0;
  std::uint64_t files_searched_ = 0;
  std::uint64_t scanned_bytes_ = 0;
  std::uint64_t binary_files_ = 0;
  std::uint64_t large_files_ = 0;
  std::uint64_t long_lines_ = 0;
  std::uint64_t unreadable_files_ = 0;
  bool match_capped_ = false;
  bool scan_capped_ = false;
  bool time_capped_ = false;
};

}  // namespace

Prepared PrepareListDir(const EnvPtr& env, const nlohmann::json& args) {
  const std::string path = args.value("path", std::string("."));
  auto dir = OpenDirArg(*env, "list_dir", path, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
  if (auto* fail = std::get_if<ToolOutcome>(&dir)) return std::move(*fail);
  return std::unique_ptr<PreparedCall>(
      std::make_unique<ListDirCall>(env, std::get<OpenedPath>(std::move(dir))));
}

Prepared PrepareGlob(const EnvPtr& env, const nlohmann::json& args) {
  const auto& pattern = args["pattern"].get_ref<const std::string&>();
  const std::string path = args.value("path", std::string("."));
  if (!pattern.empty() && pattern[0] == '/') {
    return ToolOutcome::Fail(
        "bad_arguments", "glob refused: the pattern `" + SanitizeUtf8(pattern) + "` is absolute",
        "patterns are relative to `path` (default: the workspace root), "
        "e.g. \"src/**/*.c\"");
  }
  if (pattern.find('\0') != std::string::npos || pattern.size() > kMaxPatternBytes) {
    return ToolOutcome::Fail("bad_arguments",
                             "glob refused: the pattern has a NUL byte or is too long");
  }
  auto glob = policy::PathGlob::Compile(pattern);
  if (!glob.ok()) {
    return ToolOutcome::Fail("bad_arguments",
                             "glob: invalid pattern `" + SanitizeUtf8(pattern) + "`: " +
                                 SanitizeUtf8(glob.error().detail.empty() ? glob.error().Message()
                                                                          : glob.error().detail),
                             "use *, ?, [abc] within a component and ** as a whole component; "
                             "no \".\" or \"..\" components");
  }
  auto base = OpenDirArg(*env, "glob", path, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
  if (auto* fail = std::get_if<ToolOutcome>(&base)) return std::move(*fail);
  return std::unique_ptr<PreparedCall>(std::make_unique<GlobCall>(
      env, std::get<OpenedPath>(std::move(base)), std::move(*glob), pattern));
}

Prepared PrepareGrep(const EnvPtr& env, const nlohmann::json& args) {
  const auto& pattern = args["pattern"].get_ref<const std::string&>();
  const std::string path = args.value("path", std::string("."));
  const bool ignore_case = args.value("ignore_case", false);
  if (pattern.empty()) {
    return ToolOutcome::Fail("bad_arguments", "grep: the pattern is empty",
                             "give a regular expression, e.g. \"def \\\\w+\"");
  }
  if (pattern.size() > kMaxPatternBytes) {
    return ToolOutcome::Fail("bad_arguments",
                             "grep: the pattern is " + std::to_string(pattern.size()) +
                                 " bytes, above the " + std::to_string(kMaxPatternBytes) +
                                 "-byte limit",
                             "search for a shorter distinctive piece");
  }
  Matcher matcher;
  matcher.ignore_case = ignore_case;
  if (IsLiteralRegex(pattern) && pattern.find('\0') == std::string::npos) {
    matcher.literal = pattern;
    if (ignore_case) {
      std::transform(matcher.literal.begin(), matcher.literal.end(), matcher.literal.begin(),
                     LowerAscii);
    }
  } else {
    re2::RE2::Options options;
    options.set_log_errors(false);  // the error goes back to the model, not to stderr
    options.set_max_mem(kRegexMaxMem);
    options.set_case_sensitive(!ignore_case);
    auto re =
        std::make_unique<const re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
    if (!re->ok()) {
      return ToolOutcome::Fail("bad_arguments",
                               "grep: invalid regular expression /" + SanitizeUtf8(pattern) +
                                   "/: " + DescribeRegexError(*re),
                               "use RE2 syntax (Perl-like, without back-references or "
                               "look-around); escape literal metacharacters with a backslash");
    }
    matcher.re = std::move(re);
  }
  IncludeFilter include;
  if (args.contains("include")) {
    const auto& inc = args["include"].get_ref<const std::string&>();
    bool ok = true;
    std::string error;
    if (inc.find('/') != std::string::npos) {
      auto g = policy::PathGlob::Compile(inc);
      ok = g.ok() && !g->IsAbsolute();
      if (g.ok() && ok) include.path_glob.emplace(std::move(*g));
      if (!g.ok()) error = g.error().detail.empty() ? g.error().Message() : g.error().detail;
    } else {
      auto g = policy::WordGlob::Compile(inc);
      ok = g.ok();
      if (ok) include.name_glob.emplace(std::move(*g));
      if (!ok) error = g.error().detail.empty() ? g.error().Message() : g.error().detail;
    }
    if (!ok) {
      return ToolOutcome::Fail("bad_arguments",
                               "grep: invalid include glob `" + SanitizeUtf8(inc) + "`" +
                                   (error.empty() ? "" : ": " + SanitizeUtf8(error)),
                               "e.g. \"*.py\" (file names) or \"src/**/*.py\" (relative paths)");
    }
  }
  auto rel = env->fs.Relativize(path);
  if (auto* f = std::get_if<FsFailure>(&rel)) return FromFs("grep", *f);
  auto opened = env->fs.Open(std::get<std::string>(rel), O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (auto* f = std::get_if<FsFailure>(&opened)) return FromFs("grep", *f);
  auto& target = std::get<OpenedPath>(opened);
  if (auto d = CheckDeniedBoth(*env, "grep", target.relative, std::get<std::string>(rel),
                               PathAccess::kRead)) {
    return *d;
  }
  if (!S_ISDIR(target.st.st_mode) && !S_ISREG(target.st.st_mode)) {
    return ToolOutcome::Fail("not_regular_file", "grep refused: " + Quoted(target.relative) +
                                                     " is neither a regular file nor a directory");
  }
  return std::unique_ptr<PreparedCall>(std::make_unique<GrepCall>(
      env, std::move(target), std::move(matcher), std::move(include), pattern));
}

}  // namespace cagent::agent::internal
