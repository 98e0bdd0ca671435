#include "launcher/batch/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include "common/beneath.h"
#include "common/exit_codes.h"
#include "common/json_text.h"
#include "common/small_file.h"
#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/batch/results.h"
#include "launcher/guard/git.h"
#include "launcher/run/run_record.h"

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace cagent::launcher::batch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The largest file a clone may write (RLIMIT_FSIZE): a hostile remote's pack is bounded by it.
constexpr rlim_t kCloneMaxFileBytes = 4ULL << 30U;

// What to start, everything prepared before fork: the child runs only async-signal-safe calls.
struct SpawnSpec {
  std::string path;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;
  std::string log;  // stdout and stderr, or (when out is set) stderr only
  std::string out;
  bool limit_files = false;
};

// Starts `s` in its own process group (pgid = pid), stdin /dev/null, stdout/stderr to its log
// files, every signal default and unblocked, SIGTERM when cagent dies.
Result<pid_t> Spawn(const SpawnSpec& s) {
  std::vector<char*> argv;
  argv.reserve(s.argv.size() + 1);
  for (const auto& a : s.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(s.env.size() + 1);
  for (const auto& e : s.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW;
  const UniqueFd err(::open(s.log.c_str(), flags, 0600));
  const UniqueFd out(s.out.empty() ? ::dup(err.get()) : ::open(s.out.c_str(), flags, 0600));
  if (!in.valid() || !err.valid() || !out.valid()) return ErrnoError("open " + s.log);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigset_t none;
  sigemptyset(&none);
  struct rlimit fsize {
    kCloneMaxFileBytes, kCloneMaxFileBytes
  };
  struct rlimit core {
    0, 0
  };
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(125);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGQUIT}) {
      ::sigaction(sig, &dfl, nullptr);
    }
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::dup2(in.get(), 0) < 0 || ::dup2(out.get(), 1) < 0 || ::dup2(err.get(), 2) < 0) {
      ::_exit(125);
    }
    if (s.limit_files) {
      ::setrlimit(RLIMIT_FSIZE, &fsize);
      ::setrlimit(RLIMIT_CORE, &core);
    }
    if (::chdir(s.cwd.c_str()) != 0) ::_exit(125);
    ::execve(s.path.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from here, so a signal sent right away reaches the group
  return pid;
}

// `name` found in PATH, "" if nowhere.
std::string FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr && path[0] != '\0' ? path : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty() || dir[0] != '/') continue;  // a relative PATH entry means the cwd: skipped
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// The URL's protocol for git's protocol.<name>.allow ("ssh" for scp-like user@host:path).
std::string UrlProtocol(const std::string& url) {
  const std::size_t end = url.find("://");
  if (end == std::string::npos) return "ssh";
  std::string scheme = url.substr(0, end);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return scheme;
}

std::vector<std::string> GitArgs(const std::string& git, const std::string& protocol) {
  std::vector<std::string> argv = {git};
  for (auto& opt : HardeningOptions()) argv.push_back(std::move(opt));
  // After the hardening (a later -c wins): only the task URL's own protocol. protocol.file is
  // "always" in the hardening for cagent's local use; a remote's clone gets "never".
  argv.insert(argv.end(),
              {"-c", "protocol.allow=never", "-c",
               std::string("protocol.file.allow=") + (protocol == "file" ? "always" : "never")});
  if (protocol != "file") argv.insert(argv.end(), {"-c", "protocol." + protocol + ".allow=always"});
  if (protocol == "ssh") {
    // The hardening sets core.sshCommand=false; a clone over ssh needs ssh, never prompting.
    argv.insert(argv.end(), {"-c", "core.sshCommand=ssh -o BatchMode=yes"});
  }
  return argv;
}

