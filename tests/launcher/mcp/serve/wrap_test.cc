// RunMcpWrap (launcher/mcp/serve/wrap.h) with a real sandbox: a tiny stdio MCP server (python3)
// with a tool that reads any file path it is given runs under `cagent mcp wrap`'s machinery. The
// sandbox keeps a planted host file out of its reach (twin: the same server and request outside
// the sandbox read it), the gate refuses a denied tool and tools/list hides it, and the session's
// audit log holds a conforming, intact chain of the calls.
#include "launcher/mcp/serve/wrap.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/json_text.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/audit_schema.h"
#include "launcher/profile/spec.h"
#include "policy/language/loader.h"

namespace cagent::launcher::mcp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSecret = "planted host secret 51f0";

// A stdio MCP server: one JSON-RPC message per line; read_host_file reads the path it is given.
constexpr const char* kServer = R"PY(import json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    mid, method = m.get("id"), m.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-06-18",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "reader", "version": "1"}}})
    elif method == "tools/list":
        tools = [{"name": n, "inputSchema": {"type": "object"}}
                 for n in ("read_host_file", "delete_everything")]
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
    elif method == "tools/call":
        name, args = m["params"]["name"], m["params"].get("arguments", {})
        try:
            if name == "read_host_file":
                text, err = open(args["path"]).read(), False
            elif name == "proxy_env":
                import os
                text, err = os.environ.get("HTTPS_PROXY", "(none)"), False
            else:
                text, err = "ran " + name, False
        except Exception as e:
            text, err = "cannot read: " + str(e), True
        send({"jsonrpc": "2.0", "id": mid,
              "result": {"content": [{"type": "text", "text": text}], "isError": err}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no"}})
)PY";

constexpr const char* kProfile =
    "extends base\n"
    "tools {\n"
    "  allow mcp:read_host_file\n"
    "  deny mcp:delete_everything\n"
    "}\n";

std::string TempDir(const char* prefix) {
  std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
  const char* made = ::mkdtemp(tmpl.data());
  EXPECT_NE(made, nullptr);
  return made != nullptr ? std::string(made) : std::string();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// One line from `fd`, waiting at most 20 s.
std::optional<json> ReadLine(int fd, std::string& buffer) {
  for (;;) {
    const std::size_t nl = buffer.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return json::parse(line, nullptr, false);
    }
    struct pollfd p {
      fd, POLLIN, 0
    };
    if (::poll(&p, 1, 20000) <= 0) return std::nullopt;
    std::array<char, 4096> chunk{};
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n <= 0) return std::nullopt;
    buffer.append(chunk.data(), static_cast<std::size_t>(n));
  }
}

json Request(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

std::string Text(const json& response) {
  std::string out;
  for (const json& c : response["result"]["content"]) out += c.value("text", "");
  return out;
}

class McpWrapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::signal(SIGPIPE, SIG_IGN);
    workspace_ = fs::canonical(TempDir("cagent-wrap-ws")).string();
    secret_dir_ = TempDir("cagent-wrap-secret");
    state_ = TempDir("cagent-wrap-state");
    WriteFile(workspace_ + "/server.py", kServer);
    secret_ = secret_dir_ + "/secret.txt";
    WriteFile(secret_, kSecret);
  }
  void TearDown() override {
    std::error_code ec;
    for (const auto& d : {workspace_, secret_dir_, state_}) fs::remove_all(d, ec);
  }

  std::string workspace_, secret_dir_, secret_, state_;
};

