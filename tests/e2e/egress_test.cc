// Filtered egress through cagent's own commands (issue 16): what exec reports in --json, an `ask`
// host answered at the approval prompt on a pty (approved and declined), and a `cagent run` whose
// agent and verification reach an allowed host and not another, with every connection in the
// run's audit log and in `cagent log`. The servers are this process's own, on the host's
// 127.0.0.2; the sandbox reaches them only through the proxy (its network namespace has lo only).
// The real-client matrix (curl, git, pip, npm, TLS) is egress_clients_test.cc.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// A tiny HTTP server on 127.0.0.2 (an ephemeral port): every request gets `body`.
class TinyServer {
 public:
  explicit TinyServer(std::string body) : body_(std::move(body)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000002);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd_, 64) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.2";
      return;
    }
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TinyServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int requests() const { return requests_; }

 private:
  void Serve() {
    while (!stop_) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(c, buf, sizeof(buf));
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      ++requests_;
      const std::string resp =
          "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body_.size()) +
          "\r\nConnection: close\r\n\r\n" + body_;
      (void)!::write(c, resp.data(), resp.size());
      ::close(c);
    }
  }
  std::string body_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
};

json LastJson(const std::string& out) {
  const auto brace = out.rfind("\n{");
  const std::string text = brace == std::string::npos ? out : out.substr(brace + 1);
  return json::parse(text, nullptr, false);
}

class EgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Harness::Get().skip_reason().empty()) GTEST_SKIP() << Harness::Get().skip_reason();
    if (::access("/usr/bin/curl", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/curl";
    ws_ = Harness::Get().MakeDir("egress");
  }
  std::string Url(const std::string& host) const {
    return "http://" + host + ":" + std::to_string(server_.port()) + "/f";
  }
  std::string Resolve(const std::string& host) const {
    return host + ":" + std::to_string(server_.port()) + ":127.0.0.2";
  }
  TinyServer server_{"egress-e2e-body\n"};
  std::string ws_;
};

TEST_F(EgressTest, ExecJsonListsEveryConnectionWithItsVerdict) {
  const RunResult r = Harness::Get().RunJson(
      {"exec", "-w", ws_, "--json", "--allow-host", "pkgs.test:" + std::to_string(server_.port()),
       "--resolve", Resolve("pkgs.test"), "--resolve", Resolve("other.test"), "--", "sh", "-c",
       "curl -sS " + Url("pkgs.test") + "; curl -sS " + Url("other.test")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("egress-e2e-body"));
  EXPECT_THAT(r.out, Not(HasSubstr("cagent_version")))
      << "the record is not in the command's stdout";
  const json j = LastJson(r.json);
  ASSERT_TRUE(j.is_object()) << r.json;
  const json& conns = j["egress"]["connections"];
  ASSERT_EQ(conns.size(), 2U) << j.dump(2);
  EXPECT_EQ(conns[0]["host"], "pkgs.test");
  EXPECT_EQ(conns[0]["verdict"], "allow");
  EXPECT_EQ(conns[0]["address"], "127.0.0.2");
  EXPECT_GT(conns[0]["bytes_down"].get<int>(), 16);
  EXPECT_EQ(conns[1]["host"], "other.test");
  EXPECT_EQ(conns[1]["verdict"], "deny");
  EXPECT_THAT(conns[1]["reason"].get<std::string>(), HasSubstr("no hosts rule allows"));
  EXPECT_EQ(server_.requests(), 1) << "only the allowed request reaches the server";
}

TEST_F(EgressTest, WithoutFilteredEgressTheSameCommandReachesNothing) {
  // The twin of the test above: no --allow-host, so no proxy; the sandbox's namespace has lo only
  // and the host's 127.0.0.2 is not in it.
  const RunResult r =
      Harness::Get().Run({"exec", "-w", ws_, "--", "curl", "-sS", "-m", "5",
                          "http://127.0.0.2:" + std::to_string(server_.port()) + "/f"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, Not(HasSubstr("egress-e2e-body")));
  EXPECT_EQ(server_.requests(), 0);
}

// Runs cagent on a pty, answers the first approval prompt with `answer` and returns everything
// cagent wrote to the terminal.
std::string RunOnPty(const std::vector<std::string>& args, const std::string& answer, int* status) {
  const std::vector<std::string> argv = Harness::Get().CagentArgv(args);
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid == 0) {
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  std::string seen;
  bool answered = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) {
      char buf[4096];
      const ssize_t n = ::read(master, buf, sizeof(buf));
      if (n > 0) {
        seen.append(buf, static_cast<size_t>(n));
      } else {
        // EIO: the last process holding the terminal closed it; cagent is ending.
        int st = 0;
        if (WaitForExit(pid, &st, std::chrono::seconds(30))) {
          *status = st;
          ::close(master);
          return seen;
        }
        break;
      }
    }
    if (!answered && seen.find("asks to connect") != std::string::npos &&
        seen.find("[o]nce") != std::string::npos) {
      (void)!::write(master, answer.data(), answer.size());
      answered = true;
    }
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      // Drain what is left.
      char buf[4096];
      ssize_t n;
      while ((n = ::read(master, buf, sizeof(buf))) > 0) seen.append(buf, static_cast<size_t>(n));
      *status = st;
      ::close(master);
      return seen;
    }
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, status, 0);
  ::close(master);
  ADD_FAILURE() << "cagent did not finish on the pty; it wrote:\n" << seen;
  return seen;
}

