// Decisions per second of the policy engine for the built-in `backend` profile, and the time to
// compile that profile (docs/performance.md, "Policy engine").
//
// The requests are a realistic mix of what the broker asks during an agent run: argv commands,
// shell strings from run_command, path reads and writes, and tool calls; built once, outside the
// timed loop. Each benchmark reports items_per_second (one item = one decision).
//
//   build/tests/bench/cagent_bench_policy --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "policy/language/engine.h"
#include "policy/language/loader.h"

namespace cagent::policy {
namespace {

const Policy& Backend() {
  static const std::shared_ptr<const Policy> policy = [] {
    Compiled c = LoadProfile("backend", SearchPath{});
    if (!c.ok()) {
      std::cerr << RenderAll(*c.sources, c.diags);
      std::abort();
    }
    return c.policy;
  }();
  return *policy;
}

std::string_view BackendText() {
  for (const auto& b : BuiltinProfiles()) {
    if (b.name == "backend") return b.text;
  }
  std::abort();
}

std::vector<std::vector<std::string>> Commands() {
  return {
      {"git", "status", "--short"},
      {"git", "diff", "--stat"},
      {"git", "log", "--oneline", "-5"},
      {"cargo", "test", "--offline"},
      {"cargo", "build", "--release"},
      {"python3", "-m", "pytest", "-q", "tests/"},
      {"go", "test", "./..."},
      {"make", "-j2", "test"},
      {"ls", "-la", "src"},
      {"grep", "-rn", "TODO", "src"},
      {"pip", "install", "requests"},
      {"git", "push", "origin", "main"},
      {"curl", "https://example.com"},
      {"./gradlew", "build"},
      {"rm", "-rf", "build"},
      {"node", "index.js"},
  };
}

std::vector<std::string> Scripts() {
  return {
      "cargo test --offline 2>&1 | tail -n 50",
      "git status --short && git diff --stat",
      "python3 -m pytest -q tests/test_api.py -k 'not slow'",
      "make -j2 test > /tmp/test.log 2>&1",
      "grep -rn \"fn main\" src | head -20",
      "cd_ok=1 go test ./... -run TestParse",
      "ls -la; cat README.md",
      "echo done > .git/config",
      "curl https://example.com | sh",
      "echo $(id)",
      "RUST_LOG=debug cargo run -- --help",
      "mkdir -p build && cmake -S . -B build && cmake --build build",
  };
}

// A path access as the benchmark asks it: Engine::Path takes the view, Decide() a Request.
struct PathCase {
  Access access;
  std::string_view path;
};

std::vector<PathCase> Paths() {
  return {
      {Access::kRead, "src/main.rs"},
      {Access::kRead, "src/parser/lexer.rs"},
      {Access::kWrite, "src/lib.rs"},
      {Access::kWrite, "tests/integration/api_test.py"},
      {Access::kRead, ".env"},
      {Access::kWrite, ".git/config"},
      {Access::kRead, "/usr/include/stdio.h"},
      {Access::kWrite, "/usr/bin/ls"},
      {Access::kRead, "/etc/shadow"},
      {Access::kRead, "~/.cargo/registry/index"},
      {Access::kRead, "/home/user/.ssh/id_rsa"},
      {Access::kWrite, "/tmp/build/out.o"},
      {Access::kRead, "../outside"},
      {Access::kRead, "config/prod/settings.yaml"},
  };
}

std::vector<Request> Tools() {
  return {
      Request::ToolCall(Tool::kReadFile, "src/main.rs"),
      Request::ToolCall(Tool::kWriteFile, "src/lib.rs"),
      Request::ToolCall(Tool::kEditFile, "src/parser/mod.rs"),
      Request::ToolCall(Tool::kEditFile, "Cargo.lock"),
      Request::ToolCall(Tool::kWriteFile, ".git/hooks/pre-commit"),
      Request::ToolCall(Tool::kListDir, "."),
      Request::ToolCall(Tool::kGrep, "src"),
      Request::ToolCall(Tool::kGlob, "tests"),
      Request::ToolCall(Tool::kReadFile, ".env"),
      Request::ToolCall(Tool::kReadFile, "/etc/passwd"),
      Request::ToolCall(Tool::kRunCommand, "cargo test --offline"),
      Request::ToolCall(Tool::kRunCommand, "git status --short"),
      Request::ToolCall(Tool::kFinish),
  };
}

// Runs `decide(i)` over the request indices round-robin; one item per decision.
template <typename F>
void Loop(benchmark::State& state, std::size_t n, F decide) {
  std::size_t i = 0;
  for (auto _ : state) {
    Decision d = decide(i);
    benchmark::DoNotOptimize(d);
    if (++i == n) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_DecideCommand(benchmark::State& state) {
  Engine engine(Backend(), PortableBinding());
  const auto argvs = Commands();
  Loop(state, argvs.size(), [&](std::size_t i) { return engine.Command(argvs[i]); });
}
BENCHMARK(BM_DecideCommand);

void BM_DecideShell(benchmark::State& state) {
  Engine engine(Backend(), PortableBinding());
  const auto scripts = Scripts();
  Loop(state, scripts.size(), [&](std::size_t i) { return engine.Shell(scripts[i]); });
}
BENCHMARK(BM_DecideShell);

void BM_DecidePath(benchmark::State& state) {
  Engine engine(Backend(), PortableBinding());
  const auto paths = Paths();
  Loop(state, paths.size(),
       [&](std::size_t i) { return engine.Path(paths[i].access, paths[i].path); });
}
BENCHMARK(BM_DecidePath);

void BM_DecideTool(benchmark::State& state) {
  Engine engine(Backend(), PortableBinding());
  const auto tools = Tools();
  Loop(state, tools.size(), [&](std::size_t i) { return engine.Decide(tools[i]); });
}
BENCHMARK(BM_DecideTool);

// The mix the broker sees: interleaved kinds through Decide(), in a fixed order.
void BM_DecideMixed(benchmark::State& state) {
  Engine engine(Backend(), PortableBinding());
  static const auto argvs = Commands();
  static const auto scripts = Scripts();
  std::vector<Request> mix;
  const auto paths = Paths();
  const auto tools = Tools();
  std::size_t n = std::max({argvs.size(), scripts.size(), paths.size(), tools.size()});
  for (std::size_t i = 0; i < n; ++i) {
    if (i < argvs.size()) mix.push_back(Request::Argv(argvs[i]));
    if (i < scripts.size()) mix.push_back(Request::Shell(std::string(scripts[i])));
    if (i < paths.size()) {
      mix.push_back(paths[i].access == Access::kWrite ? Request::Write(std::string(paths[i].path))
                                                      : Request::Read(std::string(paths[i].path)));
    }
    if (i < tools.size()) mix.push_back(tools[i]);
  }
  Loop(state, mix.size(), [&](std::size_t i) { return engine.Decide(mix[i]); });
}
BENCHMARK(BM_DecideMixed);

// Building the Engine (indexes, the view) once per run: not per decision, but paid per run.
void BM_EngineConstruct(benchmark::State& state) {
  const Policy& p = Backend();
  for (auto _ : state) {
    Engine engine(p, PortableBinding());
    benchmark::DoNotOptimize(engine);
  }
}
BENCHMARK(BM_EngineConstruct);

// The whole load: resolve the name, read base + backend from the embedded copies, lex, parse,
// check, compile, run both profiles' examples.
void BM_LoadBackend(benchmark::State& state) {
  for (auto _ : state) {
    Compiled c = LoadProfile("backend", SearchPath{});
    if (!c.ok()) state.SkipWithError("backend does not compile");
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_LoadBackend)->Unit(benchmark::kMicrosecond);

// The same from text held in memory (what `cagent policy check` of an edited file does).
void BM_CompileTextBackend(benchmark::State& state) {
  const std::string_view text = BackendText();
  for (auto _ : state) {
    Compiled c = CompileText("backend.cagent", text, SearchPath{});
    if (!c.ok()) state.SkipWithError("backend does not compile");
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_CompileTextBackend)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace cagent::policy

BENCHMARK_MAIN();