// What a log's end says: from its last "cagent: " line (cagent's message and the hint lines
// after it) or else its last line, whitespace-joined onto one line, out of its last 4 KiB.
std::string LastLine(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > 4096 ? size - 4096 : 0;
  in.seekg(from);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  std::size_t start = text.rfind("\ncagent: ");
  if (start != std::string::npos) {
    ++start;
  } else if (text.starts_with("cagent: ")) {
    start = 0;
  } else {
    const std::size_t nl = text.find_last_of('\n');
    start = nl == std::string::npos ? 0 : nl + 1;
  }
  std::string out;
  std::stringstream lines(text.substr(start));
  std::string line;
  while (std::getline(lines, line)) {
    const std::size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    if (!out.empty()) out += " ";
    out += line.substr(b);
  }
  if (out.starts_with("cagent: ")) out = out.substr(8);
  return out;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string FormatWall(std::uint64_t ms) {
  const std::uint64_t s = ms / 1000;
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%llu:%02llu:%02llu", static_cast<unsigned long long>(s / 3600),
                  static_cast<unsigned long long>((s / 60) % 60),
                  static_cast<unsigned long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%llu:%02llu", static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  }
  return buf;
}

std::string FormatEta(std::uint64_t seconds) {
  if (seconds >= 3600) {
    return std::to_string(seconds / 3600) + "h" + std::to_string((seconds / 60) % 60) + "m";
  }
  if (seconds >= 60) return std::to_string((seconds + 59) / 60) + "m";
  return std::to_string(seconds) + "s";
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return {};
  return buf;
}

std::string Stamp() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

enum class Stage : unsigned char { kClone, kCheckout, kRun };

struct Active {
  std::size_t task = 0;
  Stage stage = Stage::kRun;
  pid_t pid = -1;
  Clock::time_point started;
  Clock::time_point stage_started;
  std::string started_at;
  std::string rerun_reason;
  bool timed_out = false;
};

class Batch {
 public:
  Batch(const std::vector<BatchTask>& tasks, BatchRunOptions options)
      : tasks_(tasks), o_(std::move(options)), host_(HostName()), git_(FindInPath("git")) {}

  Result<BatchRunOutcome> Run();

 private:
  Status Prepare();
  void StartNext();
  void Start(std::size_t task, const std::string& rerun_reason);
  bool StartStage(Active& a, Stage stage);
  void OnExit(pid_t pid, int wait_status);
  void Finish(Active& a, const std::optional<int>& wait_status, std::string status,
              std::string reason);
  void RecordNotRun(std::size_t task);
  void Cancel(int sig);
  void CheckTimeouts();
  Status MoveAside(const BatchTask& t);
  void Print(const std::string& event);
  [[nodiscard]] std::string Line() const;

  const std::vector<BatchTask>& tasks_;
  BatchRunOptions o_;
  const std::string host_;
  const std::string git_;
  std::deque<std::pair<std::size_t, std::string>> queue_;  // task, rerun reason
  std::map<pid_t, Active> active_;
  BatchRunOutcome out_;
  std::size_t done_ = 0;  // ended (skipped included)
  std::uint64_t wall_sum_ms_ = 0;
  std::size_t timed_ = 0;  // ended in this session (for the ETA)
  int cancel_signal_ = 0;
  int cancel_count_ = 0;
  bool drawn_ = false;
};

Status Batch::Prepare() {
  std::vector<std::size_t> selected;
  if (o_.indices.empty()) {
    for (std::size_t i = 0; i < tasks_.size(); ++i) selected.push_back(i);
  } else {
    for (std::size_t i : o_.indices) {
      if (i >= tasks_.size()) {
        return PlainError("--index " + std::to_string(i),
                          o_.tasks_file + " has " + std::to_string(tasks_.size()) +
                              " tasks (indices 0 to " + std::to_string(tasks_.size() - 1) + ")")
            .WithCode(Error::Code::kInvalidInput);
      }
      if (std::find(selected.begin(), selected.end(), i) == selected.end()) selected.push_back(i);
    }
  }
  std::error_code ec;
  o_.results_dir = fs::absolute(o_.results_dir, ec).lexically_normal().string();
  while (o_.results_dir.size() > 1 && o_.results_dir.back() == '/') o_.results_dir.pop_back();
  if (ec) return PlainError("--results " + o_.results_dir, ec.message());
  if (!fs::exists(o_.results_dir, ec)) {
    // Array tasks on several nodes may race to make it: "already there" is not an error.
    const bool made = fs::create_directories(o_.results_dir, ec);
    if (ec) return PlainError("create " + o_.results_dir, ec.message());
    if (made) ::chmod(o_.results_dir.c_str(), 0700);
  }
  if (!fs::is_directory(o_.results_dir, ec)) {
    return PlainError("--results " + o_.results_dir, "is not a directory")
        .WithCode(Error::Code::kInvalidInput);
  }

  out_.selected = selected.size();

  std::string existing;
  std::size_t existing_count = 0;
  for (std::size_t i : selected) {
    const BatchTask& t = tasks_[i];
    const std::string dir = TaskDir(o_.results_dir, t);
    struct stat st {};
    const bool exists = ::lstat(dir.c_str(), &st) == 0;
    if (!exists) {
      queue_.emplace_back(i, "");
      continue;
    }
    if (!o_.resume) {
      if (existing_count++ < 3) existing += "\n  " + dir;
      continue;
    }
    const Refusal why = CheckComplete(o_.results_dir, t);
    if (!why) {
      auto r = ReadResult(dir + "/result.json");
      ++out_.skipped;
      ++done_;
      if (r && Succeeded(*r)) {
        ++out_.succeeded;
      } else {
        ++out_.unsuccessful;
      }
      continue;
    }
    queue_.emplace_back(i, *why);
  }
  if (existing_count > 0) {
    if (existing_count > 3) {
      existing += "\n  ... and " + std::to_string(existing_count - 3) + " more";
    }
    return PlainError("results of an earlier batch are in the way:" + existing,
                      "pass --resume to keep the finished tasks and run the rest, or give "
                      "another --results directory")
        .WithCode(Error::Code::kInvalidInput);
  }
  return Ok{};
}

Status Batch::MoveAside(const BatchTask& t) {
  const std::string dir = TaskDir(o_.results_dir, t);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return Ok{};
  const std::string previous = o_.results_dir + "/" + kPreviousDir;
  if (::mkdir(previous.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoError("mkdir " + previous);
  }
  for (int n = 0; n < 1000; ++n) {
    const std::string to =
        previous + "/" + t.id + "-" + Stamp() + (n == 0 ? std::string() : "-" + std::to_string(n));
    if (::rename(dir.c_str(), to.c_str()) == 0) return Ok{};
    if (errno != EEXIST && errno != ENOTEMPTY) return ErrnoError("move " + dir + " to " + to);
  }
  return PlainError("move " + dir, "too many earlier attempts");
}

// A confined task_file (tasks.h) as the child reads it: copied now into the task's directory,
// opened at the link-free path LoadTasks found beneath the task root and without following any
// symlink, so a link planted on the way since the check does not make `cagent run` read (and
// send to the model) a file outside the root. Bounded: a task is text for a model.
Status CopyConfinedTaskFile(const BatchTask& t, const std::string& to) {
  constexpr std::size_t kMaxTaskFileBytes = 16U << 20U;
  UniqueFd in(Openat2(AT_FDCWD, t.task_file, O_RDONLY | O_NOCTTY | O_NONBLOCK,
                      RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS));
  if (!in.valid()) {
    return ErrnoError("task " + t.id + ": open task_file " + t.task_file +
                      " (no longer the link-free file it was when the task file was checked?)");
  }
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) return ErrnoError("task " + t.id + ": stat " + t.task_file);
  if (!S_ISREG(st.st_mode)) {
    return PlainError("task " + t.id + ": task_file " + t.task_file, "is not a regular file");
  }
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(in.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("task " + t.id + ": read " + t.task_file);
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxTaskFileBytes) {
      return PlainError("task " + t.id + ": task_file " + t.task_file, "is larger than 16 MiB");
    }
  }
  std::ofstream md(to, std::ios::binary);
  md << text;
  if (!md.flush()) return PlainError("write " + to, "failed");
  return Ok{};
}

