// read_file, write_file, edit_file (cagent-agent, inside the sandbox).
//
// Prepare opens the file (and, for writes, its parent directory) beneath the workspace fd and keeps
// the descriptors; Execute reads through the kept fd and replaces the file by writing a temporary
// file in the kept parent directory and renaming it over the name: the broker's decision applies
// to exactly what is touched, and a symlink swapped in after Prepare is replaced, never followed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "agent/tool_internal.h"
#include "agent/unified_diff.h"
#include "common/sha256.h"

namespace cagent::agent::internal {
namespace {

constexpr std::size_t kBinarySample = 8 * 1024;
constexpr std::size_t kMaxDiffBytes = 64 * 1024;
constexpr int kReadFlags = O_RDONLY | O_NONBLOCK | O_NOCTTY;  // O_NONBLOCK: a FIFO never blocks

std::string CountLines(std::string_view text) {
  std::size_t n = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  if (!text.empty() && text.back() != '\n') ++n;
  return std::to_string(n) + (n == 1 ? " line" : " lines");
}

// The file's first bytes, for the binary check.
FsResult<std::string> ReadSample(int fd, const std::string& relative) {
  std::string buf(kBinarySample, '\0');
  std::size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      return FsFailure{"io_error", "cannot read " + Quoted(relative) + ": " + std::strerror(err),
                       "", err};
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  buf.resize(got);
  return buf;
}

std::optional<ToolOutcome> CheckRegular(std::string_view tool, const OpenedPath& opened) {
  if (S_ISDIR(opened.st.st_mode)) {
    return ToolOutcome::Fail(
        "is_directory", Quoted(opened.relative) + " is a directory",
        "use list_dir with path=\"" + DisplayName(opened.relative) + "\" to see its entries");
  }
  if (!S_ISREG(opened.st.st_mode)) {
    return ToolOutcome::Fail("not_regular_file",
                             std::string(tool) + " refused: " + Quoted(opened.relative) +
                                 " is not a regular file (a FIFO, socket or device)",
                             "only regular files can be used with " + std::string(tool));
  }
  return std::nullopt;
}

std::optional<ToolOutcome> CheckLedger(const ToolEnv& env, std::string_view tool,
                                       const std::string& path, const std::string& digest) {
  const std::string t(tool);
  switch (env.ledger.Check(path, digest)) {
    case Ledger::State::kFresh:
      return std::nullopt;
    case Ledger::State::kNeverRead:
      return ToolOutcome::Fail(
          "not_read", t + " refused: " + Quoted(path) + " has not been read in this session",
          "call read_file on " + Quoted(path) +
              " first, then retry with text copied from what it shows");
    case Ledger::State::kInvalidated:
      return ToolOutcome::Fail("not_read",
                               t + " refused: " + Quoted(path) +
                                   " was read earlier, but its contents were dropped from the "
                                   "context to save space",
                               "call read_file on " + Quoted(path) + " again before changing it");
    case Ledger::State::kChanged:
      break;
  }
  std::string why =
      env.ledger.MaybeStale(path) ? " (a run_command ran since then and probably changed it)" : "";
  return ToolOutcome::Fail(
      "stale_read", t + " refused: " + Quoted(path) + " changed since it was last read" + why,
      "call read_file on " + Quoted(path) + " again and base the change on its current contents");
}

// The destination of a write: the existing file (if any) opened for reading, and the directory
// holding the name that will be replaced, both beneath the root.
struct WriteTarget {
  std::string arg_relative;  // the model's path, made relative (not normalised)
  std::string relative;      // resolved workspace-relative path of the file
  std::optional<OpenedPath> existing;
  std::optional<OpenedParent> parent;  // absent: parent directories must be created in Execute
};

// Opens the destination. `must_exist`: edit_file. Never changes the workspace.
std::variant<WriteTarget, ToolOutcome> OpenTarget(const ToolEnv& env, std::string_view tool,
                                                  const std::string& path_arg, bool must_exist) {
  auto rel = env.fs.Relativize(path_arg);
  if (auto* f = std::get_if<FsFailure>(&rel)) return FromFs(tool, *f);
  WriteTarget target;
  target.arg_relative = std::get<std::string>(rel);
  auto opened = env.fs.Open(target.arg_relative, kReadFlags);
  if (auto* f = std::get_if<FsFailure>(&opened)) {
    if (f->err != ENOENT) return FromFs(tool, *f);
    if (must_exist) {
      ToolOutcome out = FromFs(tool, *f);
      out.hint = "check the path with list_dir or glob; to create a new file use write_file";
      return out;
    }
    // A new file (or a dangling symlink, which the rename replaces rather than follows).
    auto parent = env.fs.OpenParent(target.arg_relative, /*create_dirs=*/false);
    if (auto* pf = std::get_if<FsFailure>(&parent)) {
      if (pf->err != ENOENT) return FromFs(tool, *pf);
      target.relative = NormalizeLexically(target.arg_relative);
    } else {
      target.parent = std::get<OpenedParent>(std::move(parent));
      target.relative = target.parent->relative;
    }
    if (auto d =
            CheckDeniedBoth(env, tool, target.relative, target.arg_relative, PathAccess::kWrite)) {
      return *d;
    }
    return target;
  }
  auto& file = std::get<OpenedPath>(opened);
  if (auto bad = CheckRegular(tool, file)) return *bad;
  target.relative = file.relative;
  if (auto d =
          CheckDeniedBoth(env, tool, target.relative, target.arg_relative, PathAccess::kWrite)) {
    return *d;
  }
  // The directory entry to replace is the resolved one (symlinks inside the workspace followed).
  auto parent = env.fs.OpenParent(file.relative, /*create_dirs=*/false);
  if (auto* pf = std::get_if<FsFailure>(&parent)) return FromFs(tool, *pf);
  auto& dir = std::get<OpenedParent>(parent);
  struct stat st {};
  if (::fstatat(dir.dir.get(), dir.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      st.st_dev != file.st.st_dev || st.st_ino != file.st.st_ino) {
    return ToolOutcome::Fail(
        "io_error", Quoted(file.relative) + " changed while it was being opened", "retry the call");
  }
  target.existing = std::move(file);
  target.parent = std::move(dir);
  return target;
}

// Writes `content` to a fresh temporary file in `dir` and renames it over `name`. `mode`: the
// permissions to give the file (nullopt: a new file, 0666 less the umask). `no_replace`: fail with
// EEXIST if `name` exists by then (creating a file must not clobber one that appeared since).
FsResult<bool> AtomicReplace(int dir, const std::string& name, const std::string& relative,
                             std::string_view content, std::optional<mode_t> mode,
                             bool no_replace) {
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = ".cagent-write-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".tmp";
    // O_EXCL | O_NOFOLLOW: never opens something already there, symlink or not.
    fd = ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  mode ? 0600 : 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  auto fail = [&](int err, const std::string& what) -> FsFailure {
    if (fd >= 0) ::close(fd);
    ::unlinkat(dir, tmp.c_str(), 0);
    FsFailure f{"io_error",
                "cannot write " + Quoted(relative) + ": " + what + ": " + std::strerror(err), "",
                err};
    if (err == EROFS) {
      f.code = "read_only";
      f.message = Quoted(relative) + " is on a read-only mount";
      f.hint = "this part of the workspace is read-only in this run";
    } else if (err == EACCES || err == EPERM) {
      f.code = "permission_denied";
      f.hint = "the sandbox does not allow writing here";
    } else if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
      f.hint = "the run's disk or file size limit was reached";
    }
    return f;
  };
  if (fd < 0) {
    int err = errno;
    fd = -1;
    tmp.clear();
    return fail(err, "create a temporary file");
  }
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno, "write");
    done += static_cast<std::size_t>(n);
  }
  if (mode && ::fchmod(fd, *mode) != 0) return fail(errno, "chmod");
  // No fsync: the workspace is disposable and the patch is captured after the agent exits, from
  // the same page cache; a crash loses the run anyway.
  if (::close(fd) != 0) {
    fd = -1;
    return fail(errno, "close");
  }
  fd = -1;
  int rc = no_replace ? ::renameat2(dir, tmp.c_str(), dir, name.c_str(), RENAME_NOREPLACE)
                      : ::renameat(dir, tmp.c_str(), dir, name.c_str());
  if (rc != 0) {
    int err = errno;
    if (err == EEXIST) {
      ::unlinkat(dir, tmp.c_str(), 0);
      return FsFailure{"exists", Quoted(relative) + " appeared since the call was prepared",
                       "read it with read_file, then replace it", err};
    }
    return fail(err, "rename");
  }
  return true;
}

