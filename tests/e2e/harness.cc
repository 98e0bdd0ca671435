#include "tests/e2e/harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace cagent::testing {
namespace {

constexpr uid_t kNobodyUid = 65534;
constexpr gid_t kNobodyGid = 65534;

void Check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what + ": " + std::strerror(errno));
}

void CopyExecutable(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary);
  if (!in || !out) throw std::runtime_error("cannot copy " + from + " to " + to);
  out << in.rdbuf();
  out.close();
  Check(::chmod(to.c_str(), 0755) == 0, "chmod " + to);
}

void RemoveTree(const std::string& path) {
  // Best effort: the tests' temporary tree.
  const std::string cmd = "rm -rf '" + path + "'";
  [[maybe_unused]] const int rc = std::system(cmd.c_str());
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

Harness& Harness::Get() {
  static Harness h;
  return h;
}

Harness::Harness() {
  const char* as = std::getenv("CAGENT_TEST_AS_USER");
  as_nobody_ = as != nullptr && std::string(as) == "nobody";
  if (as_nobody_ && ::geteuid() != 0) {
    skip_reason_ =
        "the 'nobody' variant needs root to switch users with setpriv; this run is not root, "
        "so the plain variant already exercises cagent unprivileged";
  }
  char tmpl[] = "/tmp/cagent-e2e-XXXXXX";
  Check(::mkdtemp(tmpl) != nullptr, "mkdtemp");
  base_ = tmpl;
  Check(::chmod(base_.c_str(), 0755) == 0, "chmod base");
  bin_dir_ = base_ + "/bin";
  Check(::mkdir(bin_dir_.c_str(), 0755) == 0, "mkdir bin");
  CopyExecutable(CAGENT_BINARY, bin_dir_ + "/cagent");
  CopyExecutable(PROBE_BINARY, bin_dir_ + "/cagent_probe");
  // Where an installed cagent finds cagent-full and its agent: <bin>/../libexec/cagent/.
  std::filesystem::create_directories(base_ + "/libexec/cagent");
  CopyExecutable(FULL_BINARY, base_ + "/libexec/cagent/cagent-full");
  CopyExecutable(AGENT_BINARY, base_ + "/libexec/cagent/cagent-agent");
}

Harness::~Harness() { RemoveTree(base_); }

uid_t Harness::run_uid() const { return as_nobody_ ? kNobodyUid : ::geteuid(); }
gid_t Harness::run_gid() const { return as_nobody_ ? kNobodyGid : ::getegid(); }

std::string Harness::MakeDir(const std::string& prefix) const {
  std::string tmpl = base_ + "/" + prefix + "-XXXXXX";
  Check(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp " + tmpl);
  Check(::chmod(tmpl.c_str(), 0755) == 0, "chmod " + tmpl);
  if (as_nobody_) Check(::chown(tmpl.c_str(), kNobodyUid, kNobodyGid) == 0, "chown " + tmpl);
  return tmpl;
}

std::vector<std::string> Harness::AsUser(const std::vector<std::string>& argv) const {
  std::vector<std::string> out;
  if (as_nobody_) {
    out = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
  }
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::string> Harness::CagentArgv(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {bin_dir_ + "/cagent"};
  argv.insert(argv.end(), args.begin(), args.end());
  return AsUser(argv);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) ADD_FAILURE() << "cannot write " << path;
  ::chmod(path.c_str(), 0644);
}

std::string ToolTurn(const std::string& tool, const nlohmann::json& args) {
  static int n = 0;
  const nlohmann::json call = {
      {"id", "call_t" + std::to_string(++n)}, {"name", tool}, {"arguments", args}};
  return nlohmann::json{{"tool_calls", nlohmann::json::array({call})},
                        {"usage", {{"input_tokens", 100}, {"output_tokens", 10}}}}
             .dump() +
         "\n";
}

void Harness::GiveToRunUser(const std::string& path) const {
  const std::string chown =
      "chown -R " + std::to_string(run_uid()) + ":" + std::to_string(run_gid()) + " '" + path + "'";
  EXPECT_EQ(std::system(chown.c_str()), 0) << chown;
}

void Harness::MakeDemoRepo(const std::string& repo, bool copy) const {
  if (copy) {
    std::filesystem::copy(std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/repo", repo,
                          std::filesystem::copy_options::recursive);
  }
  const std::string init = "cd '" + repo +
                           "' && git init -q -b main . && git add -A && git -c user.name=t "
                           "-c user.email=t@t commit -q -m base";
  EXPECT_EQ(std::system(init.c_str()), 0) << init;
}

int Harness::ShAsUser(const std::string& dir, const std::string& script) const {
  std::vector<std::string> argv = AsUser({"/bin/sh", "-c", script});
  auto cargv = CStrings(argv);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  int status = 0;
  if (!WaitForExit(pid, &status, std::chrono::seconds(60))) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

Harness::Running Harness::Start(const std::vector<std::string>& args,
                                const RunOptions& options) const {
  std::vector<std::string> argv = CagentArgv(args);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (const auto& e : options.extra_env) {
    // An extra variable replaces the inherited one of the same name (getenv finds the first).
    const std::string name = e.substr(0, e.find('=') + 1);
    std::erase_if(env, [&](const std::string& v) { return v.starts_with(name); });
    env.push_back(e);
  }
  auto cargv = CStrings(argv);
  auto cenv = CStrings(env);

  int out_pipe[2], err_pipe[2];
  Check(::pipe2(out_pipe, O_CLOEXEC) == 0 && ::pipe2(err_pipe, O_CLOEXEC) == 0, "pipe2");
  int pty_master = -1, pty_slave = -1;
  if (options.with_pty)
    Check(::openpty(&pty_master, &pty_slave, nullptr, nullptr, nullptr) == 0, "openpty");
  int fd3 = -1;
  if (!options.fd3_path.empty()) {
    fd3 = ::open(options.fd3_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    Check(fd3 >= 0, "open " + options.fd3_path);
  }
  int leak = -1;
  if (options.leak_fd) {
    leak = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    Check(leak >= 0, "open /dev/null");
  }

  const pid_t pid = ::fork();
  Check(pid >= 0, "fork");
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    if (options.with_pty) {
      ::setsid();
      ::ioctl(pty_slave, TIOCSCTTY, 0);
      ::dup2(pty_slave, 0);
    } else {
      const int devnull = ::open("/dev/null", O_RDONLY);
      ::dup2(devnull, 0);
    }
    if (leak >= 0) ::dup2(leak, 9);  // dup2 clears O_CLOEXEC: fd 9 is inherited by cagent
    if (fd3 >= 0) ::dup2(fd3, 3);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ::_exit(126);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (leak >= 0) ::close(leak);
  if (fd3 >= 0) ::close(fd3);
  if (pty_slave >= 0) ::close(pty_slave);
  // The master stays open (leaked deliberately for the test's lifetime is fine: one per test).
  return Running{pid, out_pipe[0], err_pipe[0]};
}

RunResult Harness::Wait(Running& r, std::chrono::seconds timeout) const {
  RunResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(r.pid, SIGKILL);
      result.err += "\n[harness: cagent did not finish within the timeout and was killed]";
      break;
    }
    pollfd fds[2] = {{out_open ? r.out_fd : -1, POLLIN, 0}, {err_open ? r.err_fd : -1, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0) continue;
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  ::close(r.out_fd);
  ::close(r.err_fd);
  int status = 0;
  if (::waitpid(r.pid, &status, 0) != r.pid) status = 0;  // already reaped by the test
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

RunResult Harness::Run(const std::vector<std::string>& args, const RunOptions& options) const {
  Running r = Start(args, options);
  return Wait(r, options.timeout);
}

RunResult Harness::RunJson(const std::vector<std::string>& args, const RunOptions& options) const {
  std::vector<std::string> rewritten;
  std::string json_path;
  bool before_command = true;
  for (const auto& a : args) {
    if (a == "--") before_command = false;
    if (before_command && a == "--json" && json_path.empty()) {
      json_path = MakeDir("json") + "/record.json";
      rewritten.emplace_back("--json-file");
      rewritten.push_back(json_path);
    } else {
      rewritten.push_back(a);
    }
  }
  RunResult result = Run(rewritten, options);
  if (!json_path.empty()) result.json = ReadFile(json_path);
  return result;
}

std::vector<pid_t> FindProcesses(const std::string& token) {
  std::vector<pid_t> found;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return found;
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/cmdline", std::ios::binary);
    std::vector<std::string> args;
    for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
    // Skip zombies: they are gone in every sense that matters and only await their reaper.
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat_line;
    std::getline(stat, stat_line);
    const size_t paren = stat_line.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat_line.size() && stat_line[paren + 2] == 'Z') {
      continue;
    }
    if (std::find(args.begin(), args.end(), token) != args.end()) found.push_back(pid);
  }
  ::closedir(d);
  return found;
}

std::vector<pid_t> WaitForNoProcesses(const std::string& token, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto found = FindProcesses(token);
    if (found.empty() || std::chrono::steady_clock::now() > deadline) return found;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void KillProcesses(const std::string& token) {
  for (pid_t pid : FindProcesses(token)) ::kill(pid, SIGKILL);
  WaitForNoProcesses(token, std::chrono::seconds(5));
}

bool WaitForExit(pid_t pid, int* status, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

HostTcpListener::HostTcpListener() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  Check(fd_ >= 0, "socket");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Check(::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0, "bind");
  Check(::listen(fd_, 8) == 0, "listen");
  socklen_t len = sizeof(sa);
  Check(::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0, "getsockname");
  port_ = ntohs(sa.sin_port);
}

HostTcpListener::~HostTcpListener() { ::close(fd_); }

pid_t SpawnHost(const std::vector<std::string>& argv_in) {
  std::vector<std::string> argv = Harness::Get().AsUser(argv_in);
  auto cargv = CStrings(argv);
  const pid_t pid = ::fork();
  Check(pid >= 0, "fork");
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  return pid;
}

std::unique_ptr<FixtureServer> FixtureServer::Spawn(const std::vector<std::string>& args,
                                                    std::string* error) {
  std::vector<std::string> argv = {
      "/usr/bin/python3", std::string(CAGENT_SOURCE_DIR) + "/tests/egress_fixtures/serve.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::array<int, 2> out{-1, -1};
  if (::pipe2(out.data(), O_CLOEXEC) != 0) {
    *error = "pipe2 failed";
    return nullptr;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out[0]);
    ::close(out[1]);
    *error = "fork failed";
    return nullptr;
  }
  if (pid == 0) {
    ::dup2(out[1], 1);
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(devnull, 2);
    ::execve(cargv[0], cargv.data(), environ);
    ::_exit(127);
  }
  ::close(out[1]);
  return std::unique_ptr<FixtureServer>(
      new FixtureServer(pid, out[0], ::testing::PrintToString(args)));
}

bool FixtureServer::WaitForPort(std::string* error) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{out_fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 200) <= 0) continue;
    std::array<char, 64> buf{};
    const ssize_t n = ::read(out_fd_, buf.data(), buf.size());
    if (n <= 0) break;
    line.append(buf.data(), static_cast<size_t>(n));
  }
  const int port = std::atoi(line.c_str());
  if (port <= 0) {
    *error = "serve.py " + what_ + " printed no port";
    return false;
  }
  port_ = std::to_string(port);
  return true;
}

FixtureServer::~FixtureServer() {
  ::close(out_fd_);
  ::kill(pid_, SIGTERM);
  int status = 0;
  if (!WaitForExit(pid_, &status, std::chrono::seconds(5))) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
}

}  // namespace cagent::testing
