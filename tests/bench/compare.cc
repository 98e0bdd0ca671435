// cagent_bench_compare: runs several commands side by side and compares their wall-clock time.
//
//   cagent_bench_compare [--runs N] [--warmup N] [--shuffle] [--json FILE]
//                        --cmd 'NAME|PROGRAM ARG...' --cmd 'NAME|PROGRAM ARG...' ...
//
// Each --cmd is "NAME|ARGV" (or just "ARGV", named after the program's basename). ARGV is split
// on spaces and tabs; there is no quoting and no shell, so what is measured is exactly one
// fork + execve of PROGRAM (resolved through PATH once, before timing) and its exit. The first
// command is the baseline: every command's median is also given as a ratio to the baseline's.
//
// Measurement: one sample is CLOCK_MONOTONIC from just before fork() to just after wait4()
// returns, so it includes the fork of PROGRAM, the dynamic loader, everything PROGRAM does and
// the reaping. stdin, stdout and stderr are /dev/null.
//
// The benchmark is a child subreaper (PR_SET_CHILD_SUBREAPER): descendants a command leaves
// behind (bwrap's pid 1 in its pid namespace outlives the bwrap process by design) are reparented
// to it and reaped after the sample is taken, untimed, before the next run starts, so they cannot
// spill into another command's sample. Their CPU time is counted with the command's: the "cpu"
// figures are the user + system time of the command and every descendant, from wait4()'s rusage.
// "tail" is how long those leftovers took to exit after the command did. A command that leaves a
// daemon running makes the benchmark wait for it.
//
// Runs are interleaved — round r runs A, B, C, then round r+1 does the same (in a shuffled order
// with --shuffle) — so a burst of machine noise hits every command alike instead of one command's
// whole series. The first --warmup rounds are run but not recorded (page cache, dentry cache,
// CPU frequency).
//
// Any run that does not exit 0 aborts the benchmark with exit status 1 and a message naming the
// command: a sandbox that fails fast must never be reported as a fast sandbox. Usage errors exit 2.
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace cagent::bench {
namespace {

constexpr int kExitCommandFailed = 1;
constexpr int kExitUsage = 2;
constexpr const char kProg[] = "cagent_bench_compare";

struct Options {
  int runs = 60;
  int warmup = 5;
  bool shuffle = false;
  std::string json_path;
  std::vector<std::string> cmd_specs;
};

// One command under test: its argv (owned strings plus the char* view execve wants).
struct Command {
  std::string name;
  std::string path;  // PROGRAM resolved through PATH
  std::vector<std::string> args;
  std::vector<char*> argv;  // points into args; null-terminated
  std::vector<double> wall_ms;
  std::vector<double> cpu_ms;
  std::vector<double> tail_ms;
  std::vector<double> rss_kib;  // wait4's ru_maxrss (see Run)
};

struct Summary {
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0, mean = 0, cpu_median = 0, tail_median = 0;
  double rss_median_kib = 0, rss_max_kib = 0;
};

void PrintUsage(std::FILE* out) {
  const std::string indent(sizeof(kProg) - 1, ' ');
  const std::string text =
      std::string("usage: ") + kProg + " [--runs N] [--warmup N] [--shuffle] [--json FILE]\n" +
      "       " + indent + " --cmd 'NAME|PROGRAM ARG...' [--cmd ...]\n" +
      "Runs each command N times (default 60), interleaved, after N warm-up rounds\n"
      "(default 5), and prints median, p10, p90 and min wall time in ms and the ratio of\n"
      "each median to the first command's. ARGV is split on whitespace; no shell.\n";
  (void)std::fputs(text.c_str(), out);  // nothing to do if the terminal is gone
}

// Prints "cagent_bench_compare: MESSAGE" on stderr and exits with `code`.
[[noreturn]] void Fail(int code, const std::string& message) {
  (void)std::fputs((std::string(kProg) + ": " + message + "\n").c_str(), stderr);
  std::exit(code);
}

[[noreturn]] void UsageError(const std::string& message) {
  (void)std::fputs((std::string(kProg) + ": " + message + "\n").c_str(), stderr);
  PrintUsage(stderr);
  std::exit(kExitUsage);
}

int ParseCount(std::string_view flag, std::string_view text, int min) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < min) {
    UsageError(std::string(flag) + " needs an integer >= " + std::to_string(min) + ", got '" +
               std::string(text) + "'");
  }
  return value;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) UsageError(std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      PrintUsage(stdout);
      std::exit(0);
    } else if (arg == "--runs") {
      o.runs = ParseCount(arg, value(), 1);
    } else if (arg == "--warmup") {
      o.warmup = ParseCount(arg, value(), 0);
    } else if (arg == "--shuffle") {
      o.shuffle = true;
    } else if (arg == "--json") {
      o.json_path = value();
    } else if (arg == "--cmd") {
      o.cmd_specs.emplace_back(value());
    } else {
      UsageError("unknown argument '" + std::string(arg) + "'");
    }
  }
  if (o.cmd_specs.empty()) UsageError("no --cmd given");
  return o;
}

