// The agent's grep on hostile text: RE2 (what agent/search_tools.cc runs) against the std::regex it
// replaced (libstdc++'s breadth-first __polynomial mode, ECMAScript), on the worst case for
// regular-expression engines: 100 KB of 'a' in lines of 4000 bytes (grep's longest searched line)
// and patterns with nested or ambiguous repeats that never match (docs/performance.md, "grep on
// hostile text"). Each engine searches every line, as the tool does; one iteration = the 100 KB.
//
//   build/tests/bench/cagent_bench_grep --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true
//
// Read the CPU column: the std::regex passes take seconds of CPU each, and on a loaded machine
// their wall time is many times that.
//
// A backtracking engine (std::regex's default mode) is not measured: on one such line it is
// exponential and would not finish.
#include <benchmark/benchmark.h>
#include <re2/re2.h>

#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr std::size_t kLineBytes = 4000;
constexpr std::size_t kLines = 25;

const std::vector<std::string>& Lines() {
  static const std::vector<std::string> lines(kLines, std::string(kLineBytes, 'a'));
  return lines;
}

// Same options as the grep tool (agent/search_tools.cc).
void Re2Search(benchmark::State& state, const char* pattern) {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(std::int64_t{8} << 20);
  const RE2 re(pattern, options);
  if (!re.ok()) {
    state.SkipWithError(re.error().c_str());
    return;
  }
  std::size_t matches = 0;
  for (auto _ : state) {
    for (const auto& line : Lines()) {
      if (RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), re)) ++matches;
    }
  }
  benchmark::DoNotOptimize(matches);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kLines * kLineBytes));
}

// The replaced implementation: std::regex, ECMAScript, breadth-first (polynomial) mode.
void StdRegexSearch(benchmark::State& state, const char* pattern) {
  auto flags = std::regex_constants::ECMAScript;
#if defined(__GLIBCXX__)
  flags |= std::regex_constants::__polynomial;
#endif
  const std::regex re(pattern, flags);
  std::size_t matches = 0;
  for (auto _ : state) {
    for (const auto& line : Lines()) {
      if (std::regex_search(line.begin(), line.end(), re)) ++matches;
    }
  }
  benchmark::DoNotOptimize(matches);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kLines * kLineBytes));
}

const char* const kPatterns[] = {"(a*)*b", "(a|aa)*c", "(a+)+b"};

int RegisterAll() {
  for (const char* p : kPatterns) {
    benchmark::RegisterBenchmark((std::string("re2/") + p).c_str(), Re2Search, p)
        ->Unit(benchmark::kMillisecond);
    // Seconds of CPU per pass: one is enough (and repetitions give the spread).
    benchmark::RegisterBenchmark((std::string("std_regex/") + p).c_str(), StdRegexSearch, p)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
  return 0;
}

[[maybe_unused]] const int kRegistered = RegisterAll();

}  // namespace

BENCHMARK_MAIN();