// Permission bits to keep when replacing a file (set-id bits are dropped).
mode_t KeptMode(const struct stat& st) { return st.st_mode & 0777; }

std::string CappedDiff(std::string diff) {
  if (diff.size() <= kMaxDiffBytes) return diff;
  std::size_t cut = diff.rfind('\n', kMaxDiffBytes);
  if (cut == std::string::npos) cut = kMaxDiffBytes;
  std::size_t rest = diff.size() - cut;
  diff.resize(cut);
  diff += "\n[diff truncated: " + std::to_string(rest) + " more bytes]";
  return diff;
}

// ---------------------------------------------------------------------------------------------
// read_file

class ReadFileCall : public PreparedCall {
 public:
  ReadFileCall(EnvPtr env, OpenedPath file, std::optional<std::uint64_t> offset,
               std::optional<std::uint64_t> limit)
      : env_(std::move(env)), file_(std::move(file)), offset_(offset), limit_(limit) {
    paths_.push_back(file_.relative);
  }

  ToolOutcome Execute() override {
    const ToolLimits& lim = env_->limits;
    const std::uint64_t first = offset_.value_or(1);
    const std::uint64_t count = limit_.value_or(lim.read_max_lines);
    const std::uint64_t last_wanted = count > UINT64_MAX - first ? UINT64_MAX : first + count - 1;
    Sha256 hash;
    std::string out;
    std::uint64_t line_no = 1;  // number of the line being assembled
    std::uint64_t total = 0;    // complete lines seen
    std::uint64_t shown_last = 0;
    bool output_full = false;
    bool line_cut = false;
    std::string line;  // the current line when it is inside the window
    std::size_t width = std::max<std::size_t>(
        4, std::to_string(last_wanted == UINT64_MAX ? first : last_wanted).size());
    width = std::min<std::size_t>(width, 8);
    auto in_window = [&](std::uint64_t n) {
      return n >= first && n <= last_wanted && !output_full;
    };
    auto flush_line = [&]() {
      if (!in_window(line_no)) return;
      std::string text = SanitizeUtf8(line);
      if (text.size() > lim.read_max_bytes) {
        text.resize(lim.read_max_bytes);
        text = SanitizeUtf8(text);
        text += " [line truncated: " + std::to_string(line.size()) + " bytes]";
        line_cut = true;
      }
      char num[32];
      std::snprintf(num, sizeof(num), "%*llu\t", static_cast<int>(width),
                    static_cast<unsigned long long>(line_no));
      if (!out.empty() && out.size() + text.size() + 16 > lim.read_max_bytes) {
        output_full = true;
        return;
      }
      out += num;
      out += text;
      out += '\n';
      shown_last = line_no;
    };
    char buf[64 * 1024];
    off_t pos = 0;
    bool trailing = false;  // bytes after the last '\n'
    for (;;) {
      ssize_t n = ::pread(file_.fd.get(), buf, sizeof(buf), pos);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return ToolOutcome::Fail(
            "io_error", "cannot read " + Quoted(file_.relative) + ": " + std::strerror(errno));
      }
      if (n == 0) break;
      pos += n;
      std::string_view chunk(buf, static_cast<std::size_t>(n));
      hash.Update(chunk);
      std::size_t start = 0;
      while (start < chunk.size()) {
        std::size_t nl = chunk.find('\n', start);
        std::size_t end = nl == std::string_view::npos ? chunk.size() : nl;
        if (in_window(line_no) && line.size() <= lim.read_max_bytes) {
          line.append(chunk.substr(start, std::min(end - start, lim.read_max_bytes + 1)));
        }
        if (nl == std::string_view::npos) {
          trailing = true;
          break;
        }
        flush_line();
        line.clear();
        ++line_no;
        ++total;
        trailing = false;
        start = nl + 1;
      }
    }
    if (trailing) {
      flush_line();
      ++total;
    }
    const std::string digest = hash.FinishHex();
    const std::string& rel = file_.relative;
    if (total == 0) {
      env_->ledger.RecordRead(rel, digest);
      ToolOutcome o;
      o.message = Quoted(rel) + " is empty (0 bytes)";
      return o;
    }
    if (first > total) {
      return ToolOutcome::Fail("bad_arguments",
                               "read_file: offset " + std::to_string(first) +
                                   " is past the end of " + Quoted(rel) + " (" +
                                   std::to_string(total) + " lines)",
                               "use an offset between 1 and " + std::to_string(total));
    }
    env_->ledger.RecordRead(rel, digest);
    ToolOutcome o;
    o.output = std::move(out);
    if (first > 1 || shown_last < total) {
      o.message = "lines " + std::to_string(first) + "-" + std::to_string(shown_last) + " of " +
                  std::to_string(total) + " in " + Quoted(rel);
      if (shown_last < total) {
        o.message +=
            "; call read_file with offset=" + std::to_string(shown_last + 1) + " to continue";
        if (output_full) {
          o.message += " (this window stopped at " + HumanBytes(lim.read_max_bytes) + " of output)";
        }
      }
    }
    if (line_cut) {
      if (!o.message.empty()) o.message += "\n";
      o.message += "note: a line longer than " + HumanBytes(lim.read_max_bytes) +
                   " was cut; use grep to find text in it";
    }
    return o;
  }

 private:
  EnvPtr env_;
  OpenedPath file_;
  std::optional<std::uint64_t> offset_;
  std::optional<std::uint64_t> limit_;
};