void Batch::Start(std::size_t task, const std::string& rerun_reason) {
  const BatchTask& t = tasks_[task];
  Active a;
  a.task = task;
  a.started = Clock::now();
  a.started_at = UtcNow();
  a.rerun_reason = rerun_reason;
  const std::string dir = TaskDir(o_.results_dir, t);
  if (auto s = MoveAside(t); !s) {
    Finish(a, std::nullopt, "failed",
           "could not move the earlier attempt aside: " + s.error().Message());
    return;
  }
  if (::mkdir(dir.c_str(), 0700) != 0) {
    Finish(a, std::nullopt, "failed", ErrnoError("mkdir " + dir).Message());
    return;
  }
  if (!t.task_text.empty()) {
    std::ofstream md(dir + "/task.md", std::ios::binary);
    md << t.task_text;
    if (!t.task_text.ends_with("\n")) md << "\n";
    if (!md.flush()) {
      Finish(a, std::nullopt, "failed", "could not write " + dir + "/task.md");
      return;
    }
  } else if (t.paths_confined) {
    if (auto s = CopyConfinedTaskFile(t, dir + "/task.md"); !s) {
      Finish(a, std::nullopt, "failed", s.error().Message());
      return;
    }
  }
  StartStage(a, t.repo_is_url ? Stage::kClone : Stage::kRun);
}