// Returns PROGRAM itself if it contains a '/', else the first executable PATH entry named so.
std::optional<std::string> ResolveProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return ::access(program.c_str(), X_OK) == 0 ? std::optional(program) : std::nullopt;
  }
  const char* path_env = std::getenv("PATH");
  std::string_view path = path_env ? path_env : "/usr/bin:/bin";
  while (true) {
    const size_t colon = path.find(':');
    std::string dir(path.substr(0, colon));
    if (dir.empty()) dir = ".";
    dir += '/';
    const std::string candidate = dir + program;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) return std::nullopt;
    path.remove_prefix(colon + 1);
  }
}

Command ParseCommand(const std::string& spec) {
  Command c;
  std::string rest = spec;
  if (const size_t bar = spec.find('|'); bar != std::string::npos) {
    c.name = spec.substr(0, bar);
    rest = spec.substr(bar + 1);
  }
  size_t pos = 0;
  while ((pos = rest.find_first_not_of(" \t", pos)) != std::string::npos) {
    const size_t end = rest.find_first_of(" \t", pos);
    c.args.push_back(rest.substr(pos, end == std::string::npos ? end : end - pos));
    pos = end;
  }
  if (c.args.empty()) UsageError("--cmd '" + spec + "' has no program");
  if (c.name.empty()) c.name = c.args[0].substr(c.args[0].rfind('/') + 1);
  auto path = ResolveProgram(c.args[0]);
  if (!path) {
    UsageError("--cmd '" + c.name + "': '" + c.args[0] +
               "' is not an executable file (nor found in PATH)");
  }
  c.path = *path;
  return c;  // argv is filled in once the Command has its final address
}