class EgressAskTest : public EgressTest {
 protected:
  std::vector<std::string> Args() {
    const std::string profile = ws_ + "/ask.cagent";
    WriteFile(profile, "extends backend\napproval on-request\nhosts {\n  ask pkgs.test:" +
                           std::to_string(server_.port()) + "\n}\n");
    return {"exec", "-w", ws_, "--profile", profile, "--best-effort", "cgroup",
            // The prompt is cagent's, on the caller's terminal: with the command on its own pty
            // (the default on a terminal) the terminal is the command's and asks are refused.
            "--no-tty", "--resolve", Resolve("pkgs.test"), "--", "sh", "-c",
            "curl -sS " + Url("pkgs.test") + " > " + ws_ + "/got; echo curl-done"};
  }
};

TEST_F(EgressAskTest, AnAskHostApprovedAtThePromptIsReached) {
  if (Harness::Get().as_nobody()) GTEST_SKIP() << "the pty belongs to the test's user";
  int status = 0;
  const std::string seen = RunOnPty(Args(), "o\n", &status);
  ASSERT_TRUE(WIFEXITED(status)) << seen;
  EXPECT_EQ(WEXITSTATUS(status), 0) << seen;
  EXPECT_THAT(seen, HasSubstr("ask pkgs.test"));  // the prompt names the rule
  EXPECT_EQ(ReadFile(ws_ + "/got"), "egress-e2e-body\n") << seen;
  EXPECT_EQ(server_.requests(), 1);
}

TEST_F(EgressAskTest, AnAskHostDeclinedAtThePromptIsRefused) {
  if (Harness::Get().as_nobody()) GTEST_SKIP() << "the pty belongs to the test's user";
  int status = 0;
  const std::string seen = RunOnPty(Args(), "d\n", &status);
  ASSERT_TRUE(WIFEXITED(status)) << seen;
  EXPECT_THAT(ReadFile(ws_ + "/got"), HasSubstr("refused")) << seen;
  EXPECT_THAT(ReadFile(ws_ + "/got"), HasSubstr("declined"));
  EXPECT_EQ(server_.requests(), 0);
}

class EgressRunTest : public EgressTest {
 protected:
  void SetUp() override {
    EgressTest::SetUp();
    if (IsSkipped()) return;
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
    auto& h = Harness::Get();
    repo_ = ws_ + "/repo";
    h.MakeDemoRepo(repo_);
    state_ = ws_ + "/state";
    h.GiveToRunUser(ws_);
  }
  std::string repo_, state_;
};

TEST_F(EgressRunTest, TheAgentAndVerificationReachAnAllowedHostAndEveryConnectionIsAudited) {
  const std::string port = std::to_string(server_.port());
  const std::string fetch =
      "python3 -c \"import urllib.request as u; "
      "print(u.urlopen('http://pkgs.test:" +
      port + "/f').read().decode().strip())\"";
  const std::string fetch_other =
      "python3 -c \"import urllib.request as u; u.urlopen('http://other.test:" + port + "/f')\"";
  const std::string profile = ws_ + "/egress.cagent";
  WriteFile(profile, "extends " + repo_ +
                         "/.cagent/fix-add.cagent\n"
                         "hosts {\n  allow pkgs.test:" +
                         port + "\n}\nverify {\n  run \"" +
                         std::string("python3 -c \\\"import urllib.request as u; "
                                     "u.urlopen('http://pkgs.test:") +
                         port + "/f')\\\"\"\n}\n");
  std::string session = ToolTurn("run_command", {{"command", fetch}}) +
                        ToolTurn("run_command", {{"command", fetch_other}});
  session += ReadFile(std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/session.jsonl");
  WriteFile(ws_ + "/session.jsonl", session);
  RunOptions o;
  o.extra_env = {"XDG_STATE_HOME=" + state_};
  o.timeout = std::chrono::seconds(120);
  const RunResult r = Harness::Get().Run(
      {"run", "--profile", profile, "--repo", repo_, "--model", "replay:" + ws_ + "/session.jsonl",
       "--approve", "never", "--resolve", "pkgs.test:" + port + ":127.0.0.2", "--resolve",
       "other.test:" + port + ":127.0.0.2", "--json",
       std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/task.md"},
      o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json res = LastJson(r.out);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "completed") << r.out;
  // The record sums up the agent's egress.
  EXPECT_EQ(res["egress"]["relayed"], 1) << res.dump(2);
  EXPECT_EQ(res["egress"]["refused"], 1);
  EXPECT_EQ(res["egress"]["hosts_refused"][0], "other.test:" + port);
  // The agent's fetch and the verification's both reached the server; the other host did not.
  EXPECT_EQ(server_.requests(), 2);
  std::vector<json> egress;
  std::ifstream log(res["event_log"].get<std::string>());
  std::string line;
  while (std::getline(log, line)) {
    const json e = json::parse(line, nullptr, false);
    if (e.is_object() && e["event"] == "egress") egress.push_back(e);
  }
  ASSERT_EQ(egress.size(), 3U) << r.out;
  EXPECT_EQ(egress[0]["verdict"], "allow");
  EXPECT_EQ(egress[0]["detail"]["host"], "pkgs.test");
  EXPECT_EQ(egress[0]["detail"]["phase"], "agent");
  EXPECT_EQ(egress[1]["verdict"], "deny");
  EXPECT_EQ(egress[1]["detail"]["host"], "other.test");
  EXPECT_EQ(egress[2]["verdict"], "allow");
  EXPECT_EQ(egress[2]["detail"]["phase"], "verify");
  // The chain holds with the new entries, and `cagent log` shows them.
  const RunResult verify =
      Harness::Get().Run({"log", "verify", res["event_log"].get<std::string>()});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const RunResult shown = Harness::Get().Run({"log", res["run_id"].get<std::string>()}, o);
  EXPECT_THAT(shown.out, HasSubstr("deny other.test:" + port)) << shown.out << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("allow pkgs.test:" + port));
}

}  // namespace
}  // namespace cagent::testing
