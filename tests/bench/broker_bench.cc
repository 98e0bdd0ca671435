// Decision round trip of the policy broker (docs/performance.md, "Broker").
//
// A real launcher::broker::Broker, configured as `cagent run` configures it (the built-in backend
// profile, an audit log on disk, the redactor built from this process's environment), runs its
// io_context on its own thread and serves the broker's end of a real socketpair. The client (this
// thread, blocking I/O, as cagent-agent) says hello; a model call (untimed) is answered by an
// in-process provider with a turn of up to 512 read_file calls (protocol::kMaxToolCallsPerTurn),
// since every tool_request must be a call of the model's latest turn; then for each request:
//   tool_request read_file src/module_<i>.cc  ->  decision (allow)     timed: the decision latency
//   tool_result for it                         ->  result_ack          (keeps calls outstanding
//   low)
// Every path differs, so loop detection never refuses; budgets are unlimited (the backend
// profile's tool-call budget would end the run after a few hundred calls). A second phase sends
// the same calls pipelined (64 requests per write, then their 64 results) for the broker's
// throughput when the client is not waiting.
//
// Usage: cagent_bench_broker [--requests N] [--repetitions R] [--warmup W] [--no-audit]
//                            [--max-poll US]  (BrokerConfig::max_poll; 0 = the broker never polls)
// Prints one line per repetition and the medians; exits 1 if any call is not allowed.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/protocol.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/broker.h"
#include "launcher/broker/redactor.h"
#include "launcher/model/model_provider.h"
#include "policy/language/dump.h"
#include "policy/language/loader.h"

extern char** environ;

namespace {

namespace protocol = cagent::protocol;
namespace broker = cagent::launcher::broker;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "cagent_bench_broker: %s\n", why.c_str());
  std::exit(1);
}

// The agent's side: blocking socket, its own frame decoder.
class Client {
 public:
  explicit Client(cagent::UniqueFd fd) : fd_(std::move(fd)) {}

  void Write(const std::string& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::send(fd_.get(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) Die(std::string("write to the broker: ") + std::strerror(errno));
      done += static_cast<std::size_t>(n);
    }
  }

  void Send(protocol::Kind kind, std::uint64_t id, protocol::Body body) {
    Write(Encode(kind, id, std::move(body)));
  }

  static std::string Encode(protocol::Kind kind, std::uint64_t id, protocol::Body body) {
    auto frame = protocol::EncodeMessage(protocol::Make(kind, id, std::move(body)));
    if (!frame.ok()) Die("encode: " + frame.error().Message());
    return std::move(*frame);
  }

  protocol::Message Receive() {
    for (;;) {
      if (auto payload = decoder_.Next()) {
        auto decoded = protocol::Decode(*payload, /*from_agent=*/false);
        if (auto* e = std::get_if<protocol::DecodeError>(&decoded)) Die("decode: " + e->message);
        return std::get<protocol::Message>(std::move(decoded));
      }
      const ssize_t n = ::read(fd_.get(), buf_.data(), buf_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) Die("the broker closed the connection");
      if (!decoder_.Feed(std::string_view(buf_.data(), static_cast<std::size_t>(n))).ok()) {
        Die("bad frame from the broker");
      }
    }
  }

  protocol::Message Expect(protocol::Kind kind, std::uint64_t id) {
    protocol::Message m = Receive();
    if (m.header.kind == protocol::Kind::kError) {
      Die("error reply to " + std::to_string(id) + ": " +
          std::get<protocol::ErrorReply>(m.body).message);
    }
    if (m.header.kind != kind || m.header.id != id) {
      Die("expected " + std::string(protocol::KindName(kind)) + " " + std::to_string(id) +
          ", got " + std::string(protocol::KindName(m.header.kind)) + " " +
          std::to_string(m.header.id));
    }
    return m;
  }

 private:
  cagent::UniqueFd fd_;
  protocol::FrameDecoder decoder_;
  std::vector<char> buf_ = std::vector<char>(64 * 1024);
};

protocol::ToolRequest ReadFile(std::uint64_t n) {
  const std::string path = "src/module_" + std::to_string(n) + ".cc";
  return protocol::ToolRequest{
      "call_" + std::to_string(n), "read_file", nlohmann::json{{"path", path}}, {path}};
}