std::optional<std::uint64_t> OptUint(const nlohmann::json& args, const char* key) {
  if (!args.contains(key)) return std::nullopt;
  return args[key].get<std::uint64_t>();
}

// ---------------------------------------------------------------------------------------------
// write_file / edit_file

class WriteCall : public PreparedCall {
 public:
  WriteCall(EnvPtr env, std::string tool, WriteTarget target, std::string content)
      : env_(std::move(env)),
        tool_(std::move(tool)),
        target_(std::move(target)),
        content_(std::move(content)) {
    paths_.push_back(target_.relative);
  }
  // edit_file: the replacement is computed in Execute from the content read through the kept fd.
  WriteCall(EnvPtr env, WriteTarget target, std::string old_string, std::string new_string,
            bool replace_all)
      : env_(std::move(env)),
        tool_("edit_file"),
        target_(std::move(target)),
        old_string_(std::move(old_string)),
        new_string_(std::move(new_string)),
        replace_all_(replace_all),
        is_edit_(true) {
    paths_.push_back(target_.relative);
  }

  ToolOutcome Execute() override;

 private:
  EnvPtr env_;
  std::string tool_;
  WriteTarget target_;
  std::string content_;
  std::string old_string_;
  std::string new_string_;
  bool replace_all_ = false;
  bool is_edit_ = false;
};