// Starts stage `stage` of `a`; on failure records the task as failed and returns false.
bool Batch::StartStage(Active& a, Stage stage) {
  const BatchTask& t = tasks_[a.task];
  const std::string dir = TaskDir(o_.results_dir, t);
  a.stage = stage;
  a.stage_started = Clock::now();
  SpawnSpec s;
  // cagent run in the repository, as a person would start it: a profile named by the task is
  // then looked up in the repository's ./.cagent/ first, under cagent run's shadowing rule.
  s.cwd = stage == Stage::kRun ? (t.repo_is_url ? dir + "/repo" : t.repo) : dir;
  if (stage == Stage::kClone || stage == Stage::kCheckout) {
    if (git_.empty()) {
      Finish(a, std::nullopt, "failed",
             "git is not on PATH: the repository " + t.repo + " cannot be cloned");
      return false;
    }
    s.path = git_;
    // launcher/guard/git.cc's, so nothing of the caller's git configuration (filters, helpers,
    // hooks paths) meets the hostile repository.
    s.env = GitEnvironment();
    s.limit_files = true;
    s.argv = GitArgs(git_, UrlProtocol(t.repo));
    s.argv[0] = "git";
    if (stage == Stage::kClone) {
      s.log = dir + "/clone.log";
      s.argv.insert(s.argv.end(),
                    {"clone", "--no-checkout", "--template=", "--no-recurse-submodules", "--quiet",
                     "--", t.repo, dir + "/repo"});
    } else {
      s.log = dir + "/checkout.log";
      s.argv.insert(s.argv.end(),
                    {"--git-dir=" + dir + "/repo/.git", "--work-tree=" + dir + "/repo", "checkout",
                     "-q", "--detach", t.commit.empty() ? std::string("HEAD") : t.commit, "--"});
    }
  } else {
    s.path = o_.cagent;
    s.log = dir + "/run.log";
    s.out = dir + "/run.json";
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) s.env.emplace_back(*e);
    s.argv = {"cagent",  "run",    "--profile",
              t.profile, "--repo", t.repo_is_url ? dir + "/repo" : t.repo};
    if (!t.commit.empty()) s.argv.insert(s.argv.end(), {"--commit", t.commit});
    if (!t.model.empty()) s.argv.insert(s.argv.end(), {"--model", t.model});
    const TaskBudgets& b = t.budgets;
    if (b.max_turns) s.argv.insert(s.argv.end(), {"--max-turns", std::to_string(*b.max_turns)});
    if (b.max_tool_calls) {
      s.argv.insert(s.argv.end(), {"--max-tool-calls", std::to_string(*b.max_tool_calls)});
    }
    if (b.max_tokens) s.argv.insert(s.argv.end(), {"--max-tokens", std::to_string(*b.max_tokens)});
    if (b.wall_time) s.argv.insert(s.argv.end(), {"--wall-time", *b.wall_time});
    // Headless: an `ask` nobody can answer ends the task needs-approval (fail closed), recording
    // the exact action and the --pre-approve value that would allow it.
    s.argv.insert(s.argv.end(),
                  {"--approve", "stop", "-q", "--json", "--state-dir", dir + "/state",
                   t.task_text.empty() && !t.paths_confined ? t.task_file : dir + "/task.md"});
  }
  auto pid = Spawn(s);
  if (!pid) {
    Finish(a, std::nullopt, "failed",
           "could not start " + s.argv[0] + ": " + pid.error().Message());
    return false;
  }
  a.pid = *pid;
  active_[a.pid] = a;
  // A cancel that came while this was being set up reaches it too.
  if (cancel_signal_ != 0) ::killpg(a.pid, cancel_signal_ == SIGHUP ? SIGTERM : cancel_signal_);
  return true;
}