// The model: each call answers with read_file calls for the block of requests the client set up.
class BenchModel final : public cagent::launcher::model::ModelProvider {
 public:
  explicit BenchModel(boost::asio::io_context& io) : io_(io) {}
  void SetBlock(std::uint64_t first, std::uint64_t count) {
    first_ = first;
    count_ = count;
  }
  [[nodiscard]] protocol::ModelInfo Info() const override {
    return protocol::ModelInfo{"bench", "bench", 100000, 4096};
  }
  void Call(cagent::launcher::model::ModelRequest /*request*/,
            std::function<void(cagent::launcher::model::ModelOutcome)> done) override {
    cagent::launcher::model::ModelResponse r;
    r.turn.stop_reason = protocol::StopReason::kToolCalls;
    for (std::uint64_t n = first_; n < first_ + count_; ++n) {
      const protocol::ToolRequest t = ReadFile(n);
      r.turn.tool_calls.push_back(protocol::ToolCall{t.call_id, t.tool, t.args, ""});
    }
    boost::asio::post(io_,
                      [done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
  }
  void Cancel() override {}

 private:
  boost::asio::io_context& io_;
  std::uint64_t first_ = 0;
  std::uint64_t count_ = 0;
};

protocol::ToolResult ToolOk(std::uint64_t request) {
  return protocol::ToolResult{request, true, "", "int module() { return 0; }\n", {}, ""};
}

void CheckAllowed(const protocol::Message& m) {
  const auto& d = std::get<protocol::Decision>(m.body);
  if (d.verdict != protocol::Verdict::kAllow) {
    Die("request " + std::to_string(m.header.id) + " was not allowed: " +
        std::string(protocol::VerdictName(d.verdict)) + " (" + d.rule + ": " + d.reason + ")");
  }
}

struct Options {
  std::uint64_t requests = 20000;
  int repetitions = 5;
  std::uint64_t warmup = 1000;
  bool audit = true;
  std::size_t window = 64;
  std::int64_t max_poll_us = -1;  // -1: BrokerConfig's default
};

struct Sample {
  double p50_us = 0;
  double p99_us = 0;
  double mean_us = 0;
  double decisions_per_s = 0;  // closed loop: requests / time spent waiting for decisions
  double calls_per_s = 0;      // closed loop: full calls (request, decision, result, ack) / s
  double pipelined_calls_per_s = 0;
  double cpu_us_per_call = 0;  // closed loop, both threads (client and broker), user + system
  std::uint64_t audit_entries = 0;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

// CPU time (user + system) of the whole process, both threads, in seconds.
double ProcessCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

Sample RunOnce(const Options& o, const std::shared_ptr<const cagent::policy::Policy>& policy,
               const broker::Redactor& redactor, const std::filesystem::path& dir, int rep) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) Die("socketpair");
  cagent::UniqueFd broker_end(pair[0]);
  Client client{cagent::UniqueFd(pair[1])};

  const std::string digest = cagent::Sha256Hex(cagent::policy::Dump(*policy, false));
  std::unique_ptr<broker::AuditLog> audit;
  if (o.audit) {
    const std::string path = (dir / ("audit-" + std::to_string(rep) + ".jsonl")).string();
    auto opened = broker::AuditLog::Open(path, "bench", digest);
    if (!opened.ok()) Die("audit log: " + opened.error().Message());
    audit = std::make_unique<broker::AuditLog>(std::move(*opened));
  }

  boost::asio::io_context io;
  broker::BrokerConfig config;
  config.run_id = "bench";
  config.policy = policy;
  config.bindings = cagent::policy::Binding{(dir / "workspace").string(), (dir / "home").string()};
  config.policy_digest = digest;
  config.task = "benchmark";
  config.budgets = broker::Budgets{};  // unlimited: see the file comment
  if (o.max_poll_us >= 0) config.max_poll = std::chrono::microseconds(o.max_poll_us);
  BenchModel model(io);
  broker::BrokerServices services;
  services.audit = audit.get();
  services.redactor = &redactor;
  services.model = &model;
  broker::Broker session(io, std::move(config), services);
  session.Start(std::move(broker_end));
  std::thread io_thread([&io] { io.run(); });

  std::uint64_t id = 0;
  client.Send(protocol::Kind::kHello, ++id, protocol::Hello{"cagent-bench", {protocol::kVersion}});
  client.Expect(protocol::Kind::kWelcome, id);
  // A model turn making the calls [first, first + count) (untimed).
  auto model_turn = [&](std::uint64_t first, std::uint64_t count) {
    model.SetBlock(first, count);
    client.Send(protocol::Kind::kModelCall, ++id, protocol::ModelCall{"bench", {}});
    client.Expect(protocol::Kind::kModelResult, id);
  };
  constexpr std::uint64_t kBlock = protocol::kMaxToolCallsPerTurn;

  std::vector<double> latencies;
  latencies.reserve(o.requests);
  double waiting_s = 0;
  auto loop_start = Clock::now();
  double cpu_start = 0;
  for (std::uint64_t i = 0; i < o.warmup + o.requests; ++i) {
    if (i == o.warmup) {
      loop_start = Clock::now();
      cpu_start = ProcessCpuSeconds();
    }
    if (i % kBlock == 0) {
      const auto m0 = Clock::now();
      model_turn(i, std::min<std::uint64_t>(kBlock, o.warmup + o.requests - i));
      if (i >= o.warmup) loop_start += Clock::now() - m0;  // not a decision: not counted
    }
    const std::uint64_t req = ++id;
    const auto t0 = Clock::now();
    client.Send(protocol::Kind::kToolRequest, req, ReadFile(i));
    const protocol::Message decision = client.Expect(protocol::Kind::kDecision, req);
    const auto t1 = Clock::now();
    CheckAllowed(decision);
    client.Send(protocol::Kind::kToolResult, ++id, ToolOk(req));
    client.Expect(protocol::Kind::kResultAck, id);
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    if (i >= o.warmup) {
      latencies.push_back(us);
      waiting_s += us / 1e6;
    }
  }
  const double measured_loop_s = std::chrono::duration<double>(Clock::now() - loop_start).count();
  const double loop_cpu_s = ProcessCpuSeconds() - cpu_start;

  // Pipelined: `window` requests in one write, then their results in one write.
  const auto pipe_start = Clock::now();
  Clock::duration pipe_start_adjust{0};  // time spent in model turns, left out
  std::uint64_t sent = 0;
  const std::uint64_t base = o.warmup + o.requests;
  while (sent < o.requests) {
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(o.window, o.requests - sent));
    if (sent % kBlock == 0) {
      const auto m0 = Clock::now();
      model_turn(base + sent, std::min<std::uint64_t>(kBlock, o.requests - sent));
      pipe_start_adjust += Clock::now() - m0;
    }
    std::string batch;
    const std::uint64_t first = id + 1;
    for (std::size_t k = 0; k < n; ++k) {
      batch += Client::Encode(protocol::Kind::kToolRequest, ++id, ReadFile(base + sent + k));
    }
    client.Write(batch);
    for (std::size_t k = 0; k < n; ++k) {
      CheckAllowed(client.Expect(protocol::Kind::kDecision, first + k));
    }
    batch.clear();
    const std::uint64_t first_result = id + 1;
    for (std::size_t k = 0; k < n; ++k) {
      batch += Client::Encode(protocol::Kind::kToolResult, ++id, ToolOk(first + k));
    }
    client.Write(batch);
    for (std::size_t k = 0; k < n; ++k) client.Expect(protocol::Kind::kResultAck, first_result + k);
    sent += n;
  }
  const double pipe_s =
      std::chrono::duration<double>(Clock::now() - pipe_start - pipe_start_adjust).count();