TEST_F(McpWrapTest, TheWrappedServerCannotReadAPlantedHostFileAndDeniedToolsAreRefused) {
  policy::Compiled compiled = policy::CompileText("wrap.cagent", kProfile, policy::SearchPath{});
  ASSERT_TRUE(compiled.ok()) << policy::RenderAll(*compiled.sources, compiled.diags);

  std::array<int, 2> in{};
  std::array<int, 2> out{};
  ASSERT_EQ(::pipe2(in.data(), O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(out.data(), O_CLOEXEC), 0);
  UniqueFd client_w(in[1]);
  UniqueFd wrap_in(in[0]);
  UniqueFd client_r(out[0]);
  UniqueFd wrap_out(out[1]);

  McpWrapOptions o;
  o.policy = compiled.policy;
  o.binding = RunBinding(workspace_);
  o.argv = {"python3", workspace_ + "/server.py"};
  o.approval = broker::ApprovalMode::kNever;
  o.client_in_fd = wrap_in.get();
  o.client_out_fd = wrap_out.get();
  o.state_dir = state_;
  std::string started_log;
  o.on_started = [&](const std::string& path) { started_log = path; };
  std::optional<Result<McpWrapResult>> result;
  std::thread session([&] { result.emplace(RunMcpWrap(o)); });
  // RunMcpWrap has its own descriptors of both ends; ours go now so EOFs are seen.
  auto finish = [&] {
    client_w.Reset();
    session.join();
    wrap_in.Reset();
    wrap_out.Reset();
  };

  std::string buffer;
  auto call = [&](const json& request) -> json {
    const std::string line = JsonText(request) + "\n";
    EXPECT_EQ(::write(client_w.get(), line.data(), line.size()), static_cast<ssize_t>(line.size()));
    return ReadLine(client_r.get(), buffer).value_or(json());
  };
  const json init = call(Request(1, "initialize",
                                 {{"protocolVersion", "2025-06-18"},
                                  {"capabilities", json::object()},
                                  {"clientInfo", {{"name", "test"}, {"version", "1"}}}}));
  if (init.is_null()) {
    finish();
    ASSERT_TRUE(result.has_value());
    if (!*result && (*result).error().code == Error::Code::kUnsupported) {
      GTEST_SKIP() << "no sandbox here: " << (*result).error().Message();
    }
    FAIL() << "no answer to initialize: "
           << (*result ? DescribeOutcome((*result)->sandbox) : (*result).error().Message());
  }
  EXPECT_EQ(init["result"]["serverInfo"]["name"], "reader");

  const json list = call(Request(2, "tools/list"));
  ASSERT_TRUE(list["result"]["tools"].is_array()) << list.dump();
  ASSERT_EQ(list["result"]["tools"].size(), 1U) << list.dump();
  EXPECT_EQ(list["result"]["tools"][0]["name"], "read_host_file");

  // The read the tool exists for, inside the sandbox: the planted file is not there.
  const json read = call(
      Request(3, "tools/call", {{"name", "read_host_file"}, {"arguments", {{"path", secret_}}}}));
  EXPECT_EQ(read["result"]["isError"], true) << read.dump();
  EXPECT_EQ(Text(read).find(kSecret), std::string::npos) << read.dump();
  // A file of the workspace is readable: the tool works, the sandbox is what stops it.
  const json own = call(
      Request(4, "tools/call",
              {{"name", "read_host_file"}, {"arguments", {{"path", workspace_ + "/server.py"}}}}));
  EXPECT_NE(Text(own).find("import json"), std::string::npos) << own.dump();

  const json denied = call(Request(5, "tools/call", {{"name", "delete_everything"}}));
  EXPECT_EQ(denied["result"]["isError"], true) << denied.dump();
  EXPECT_NE(Text(denied).find("delete_everything"), std::string::npos) << denied.dump();
  EXPECT_EQ(Text(denied).find("ran delete_everything"), std::string::npos) << denied.dump();

  finish();
  ASSERT_TRUE(result.has_value());
  ASSERT_TRUE(*result) << (*result).error().Message();
  const McpWrapResult& r = **result;
  EXPECT_EQ(r.ended_by, mcp::RelayEnd::kClientClosed) << r.end_reason;
  EXPECT_EQ(r.calls_allowed, 2U);
  EXPECT_EQ(r.calls_denied, 1U);
  EXPECT_EQ(r.audit_log_path, started_log);
  EXPECT_EQ(r.session_dir, state_ + "/mcp/" + r.run_id);

  // The session's log: intact chain, every line conforming, the calls in it.
  struct stat st {};
  ASSERT_EQ(::stat(r.session_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700U);
  auto chain = broker::VerifyAuditLog(r.audit_log_path);
  ASSERT_TRUE(chain);
  EXPECT_TRUE(chain->ok) << chain->message;
  auto schema = broker::ValidateAuditLogFile(r.audit_log_path);
  ASSERT_TRUE(schema);
  EXPECT_TRUE(schema->ok()) << schema->problems.front().message;
  std::ifstream log(r.audit_log_path);
  std::string all((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find(R"("event":"mcp_call")"), std::string::npos);
  EXPECT_NE(all.find(R"("tools: deny mcp:delete_everything")"), std::string::npos) << all;
  EXPECT_NE(all.find(R"("event":"mcp_result")"), std::string::npos);
  EXPECT_NE(all.find(R"("event":"mcp_list")"), std::string::npos);
  EXPECT_NE(all.find(R"("event":"shutdown")"), std::string::npos);
}

// A file of requests on stdin and a regular file as stdout (`cagent mcp wrap ... < requests >
// answers`): files epoll cannot wait on work, the input's end closes the server's stdin, and
// every answer still arrives before the session ends.
TEST_F(McpWrapTest, RegularFilesAsTheClientsEnds) {
  policy::Compiled compiled = policy::CompileText("wrap.cagent", kProfile, policy::SearchPath{});
  ASSERT_TRUE(compiled.ok());
  const std::string requests = state_ + "/requests.jsonl";
  const std::string answers = state_ + "/answers.jsonl";
  WriteFile(requests,
            JsonText(Request(1, "tools/list")) + "\n" +
                JsonText(Request(2, "tools/call",
                                 {{"name", "read_host_file"},
                                  {"arguments", {{"path", workspace_ + "/server.py"}}}})) +
                "\n" + JsonText(Request(3, "tools/call", {{"name", "delete_everything"}})) + "\n");
  UniqueFd in(::open(requests.c_str(), O_RDONLY | O_CLOEXEC));
  UniqueFd out(::open(answers.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  ASSERT_TRUE(in.valid() && out.valid());
  McpWrapOptions o;
  o.policy = compiled.policy;
  o.binding = RunBinding(workspace_);
  o.argv = {"python3", workspace_ + "/server.py"};
  o.approval = broker::ApprovalMode::kNever;
  o.client_in_fd = in.get();
  o.client_out_fd = out.get();
  o.state_dir = state_;
  auto r = RunMcpWrap(o);
  if (!r && r.error().code == Error::Code::kUnsupported) {
    GTEST_SKIP() << "no sandbox here: " << r.error().Message();
  }
  ASSERT_TRUE(r) << r.error().Message();
  EXPECT_EQ(r->ended_by, mcp::RelayEnd::kClientClosed) << r->end_reason;
  std::ifstream got(answers);
  std::vector<json> lines;
  for (std::string line; std::getline(got, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 3U);
  std::map<int, json> by_id;
  for (const json& l : lines) by_id[l["id"].get<int>()] = l;
  EXPECT_EQ(by_id[1]["result"]["tools"].size(), 1U);
  EXPECT_NE(Text(by_id[2]).find("import json"), std::string::npos);
  EXPECT_EQ(by_id[3]["result"]["isError"], true);
}

// A profile with a hosts section: the server runs with cagent's egress proxy in front of it
// (the proxy variables are set inside), exactly as `cagent exec` would run it.
TEST_F(McpWrapTest, AProfileWithHostsGetsTheEgressProxy) {
  policy::Compiled compiled =
      policy::CompileText("wrap.cagent",
                          "extends base\nnetwork loopback\nhosts {\n  allow example.org:443\n}\n"
                          "tools {\n  allow mcp:proxy_env\n}\n",
                          policy::SearchPath{});
  ASSERT_TRUE(compiled.ok()) << policy::RenderAll(*compiled.sources, compiled.diags);
  const std::string requests = state_ + "/requests.jsonl";
  const std::string answers = state_ + "/answers.jsonl";
  WriteFile(requests, JsonText(Request(1, "tools/call", {{"name", "proxy_env"}})) + "\n");
  UniqueFd in(::open(requests.c_str(), O_RDONLY | O_CLOEXEC));
  UniqueFd out(::open(answers.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  ASSERT_TRUE(in.valid() && out.valid());
  McpWrapOptions o;
  o.policy = compiled.policy;
  o.binding = RunBinding(workspace_);
  o.argv = {"python3", workspace_ + "/server.py"};
  o.approval = broker::ApprovalMode::kNever;
  o.client_in_fd = in.get();
  o.client_out_fd = out.get();
  o.state_dir = state_;
  auto r = RunMcpWrap(o);
  if (!r && r.error().code == Error::Code::kUnsupported) {
    GTEST_SKIP() << "no sandbox here: " << r.error().Message();
  }
  ASSERT_TRUE(r) << r.error().Message();
  EXPECT_TRUE(r->egress);
  std::ifstream got(answers);
  std::string line;
  ASSERT_TRUE(std::getline(got, line));
  const json answer = json::parse(line);
  EXPECT_EQ(Text(answer), "http://127.0.0.1:3128") << line;
}

// A server that does not exit when its input closes is stopped once the grace is over; /dev/null
// as the client's input (EOF at once) works.
TEST_F(McpWrapTest, AServerThatOutstaysItsClientIsStopped) {
  policy::Compiled compiled = policy::CompileText("wrap.cagent", kProfile, policy::SearchPath{});
  ASSERT_TRUE(compiled.ok());
  UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  UniqueFd out(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  McpWrapOptions o;
  o.policy = compiled.policy;
  o.binding = RunBinding(workspace_);
  o.argv = {"python3", "-c", "import time\ntime.sleep(600)"};
  o.approval = broker::ApprovalMode::kNever;
  o.client_in_fd = in.get();
  o.client_out_fd = out.get();
  o.state_dir = state_;
  const auto start = std::chrono::steady_clock::now();
  auto r = RunMcpWrap(o);
  if (!r && r.error().code == Error::Code::kUnsupported) {
    GTEST_SKIP() << "no sandbox here: " << r.error().Message();
  }
  ASSERT_TRUE(r) << r.error().Message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_EQ(r->sandbox.kind, SandboxOutcome::Kind::kSignaled) << DescribeOutcome(r->sandbox);
  EXPECT_EQ(r->ended_by, mcp::RelayEnd::kClientClosed) << r->end_reason;
}

// Twin: the same server and the same request outside the sandbox read the planted file, so the
// refusal above is the sandbox's doing, not a broken tool or path.
TEST_F(McpWrapTest, TwinOutsideTheSandboxTheSameReadSucceeds) {
  const std::string requests = workspace_ + "/requests.jsonl";
  const std::string answers = workspace_ + "/answers.jsonl";
  WriteFile(requests,
            JsonText(Request(3, "tools/call",
                             {{"name", "read_host_file"}, {"arguments", {{"path", secret_}}}})) +
                "\n");
  const std::string cmd = "python3 " + workspace_ + "/server.py < " + requests + " > " + answers;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(answers);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const json answer = json::parse(line);
  EXPECT_EQ(answer["result"]["isError"], false);
  EXPECT_EQ(Text(answer), kSecret);
}

}  // namespace
}  // namespace cagent::launcher::mcp