void Batch::OnExit(pid_t pid, int wait_status) {
  auto it = active_.find(pid);
  if (it == active_.end()) return;
  Active a = it->second;
  active_.erase(it);
  // Whatever the stage leader left in its group goes with it.
  ::killpg(pid, SIGKILL);
  const BatchTask& t = tasks_[a.task];
  const std::string dir = TaskDir(o_.results_dir, t);
  const bool exited_ok = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  if (a.stage == Stage::kClone || a.stage == Stage::kCheckout) {
    const char* what = a.stage == Stage::kClone ? "git clone" : "git checkout";
    if (cancel_signal_ != 0) {
      Finish(a, std::nullopt, "cancelled", std::string("the batch was cancelled during ") + what);
      return;
    }
    if (!exited_ok) {
      std::string reason = std::string(what) + " of " + t.repo;
      if (a.timed_out) {
        reason += " did not finish within " + std::to_string(o_.clone_timeout.count()) + "s";
      } else if (WIFSIGNALED(wait_status)) {
        reason += " was killed by " + SignalName(WTERMSIG(wait_status));
      } else {
        reason += " failed (exit " + std::to_string(WEXITSTATUS(wait_status)) + ")";
      }
      const std::string last =
          LastLine(dir + (a.stage == Stage::kClone ? "/clone.log" : "/checkout.log"));
      if (!last.empty()) reason += ": " + last;
      Finish(a, std::nullopt, "failed", reason);
      return;
    }
    if (a.stage == Stage::kClone) {
      // Before anything is checked out: no in-tree .gitattributes may select a conversion.
      if (auto s = NeutraliseAttributes(dir + "/repo/.git"); !s) {
        Finish(a, std::nullopt, "failed", s.error().Message());
        return;
      }
      StartStage(a, Stage::kCheckout);
    } else {
      StartStage(a, Stage::kRun);
    }
    return;
  }
  Finish(a, wait_status, "", "");
}