  client.Send(protocol::Kind::kFinish, ++id, protocol::Finish{"done", "benchmark"});
  client.Expect(protocol::Kind::kAck, id);
  io_thread.join();
  if (session.outcome().status != broker::BrokerOutcome::Status::kFinished) {
    Die("the broker did not finish: " + session.outcome().reason);
  }

  Sample s;
  s.p50_us = Percentile(latencies, 0.50);
  s.p99_us = Percentile(latencies, 0.99);
  double sum = 0;
  for (double v : latencies) sum += v;
  s.mean_us = sum / static_cast<double>(latencies.size());
  s.decisions_per_s = static_cast<double>(o.requests) / waiting_s;
  s.calls_per_s = static_cast<double>(o.requests) / measured_loop_s;
  s.pipelined_calls_per_s = static_cast<double>(o.requests) / pipe_s;
  s.cpu_us_per_call = loop_cpu_s * 1e6 / static_cast<double>(o.requests);
  s.audit_entries = audit ? audit->entries() : 0;
  return s;
}

std::uint64_t ParseCount(const char* flag, const char* value) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(value, &end, 10);
  if (end == value || *end != '\0' || v == 0) Die(std::string(flag) + " needs a positive number");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-audit") {
      o.audit = false;
    } else if (a == "--max-poll" && i + 1 < argc) {
      o.max_poll_us = std::strcmp(argv[i + 1], "0") == 0
                          ? 0
                          : static_cast<std::int64_t>(ParseCount(argv[i], argv[i + 1]));
      ++i;
    } else if ((a == "--requests" || a == "--repetitions" || a == "--warmup") && i + 1 < argc) {
      const std::uint64_t v = ParseCount(argv[i], argv[i + 1]);
      ++i;
      if (a == "--requests") o.requests = v;
      if (a == "--repetitions") o.repetitions = static_cast<int>(v);
      if (a == "--warmup") o.warmup = v;
    } else {
      Die("usage: cagent_bench_broker [--requests N] [--repetitions R] [--warmup W] [--no-audit] "
          "[--max-poll US]");
    }
  }

  cagent::policy::Compiled compiled =
      cagent::policy::LoadProfile("backend", cagent::policy::SearchPath{});
  if (!compiled.ok()) Die("cannot load the backend profile");
  const std::shared_ptr<const cagent::policy::Policy> policy = compiled.policy;

  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<std::string> scrub;
  for (const auto& p : policy->env_scrub) scrub.push_back(p.name.pattern());
  const broker::Redactor redactor = broker::Redactor::FromEnvironment(env, scrub);

  std::string tmpl =
      (std::filesystem::temp_directory_path() / "cagent-bench-broker-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp");
  const std::filesystem::path dir = tmpl;

  std::printf(
      "broker decision round trip: backend profile, %s, %llu requests (+%llu warm-up), "
      "pipelined window %zu, max poll %s\n",
      o.audit ? "audit log on disk" : "no audit log", static_cast<unsigned long long>(o.requests),
      static_cast<unsigned long long>(o.warmup), o.window,
      o.max_poll_us < 0 ? "default" : (std::to_string(o.max_poll_us) + " us").c_str());
  std::printf("%-6s %9s %9s %9s %12s %10s %18s %13s %8s\n", "rep", "p50 us", "p99 us", "mean us",
              "decisions/s", "calls/s", "pipelined calls/s", "cpu us/call", "audit");
  std::vector<Sample> samples;
  for (int rep = 0; rep < o.repetitions; ++rep) {
    const Sample s = RunOnce(o, policy, redactor, dir, rep);
    samples.push_back(s);
    std::printf("%-6d %9.1f %9.1f %9.1f %12.0f %10.0f %18.0f %13.1f %8llu\n", rep + 1, s.p50_us,
                s.p99_us, s.mean_us, s.decisions_per_s, s.calls_per_s, s.pipelined_calls_per_s,
                s.cpu_us_per_call, static_cast<unsigned long long>(s.audit_entries));
    std::fflush(stdout);
  }
  auto med = [&](double Sample::*field) {
    std::vector<double> v;
    for (const Sample& s : samples) v.push_back(s.*field);
    return Median(v);
  };
  std::printf("%-6s %9.1f %9.1f %9.1f %12.0f %10.0f %18.0f %13.1f\n", "median",
              med(&Sample::p50_us), med(&Sample::p99_us), med(&Sample::mean_us),
              med(&Sample::decisions_per_s), med(&Sample::calls_per_s),
              med(&Sample::pipelined_calls_per_s), med(&Sample::cpu_us_per_call));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