double Ms(const timespec& t) {
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

double Ms(const timeval& t) {
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3;
}

std::string Joined(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

// Runs `c` once with stdio on `devnull` and records the sample. Exits the benchmark if the
// command fails. Runs in the benchmark's only thread; the child does only dup2/execve/_exit.
void RunOnce(Command& c, int devnull, bool record, int round) {
  timespec start{}, end{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::dup2(devnull, 0) < 0 || ::dup2(devnull, 1) < 0 || ::dup2(devnull, 2) < 0) ::_exit(126);
    ::execve(c.path.c_str(), c.argv.data(), environ);
    ::_exit(127);
  }
  if (pid < 0) {
    Fail(kExitCommandFailed, "fork for '" + c.name + "' failed: " + std::strerror(errno));
  }
  int status = 0;
  rusage usage{};
  pid_t waited;
  do {
    waited = ::wait4(pid, &status, 0, &usage);
  } while (waited < 0 && errno == EINTR);
  ::clock_gettime(CLOCK_MONOTONIC, &end);
  if (waited != pid) {
    Fail(kExitCommandFailed, "waiting for '" + c.name + "' failed: " + std::strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string how = WIFEXITED(status)
                          ? "exited with status " + std::to_string(WEXITSTATUS(status))
                          : "was killed by signal " + std::to_string(WTERMSIG(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) how += " (exec failed?)";
    Fail(kExitCommandFailed,
         "command '" + c.name + "' " + how + " on " + (record ? "measured" : "warm-up") +
             " round " + std::to_string(round + 1) +
             "; nothing was measured.\n  command line: " + Joined(c.args) +
             "\n  Run it by hand to see its output (the benchmark sends it to /dev/null).");
  }
  double cpu = Ms(usage.ru_utime) + Ms(usage.ru_stime);
  // wait4's ru_maxrss (KiB) is the larger of the command's own peak resident set and the peaks
  // of the descendants it waited for (the kernel reports max(maxrss, cmaxrss)).
  const auto rss = static_cast<double>(usage.ru_maxrss);
  // Leftover descendants, reparented to us as the subreaper; ECHILD ends the loop.
  for (;;) {
    rusage orphan{};
    int ignored = 0;
    if (::wait4(-1, &ignored, 0, &orphan) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    cpu += Ms(orphan.ru_utime) + Ms(orphan.ru_stime);
  }
  timespec gone{};
  ::clock_gettime(CLOCK_MONOTONIC, &gone);
  if (record) {
    c.wall_ms.push_back(Ms(end) - Ms(start));
    c.cpu_ms.push_back(cpu);
    c.tail_ms.push_back(Ms(gone) - Ms(end));
    c.rss_kib.push_back(rss);
  }
}

// Linear interpolation between closest ranks (numpy's default); `sorted` must be non-empty.
double Percentile(const std::vector<double>& sorted, double p) {
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

Summary Summarize(const Command& c) {
  std::vector<double> s = c.wall_ms;
  std::sort(s.begin(), s.end());
  std::vector<double> cpu = c.cpu_ms;
  std::sort(cpu.begin(), cpu.end());
  std::vector<double> tail = c.tail_ms;
  std::sort(tail.begin(), tail.end());
  Summary out;
  out.median = Percentile(s, 50);
  out.p10 = Percentile(s, 10);
  out.p90 = Percentile(s, 90);
  out.min = s.front();
  out.max = s.back();
  double sum = 0;
  for (double v : s) sum += v;
  out.mean = sum / static_cast<double>(s.size());
  out.cpu_median = Percentile(cpu, 50);
  out.tail_median = Percentile(tail, 50);
  std::vector<double> rss = c.rss_kib;
  std::sort(rss.begin(), rss.end());
  out.rss_median_kib = Percentile(rss, 50);
  out.rss_max_kib = rss.back();
  return out;
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, 4);
  return r.ec == std::errc{} ? std::string(buf, r.ptr) : "null";
}

void WriteJson(const std::string& path, const Options& o, const std::vector<Command>& cmds,
               const std::vector<Summary>& sums) {
  std::string j = "{\n  \"tool\": \"cagent_bench_compare\",\n";
  j += "  \"unit\": \"ms\",\n  \"runs\": " + std::to_string(o.runs) +
       ",\n  \"warmup\": " + std::to_string(o.warmup) +
       ",\n  \"order\": " + JsonString(o.shuffle ? "interleaved-shuffled" : "interleaved") +
       ",\n  \"baseline\": " + JsonString(cmds[0].name) + ",\n  \"commands\": [\n";
  for (size_t i = 0; i < cmds.size(); ++i) {
    const Summary& s = sums[i];
    j += "    {\n      \"name\": " + JsonString(cmds[i].name) + ",\n      \"argv\": [";
    for (size_t k = 0; k < cmds[i].args.size(); ++k) {
      j += (k ? ", " : "") + JsonString(cmds[i].args[k]);
    }
    j += "],\n      \"median_ms\": " + JsonNumber(s.median) +
         ",\n      \"p10_ms\": " + JsonNumber(s.p10) + ",\n      \"p90_ms\": " + JsonNumber(s.p90) +
         ",\n      \"min_ms\": " + JsonNumber(s.min) + ",\n      \"max_ms\": " + JsonNumber(s.max) +
         ",\n      \"mean_ms\": " + JsonNumber(s.mean) +
         ",\n      \"cpu_median_ms\": " + JsonNumber(s.cpu_median) +
         ",\n      \"tail_median_ms\": " + JsonNumber(s.tail_median) +
         ",\n      \"maxrss_median_kib\": " + JsonNumber(s.rss_median_kib) +
         ",\n      \"maxrss_max_kib\": " + JsonNumber(s.rss_max_kib) +
         ",\n      \"ratio_to_baseline\": " + JsonNumber(s.median / sums[0].median) +
         ",\n      \"samples_ms\": [";
    for (size_t k = 0; k < cmds[i].wall_ms.size(); ++k) {
      j += (k ? ", " : "") + JsonNumber(cmds[i].wall_ms[k]);
    }
    j += "]\n    }" + std::string(i + 1 < cmds.size() ? "," : "") + "\n";
  }
  j += "  ]\n}\n";
  std::ofstream out(path, std::ios::trunc);
  out << j;
  out.close();
  if (!out) {
    Fail(kExitUsage, "could not write the JSON results to '" + path + "'");
  }
}

void PrintTable(const Options& o, const std::vector<Command>& cmds,
                const std::vector<Summary>& sums) {
  size_t width = 7;
  for (const auto& c : cmds) width = std::max(width, c.name.size());
  const int w = static_cast<int>(width);
  std::printf(
      "%d runs per command, interleaved%s, after %d warm-up round%s; wall time in ms from "
      "fork to wait4\n",
      o.runs, o.shuffle ? " (shuffled)" : "", o.warmup, o.warmup == 1 ? "" : "s");
  std::printf("%-*s %8s %8s %8s %8s %8s %8s %8s %8s\n", w, "command", "median", "p10", "p90", "min",
              "cpu", "tail", "rss", "ratio");
  for (size_t i = 0; i < cmds.size(); ++i) {
    const Summary& s = sums[i];
    std::printf("%-*s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.1f %8.3f%s\n", w, cmds[i].name.c_str(),
                s.median, s.p10, s.p90, s.min, s.cpu_median, s.tail_median,
                s.rss_median_kib / 1024.0, s.median / sums[0].median, i == 0 ? "  (baseline)" : "");
  }
  std::printf(
      "ratio = median / median of '%s'. cpu = median user+sys CPU time of the command and all "
      "its descendants;\ntail = median time from the command's exit until its last leftover "
      "descendant exited (untimed); rss = median of wait4's ru_maxrss in MiB: the peak resident\n"
      "set of the command or of the largest descendant it waited for.\n",
      cmds[0].name.c_str());
}

int Main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  std::vector<Command> cmds;
  for (const auto& spec : o.cmd_specs) {
    cmds.push_back(ParseCommand(spec));
    for (size_t i = 0; i + 1 < cmds.size(); ++i) {
      if (cmds[i].name == cmds.back().name) UsageError("two commands named '" + cmds[i].name + "'");
    }
  }
  // The char* view for execve is built only now: moving a Command (as the vector grows) moves
  // short strings' inline buffers, which would leave earlier pointers dangling.
  for (auto& c : cmds) {
    for (auto& a : c.args) c.argv.push_back(a.data());
    c.argv.push_back(nullptr);
    c.wall_ms.reserve(static_cast<size_t>(o.runs));
    c.cpu_ms.reserve(static_cast<size_t>(o.runs));
    c.tail_ms.reserve(static_cast<size_t>(o.runs));
  }
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    Fail(kExitUsage, std::string("prctl(PR_SET_CHILD_SUBREAPER): ") + std::strerror(errno));
  }
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) {
    Fail(kExitUsage, std::string("open /dev/null: ") + std::strerror(errno));
  }
  std::vector<size_t> order(cmds.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937 rng(20240601);  // fixed seed: the same shuffled order on every invocation
  for (int round = 0; round < o.warmup + o.runs; ++round) {
    if (o.shuffle) std::shuffle(order.begin(), order.end(), rng);
    const bool record = round >= o.warmup;
    for (size_t i : order) RunOnce(cmds[i], devnull, record, record ? round - o.warmup : round);
  }
  ::close(devnull);

  std::vector<Summary> sums;
  sums.reserve(cmds.size());
  for (const auto& c : cmds) sums.push_back(Summarize(c));
  PrintTable(o, cmds, sums);
  if (!o.json_path.empty()) WriteJson(o.json_path, o, cmds, sums);
  return 0;
}

}  // namespace
}  // namespace cagent::bench

int main(int argc, char** argv) { return cagent::bench::Main(argc, argv); }