void Batch::Finish(Active& a, const std::optional<int>& wait_status, std::string status,
                   std::string reason) {
  const BatchTask& t = tasks_[a.task];
  const std::string dir = TaskDir(o_.results_dir, t);
  BatchFields f;
  f.started_at = a.started_at;
  f.finished_at = UtcNow();
  f.host = host_;
  f.rerun_reason = a.rerun_reason;
  f.wall_time_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - a.started).count());
  std::optional<run::RunRecord> run_result;
  if (wait_status) {
    if (WIFEXITED(*wait_status)) f.exit_status = WEXITSTATUS(*wait_status);
    if (WIFSIGNALED(*wait_status)) f.signal = WTERMSIG(*wait_status);
    // The run directory: what cagent run printed, else the one directory under state/runs/.
    const std::string runs = dir + "/state/runs/";
    // run.json is `cagent run --json`'s output, the run's record (RunRecord::ToJson); read like
    // the run's result.json: bounded in size and nesting, every field type-checked.
    std::string run_dir;
    if (auto text = ReadSmallFile(dir + "/run.json", run::kMaxRunResultBytes)) {
      if (auto printed = run::ParseRunResult(*text, dir + "/run.json")) {
        if (auto rec = run::RunRecord::FromJson(*printed)) run_dir = rec->run_dir;
      }
    }
    if (run_dir.rfind(runs, 0) != 0 || run_dir.find("/..") != std::string::npos) run_dir.clear();
    if (run_dir.empty()) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(runs, ec)) {
        if (e.is_directory(ec) && !e.is_symlink(ec)) run_dir = e.path().string();
      }
    }
    f.run_dir = run_dir;
    if (!run_dir.empty()) {
      // A record whose status names no run state is no result of this cagent run.
      if (auto r = run::ReadRunResult(run_dir); r && !r->unknown_status) {
        run_result = std::move(*r);
      }
    }
    if (!run_result) {
      if (cancel_signal_ != 0) {
        status = "cancelled";
        reason = "the batch was cancelled (" + SignalName(cancel_signal_) +
                 ") before cagent run recorded a result";
      } else if (f.signal) {
        status = "crashed";
        reason =
            "cagent run was killed by " + SignalName(*f.signal) + " before it recorded a result";
      } else {
        status = "failed";
        const int code = f.exit_status.value_or(-1);
        const std::string_view name = ExitCodeName(code);
        reason = "cagent run exited " + std::to_string(code) +
                 (name.empty() ? std::string() : " (" + std::string(name) + ")") +
                 " without a result";
      }
      const std::string last = LastLine(dir + "/run.log");
      if (!last.empty()) reason += ": " + last;
    }
  }
  const TaskResult result = MakeResult(t, run_result, status, reason, f);
  if (auto s = RecordResult(o_.results_dir, t, result); !s) {
    Print("cagent: batch: " + TerminalSafe(s.error().Message()));
  }
  ++done_;
  wall_sum_ms_ += f.wall_time_ms;
  ++timed_;
  const bool ok = Succeeded(result);
  if (ok) {
    ++out_.succeeded;
  } else {
    ++out_.unsuccessful;
  }
  std::string event = "cagent: batch: " + t.id + " " + TerminalSafe(result.Status());
  if (result.Verified()) event += ", verified";
  event += " (" + FormatWall(f.wall_time_ms) + ")";
  const std::string why = result.Reason();
  if (!ok && !why.empty()) {
    std::string one = TerminalSafe(why.substr(0, why.find('\n')));
    if (one.size() > 160) one = one.substr(0, 157) + "...";
    event += ": " + one;
  }
  if (!a.rerun_reason.empty()) event += " [rerun: " + TerminalSafe(a.rerun_reason) + "]";
  Print(event);
}

void Batch::RecordNotRun(std::size_t task) {
  const BatchTask& t = tasks_[task];
  const std::string dir = TaskDir(o_.results_dir, t);
  if (auto s = MoveAside(t); !s) return;
  if (::mkdir(dir.c_str(), 0700) != 0) return;
  BatchFields f;
  f.host = host_;
  f.finished_at = UtcNow();
  const TaskResult result = MakeResult(
      t, std::nullopt, "not-run",
      "the batch was cancelled (" + SignalName(cancel_signal_) + ") before this task started", f);
  (void)RecordResult(o_.results_dir, t, result);
  ++out_.unsuccessful;
}

void Batch::Cancel(int sig) {
  ++cancel_count_;
  if (cancel_signal_ == 0) cancel_signal_ = sig;
  // The first signal asks every run to cancel (cagent run records it and exits 130); a second
  // one does not wait for that.
  // SIGHUP (the terminal went away) is passed on as SIGTERM, which cagent run treats as cancel.
  const int send = cancel_count_ > 1 ? SIGKILL : (sig == SIGHUP ? SIGTERM : sig);
  for (const auto& [pid, a] : active_) ::killpg(pid, send);
  Print(cancel_count_ == 1
            ? "cagent: batch: " + SignalName(sig) + ": cancelling " +
                  std::to_string(active_.size()) + " running task(s); again to kill them"
            : "cagent: batch: killing the running tasks");
}

void Batch::CheckTimeouts() {
  const auto now = Clock::now();
  for (auto& [pid, a] : active_) {
    if (a.stage != Stage::kRun && !a.timed_out && now - a.stage_started > o_.clone_timeout) {
      a.timed_out = true;
      ::killpg(pid, SIGKILL);
    }
  }
}