std::vector<std::uint64_t> LineNumbersOf(std::string_view text,
                                         const std::vector<std::size_t>& positions) {
  std::vector<std::uint64_t> lines;
  std::uint64_t line = 1;
  std::size_t scanned = 0;
  for (std::size_t pos : positions) {
    line += static_cast<std::uint64_t>(
        std::count(text.begin() + static_cast<std::ptrdiff_t>(scanned),
                   text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
    scanned = pos;
    lines.push_back(line);
  }
  return lines;
}

std::string JoinNumbers(const std::vector<std::uint64_t>& numbers, std::size_t max_shown = 20) {
  std::string out;
  for (std::size_t i = 0; i < numbers.size() && i < max_shown; ++i) {
    out += (i == 0 ? "" : ", ") + std::to_string(numbers[i]);
  }
  if (numbers.size() > max_shown) {
    out += " and " + std::to_string(numbers.size() - max_shown) + " more";
  }
  return out;
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Whitespace runs folded to one space; `map[i]` is the original offset of normalised byte i.
std::string FoldWhitespace(std::string_view text, std::vector<std::size_t>* map) {
  std::string out;
  bool in_space = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (IsSpace(text[i])) {
      if (!in_space) {
        out.push_back(' ');
        if (map != nullptr) map->push_back(i);
      }
      in_space = true;
    } else {
      out.push_back(text[i]);
      if (map != nullptr) map->push_back(i);
      in_space = false;
    }
  }
  return out;
}

std::string TrimSpaces(std::string s) {
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

bool LooksLineNumbered(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  std::size_t digits = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  return i > digits && i < s.size() && s[i] == '\t';
}

// Applies the edit to `content`: the new content, or the refusal.
std::variant<std::string, ToolOutcome> ComputeEdit(const std::string& content,
                                                   const std::string& rel,
                                                   const std::string& old_string,
                                                   const std::string& new_string,
                                                   bool replace_all) {
  std::vector<std::size_t> positions;
  for (std::size_t pos = content.find(old_string); pos != std::string::npos;
       pos = content.find(old_string, pos + old_string.size())) {
    positions.push_back(pos);
  }
  if (positions.empty()) {
    std::string hint =
        "call read_file on " + Quoted(rel) +
        " and copy the text to replace exactly, whitespace included, without the line-number "
        "prefixes";
    if (LooksLineNumbered(old_string)) {
      hint =
          "old_string seems to start with read_file's line-number prefix (\"  12<TAB>\"); "
          "copy only the text after the tab";
    }
    std::vector<std::size_t> map;
    const std::string folded = FoldWhitespace(content, &map);
    const std::string needle = TrimSpaces(FoldWhitespace(old_string, nullptr));
    std::vector<std::size_t> near;
    if (!needle.empty()) {
      for (std::size_t pos = folded.find(needle); pos != std::string::npos && near.size() < 50;
           pos = folded.find(needle, pos + needle.size())) {
        std::size_t orig = map[pos];
        // Point at the first non-space character of the match.
        while (orig < content.size() && IsSpace(content[orig])) ++orig;
        near.push_back(orig);
      }
    }
    if (!near.empty()) {
      return ToolOutcome::Fail(
          "no_match",
          "edit_file: old_string was not found in " + Quoted(rel) +
              " as given, but text differing only in whitespace (indentation, spaces or line "
              "breaks) is at line(s) " +
              JoinNumbers(LineNumbersOf(content, near)),
          "call read_file on those lines and copy them exactly, whitespace included");
    }
    return ToolOutcome::Fail("no_match", "edit_file: old_string was not found in " + Quoted(rel),
                             hint);
  }
  if (positions.size() > 1 && !replace_all) {
    return ToolOutcome::Fail(
        "ambiguous_match",
        "edit_file: old_string occurs " + std::to_string(positions.size()) + " times in " +
            Quoted(rel) + ", at lines " + JoinNumbers(LineNumbersOf(content, positions)),
        "add surrounding lines to old_string so it matches exactly once, or set replace_all=true "
        "to change every occurrence");
  }
  std::string result;
  result.reserve(content.size() + positions.size() * new_string.size());
  std::size_t prev = 0;
  for (std::size_t pos : positions) {
    result.append(content, prev, pos - prev);
    result += new_string;
    prev = pos + old_string.size();
  }
  result.append(content, prev, std::string::npos);
  return result;
}

ToolOutcome WriteCall::Execute() {
  const ToolEnv& env = *env_;
  const std::string& rel = target_.relative;
  std::string old_content;
  if (target_.existing) {
    // The content the decision was about, through the fd opened in Prepare.
    auto content = ReadWholeFile(target_.existing->fd.get(), rel);
    if (auto* f = std::get_if<FsFailure>(&content)) return FromFs(tool_, *f);
    old_content = std::get<std::string>(std::move(content));
    if (auto stale = CheckLedger(env, tool_, rel, Sha256Hex(old_content))) return *stale;
  }
  if (is_edit_) {
    auto edited = ComputeEdit(old_content, rel, old_string_, new_string_, replace_all_);
    if (auto* fail = std::get_if<ToolOutcome>(&edited)) return std::move(*fail);
    content_ = std::get<std::string>(std::move(edited));
    if (content_.size() > env.limits.write_max_bytes) {
      return ToolOutcome::Fail("too_large", "edit_file: the edited " + Quoted(rel) + " would be " +
                                                HumanBytes(content_.size()) + ", above the " +
                                                HumanBytes(env.limits.write_max_bytes) +
                                                " write limit");
    }
  }
  if (!target_.parent) {
    // New file under directories that do not exist yet: create them now, each beneath the root.
    auto parent = env.fs.OpenParent(target_.arg_relative, /*create_dirs=*/true);
    if (auto* f = std::get_if<FsFailure>(&parent)) return FromFs(tool_, *f);
    target_.parent = std::get<OpenedParent>(std::move(parent));
    if (target_.parent->relative != rel) {
      return ToolOutcome::Fail("io_error",
                               Quoted(rel) +
                                   " resolved differently when its directories were "
                                   "created (" +
                                   Quoted(target_.parent->relative) + ")",
                               "retry the call");
    }
  }
  std::optional<mode_t> mode;
  if (target_.existing) mode = KeptMode(target_.existing->st);
  auto written = AtomicReplace(target_.parent->dir.get(), target_.parent->name, rel, content_, mode,
                               /*no_replace=*/!target_.existing);
  if (auto* f = std::get_if<FsFailure>(&written)) return FromFs(tool_, *f);
  env_->ledger.RecordWrite(rel, Sha256Hex(content_));

  ToolOutcome o;
  o.changed_paths.push_back(rel);
  const std::string size = CountLines(content_) + ", " + HumanBytes(content_.size());
  if (!target_.existing) {
    o.message = "created " + Quoted(rel) + " (" + size + ")";
    return o;
  }
  if (old_content == content_) {
    o.message = Quoted(rel) + " unchanged: the new content is identical";
    return o;
  }
  if (is_edit_) {
    o.message = "edited " + Quoted(rel) + " (" + size + ")";
  } else {
    o.message = "replaced " + Quoted(rel) + " (" + size + ")";
  }
  o.output = CappedDiff(SanitizeUtf8(UnifiedDiff(old_content, content_, "a/" + rel, "b/" + rel)));
  return o;
}

}  // namespace

Prepared PrepareReadFile(const EnvPtr& env, const nlohmann::json& args) {
  const auto& path = args["path"].get_ref<const std::string&>();
  auto rel = env->fs.Relativize(path);
  if (auto* f = std::get_if<FsFailure>(&rel)) return FromFs("read_file", *f);
  const std::string& relative = std::get<std::string>(rel);
  auto opened = env->fs.Open(relative, kReadFlags);
  if (auto* f = std::get_if<FsFailure>(&opened)) return FromFs("read_file", *f);
  auto& file = std::get<OpenedPath>(opened);
  if (auto d = CheckDeniedBoth(*env, "read_file", file.relative, relative, PathAccess::kRead)) {
    return *d;
  }
  if (auto bad = CheckRegular("read_file", file)) return *bad;
  auto offset = OptUint(args, "offset");
  auto limit = OptUint(args, "limit");
  const auto size = static_cast<std::uint64_t>(file.st.st_size);
  if (size > env->limits.read_max_bytes && !offset && !limit) {
    return ToolOutcome::Fail(
        "too_large",
        "read_file: " + Quoted(file.relative) + " is " + HumanBytes(size) + ", above the " +
            HumanBytes(env->limits.read_max_bytes) + " limit for reading a whole file",
        "read it in windows with offset and limit (e.g. offset=1, limit=" +
            std::to_string(std::min<std::uint64_t>(env->limits.read_max_lines, 500)) +
            "), or find the part you need with grep");
  }
  auto sample = ReadSample(file.fd.get(), file.relative);
  if (auto* f = std::get_if<FsFailure>(&sample)) return FromFs("read_file", *f);
  const auto& bytes = std::get<std::string>(sample);
  if (LooksBinary(bytes, size > bytes.size())) {
    return ToolOutcome::Fail("binary_file",
                             "read_file refused: " + Quoted(file.relative) + " looks binary (" +
                                 HumanBytes(size) + "; NUL bytes or invalid UTF-8)",
                             "binary files cannot be shown; use run_command with a suitable "
                             "tool (file, xxd -l 256, strings) if you need to inspect it");
  }
  return std::unique_ptr<PreparedCall>(
      std::make_unique<ReadFileCall>(env, std::move(file), offset, limit));
}

Prepared PrepareWriteFile(const EnvPtr& env, const nlohmann::json& args) {
  const auto& path = args["path"].get_ref<const std::string&>();
  const auto& content = args["content"].get_ref<const std::string&>();
  if (content.size() > env->limits.write_max_bytes) {
    return ToolOutcome::Fail("too_large",
                             "write_file: the content is " + HumanBytes(content.size()) +
                                 ", above the " + HumanBytes(env->limits.write_max_bytes) +
                                 " write limit",
                             "write smaller files, or generate large ones with run_command");
  }
  auto target = OpenTarget(*env, "write_file", path, /*must_exist=*/false);
  if (auto* fail = std::get_if<ToolOutcome>(&target)) return std::move(*fail);
  auto& t = std::get<WriteTarget>(target);
  if (t.existing) {
    // Replacing a file follows the same rule as editing it: the model must know what it replaces.
    auto old = ReadWholeFile(t.existing->fd.get(), t.relative);
    if (auto* f = std::get_if<FsFailure>(&old)) return FromFs("write_file", *f);
    if (auto stale =
            CheckLedger(*env, "write_file", t.relative, Sha256Hex(std::get<std::string>(old)))) {
      return *stale;
    }
  }
  return std::unique_ptr<PreparedCall>(
      std::make_unique<WriteCall>(env, "write_file", std::move(t), content));
}

Prepared PrepareEditFile(const EnvPtr& env, const nlohmann::json& args) {
  const auto& path = args["path"].get_ref<const std::string&>();
  const auto& old_string = args["old_string"].get_ref<const std::string&>();
  const auto& new_string = args["new_string"].get_ref<const std::string&>();
  const bool replace_all = args.value("replace_all", false);
  if (old_string.empty()) {
    return ToolOutcome::Fail("bad_arguments", "edit_file: old_string is empty",
                             "give the exact text to replace; to create a file use write_file");
  }
  if (old_string == new_string) {
    return ToolOutcome::Fail("bad_arguments",
                             "edit_file: old_string and new_string are identical, nothing would "
                             "change",
                             "put the replacement text in new_string");
  }
  auto target = OpenTarget(*env, "edit_file", path, /*must_exist=*/true);
  if (auto* fail = std::get_if<ToolOutcome>(&target)) return std::move(*fail);
  auto& t = std::get<WriteTarget>(target);
  const auto size = static_cast<std::uint64_t>(t.existing->st.st_size);
  if (size > env->limits.write_max_bytes) {
    return ToolOutcome::Fail("too_large",
                             "edit_file: " + Quoted(t.relative) + " is " + HumanBytes(size) +
                                 ", above the " + HumanBytes(env->limits.write_max_bytes) +
                                 " limit for files the agent changes",
                             "change it with run_command (e.g. sed) instead");
  }
  // Refuse early what Execute would refuse, so the broker is not asked about a doomed call.
  // Execute checks again on what it reads then.
  auto content = ReadWholeFile(t.existing->fd.get(), t.relative);
  if (auto* f = std::get_if<FsFailure>(&content)) return FromFs("edit_file", *f);
  const auto& text = std::get<std::string>(content);
  if (auto stale = CheckLedger(*env, "edit_file", t.relative, Sha256Hex(text))) return *stale;
  auto edited = ComputeEdit(text, t.relative, old_string, new_string, replace_all);
  if (auto* fail = std::get_if<ToolOutcome>(&edited)) return std::move(*fail);
  return std::unique_ptr<PreparedCall>(
      std::make_unique<WriteCall>(env, std::move(t), old_string, new_string, replace_all));
}

}  // namespace cagent::agent::internal