std::string Batch::Line() const {
  std::string line = "batch: running " + std::to_string(active_.size()) + ", done " +
                     std::to_string(done_) + "/" + std::to_string(out_.selected) + ", failed " +
                     std::to_string(out_.unsuccessful);
  const std::size_t remaining = out_.selected - done_;
  if (remaining > 0 && timed_ > 0 && cancel_signal_ == 0) {
    const std::uint64_t avg = wall_sum_ms_ / timed_;
    const std::size_t jobs = std::max<std::size_t>(1, std::min(o_.jobs, remaining));
    const std::uint64_t waves = (remaining + jobs - 1) / jobs;
    line += ", ETA " + FormatEta(avg * waves / 1000);
  }
  return line;
}

void Batch::Print(const std::string& event) {
  if (o_.quiet) return;
  if (o_.redraw) {
    std::cerr << "\r\033[K";
    if (!event.empty()) std::cerr << event << "\n";
    std::cerr << Line() << std::flush;
    drawn_ = true;
    return;
  }
  if (event.empty()) return;
  std::cerr << event << "; " << Line() << "\n" << std::flush;
}

Result<BatchRunOutcome> Batch::Run() {
  if (o_.jobs == 0) o_.jobs = DefaultJobs();
  if (auto s = Prepare(); !s) return s.error();

  // Signals become readable events; the children get them unblocked and default (Spawn).
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&mask, sig);
  sigset_t old;
  if (::sigprocmask(SIG_BLOCK, &mask, &old) != 0) return ErrnoError("sigprocmask");
  const UniqueFd sfd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sfd.valid()) {
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    return ErrnoError("signalfd");
  }
  if (out_.skipped > 0) {
    Print("cagent: batch: " + std::to_string(out_.skipped) + " task(s) already complete in " +
          TerminalSafe(o_.results_dir) + " (--resume)");
  }
  for (;;) {
    while (cancel_signal_ == 0 && active_.size() < o_.jobs && !queue_.empty()) {
      auto [task, why] = queue_.front();
      queue_.pop_front();
      Start(task, why);
      if (o_.redraw) Print("");
    }
    if (active_.empty() && (queue_.empty() || cancel_signal_ != 0)) break;
    pollfd p{sfd.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, 1000);
    if (n < 0 && errno != EINTR) break;
    signalfd_siginfo info{};
    while (::read(sfd.get(), &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      if (info.ssi_signo != SIGCHLD) Cancel(static_cast<int>(info.ssi_signo));
    }
    // SIGCHLD coalesces: every exited child is collected, whichever signal woke the loop.
    for (;;) {
      int st = 0;
      const pid_t pid = ::waitpid(-1, &st, WNOHANG);
      if (pid <= 0) break;
      OnExit(pid, st);
    }
    CheckTimeouts();
    if (o_.redraw && n == 0) Print("");
  }
  if (cancel_signal_ != 0) {
    for (const auto& [task, why] : queue_) RecordNotRun(task);
    queue_.clear();
  }
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  if (drawn_) std::cerr << "\r\033[K" << std::flush;

  out_.cancelled = cancel_signal_ != 0;
  out_.exit_status = out_.cancelled          ? ToInt(ExitCode::kCancelled)
                     : out_.unsuccessful > 0 ? ToInt(ExitCode::kFailed)
                                             : ToInt(ExitCode::kOk);
  std::cerr << "cagent: batch: " << out_.selected << " task(s): " << out_.succeeded
            << " completed and verified, " << out_.unsuccessful << " not";
  if (out_.skipped > 0) std::cerr << " (" << out_.skipped << " kept from before)";
  if (out_.cancelled) std::cerr << "; cancelled";
  std::cerr << "; results in " << TerminalSafe(o_.results_dir) << " (cagent batch report "
            << TerminalSafe(o_.results_dir) << ")\n";
  return out_;
}

}  // namespace

std::size_t DefaultJobs() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::int64_t cpus = 0;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  return static_cast<std::size_t>(std::max<std::int64_t>(1, cpus / 2));
}

Result<BatchRunOutcome> RunBatch(const std::vector<BatchTask>& tasks,
                                 const BatchRunOptions& options) {
  Batch batch(tasks, options);
  return batch.Run();
}

}  // namespace cagent::launcher::batch
