// LaunchSpec::net_listeners and file_binds (label: sandbox): sockets made inside the sandbox's
// network namespace and served by this process from outside, and a host file shown over a file
// of the view (how the egress proxy and its DNS stub reach the sandbox).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "launcher/sandbox/netns.h"
#include "launcher/sandbox/sandbox.h"

namespace cagent::launcher {
namespace {

const std::string& Workspace() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/cagent-listeners-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    return std::string(tmpl);
  }();
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A client in the sandbox: connects to 127.0.0.1:PORT inside and prints what it reads.
std::vector<std::string> Client(int port, const std::string& out) {
  return {"/usr/bin/python3", "-c",
          "import socket,sys\n"
          "s=socket.create_connection(('127.0.0.1'," +
              std::to_string(port) +
              "),timeout=5)\n"
              "open('" +
              out + "','wb').write(s.recv(100))\n"};
}

TEST(ListenersTest, ASocketMadeInsideIsServedFromOutside) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/python3";
  const std::string out = Workspace() + "/got";
  LaunchSpec spec = DefaultLaunchSpec(Workspace(), Client(3128, out));
  spec.net_listeners.push_back({NetListener::Kind::kTcp, "127.0.0.1", 3128});
  std::thread server;
  SandboxControl control;
  sockaddr_in local{};
  control.on_listeners = [&](std::vector<UniqueFd> fds) -> Status {
    if (fds.size() != 1) return PlainError("expected one listener");
    socklen_t len = sizeof(local);
    ::getsockname(fds[0].get(), reinterpret_cast<sockaddr*>(&local), &len);
    server = std::thread([fd = std::move(fds[0])] {
      const int c = ::accept(fd.get(), nullptr, nullptr);
      if (c >= 0) {
        (void)!::write(c, "from outside", 12);
        ::close(c);
      }
    });
    return Ok{};
  };
  auto outcome = RunSandbox(spec, control);
  if (server.joinable()) server.join();
  ASSERT_TRUE(outcome.ok()) << outcome.error().Message();
  EXPECT_EQ(outcome->kind, SandboxOutcome::Kind::kExited) << DescribeOutcome(*outcome);
  EXPECT_EQ(ReadFile(out), "from outside");
  // The socket is bound to 127.0.0.1:3128 of the sandbox's namespace, not of this one: nothing
  // listens on this process's 127.0.0.1:3128 because of it.
  EXPECT_EQ(ntohs(local.sin_port), 3128);
}

TEST(ListenersTest, WithoutTheListenerNothingAnswersInside) {
  // The twin: the same client, no listener; the sandbox's loopback has nothing on the port.
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/python3";
  const std::string out = Workspace() + "/got-none";
  auto outcome = RunSandbox(DefaultLaunchSpec(Workspace(), Client(3128, out)));
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->kind, SandboxOutcome::Kind::kExited);
  EXPECT_NE(outcome->exit_code, 0);  // ConnectionRefusedError
  EXPECT_EQ(ReadFile(out), "");
}

TEST(ListenersTest, LowPortsAndUdpWork) {
  LaunchSpec spec = DefaultLaunchSpec(Workspace(), {"true"});
  spec.net_listeners.push_back({NetListener::Kind::kUdp, "127.0.0.1", 53});
  spec.net_listeners.push_back({NetListener::Kind::kTcp, "0.0.0.0", 443});
  spec.net_listeners.push_back({NetListener::Kind::kTcp, "::1", 80});
  SandboxControl control;
  std::vector<int> types;
  control.on_listeners = [&](std::vector<UniqueFd> fds) -> Status {
    for (const UniqueFd& fd : fds) {
      int type = 0;
      socklen_t len = sizeof(type);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_TYPE, &type, &len);
      types.push_back(type);
    }
    return Ok{};
  };
  auto outcome = RunSandbox(spec, control);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->kind, SandboxOutcome::Kind::kExited) << DescribeOutcome(*outcome);
  EXPECT_EQ(types, (std::vector<int>{SOCK_DGRAM, SOCK_STREAM, SOCK_STREAM}));
}

TEST(ListenersTest, AListenerThatCannotBeMadeFailsTheLaunch) {
  LaunchSpec spec = DefaultLaunchSpec(Workspace(), {"true"});
  // 192.0.2.1 is no address of the sandbox's namespace: bind fails (EADDRNOTAVAIL).
  spec.net_listeners.push_back({NetListener::Kind::kTcp, "192.0.2.1", 3128});
  bool called = false;
  SandboxControl control;
  control.on_listeners = [&](std::vector<UniqueFd>) -> Status {
    called = true;
    return Ok{};
  };
  auto outcome = RunSandbox(spec, control);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->kind, SandboxOutcome::Kind::kSetupFailed);
  EXPECT_EQ(outcome->err, EADDRNOTAVAIL);
  EXPECT_NE(outcome->error.find("egress proxy's sockets"), std::string::npos) << outcome->error;
  EXPECT_FALSE(called);
}

TEST(ListenersTest, AFailingCallbackStopsTheLaunch) {
  const std::string marker = Workspace() + "/ran";
  LaunchSpec spec = DefaultLaunchSpec(Workspace(), {"/bin/sh", "-c", "touch " + marker});
  spec.net_listeners.push_back({NetListener::Kind::kTcp, "127.0.0.1", 3128});
  SandboxControl control;
  control.on_listeners = [](std::vector<UniqueFd>) -> Status { return PlainError("no proxy"); };
  auto outcome = RunSandbox(spec, control);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->kind, SandboxOutcome::Kind::kSetupFailed);
  EXPECT_EQ(outcome->failed_step, "start the egress proxy");
  EXPECT_NE(::access(marker.c_str(), F_OK), 0) << "the command ran without its proxy";
}

TEST(ListenersTest, ListenersNeedLoopbackNetworking) {
  LaunchSpec spec = DefaultLaunchSpec(Workspace(), {"true"});
  spec.network = NetworkMode::kNone;
  spec.net_listeners.push_back({NetListener::Kind::kTcp, "127.0.0.1", 3128});
  EXPECT_FALSE(ValidateLaunchSpec(spec).ok());
}

TEST(FileBindsTest, AHostFileIsShownOverAFileOfTheView) {
  if (::access("/etc/hostname", R_OK) != 0) GTEST_SKIP() << "needs /etc/hostname";
  const std::string source = Workspace() + "/hostname.override";
  std::ofstream(source) << "shown instead\n";
  const std::string out = Workspace() + "/seen";
  LaunchSpec spec = DefaultLaunchSpec(Workspace(), {"/bin/sh", "-c", "cat /etc/hostname > " + out});
  spec.file_binds.push_back({source, "/etc/hostname"});
  auto outcome = RunSandbox(spec);
  ASSERT_TRUE(outcome.ok());
  ASSERT_EQ(outcome->kind, SandboxOutcome::Kind::kExited) << DescribeOutcome(*outcome);
  EXPECT_EQ(ReadFile(out), "shown instead\n");
  // Twin: without the bind the view shows the host's file.
  LaunchSpec plain =
      DefaultLaunchSpec(Workspace(), {"/bin/sh", "-c", "cat /etc/hostname > " + out});
  auto twin = RunSandbox(plain);
  ASSERT_TRUE(twin.ok());
  EXPECT_EQ(ReadFile(out), ReadFile("/etc/hostname"));
  // Read-only inside.
  LaunchSpec write = DefaultLaunchSpec(Workspace(), {"/bin/sh", "-c", "echo x > /etc/hostname"});
  write.file_binds.push_back({source, "/etc/hostname"});
  auto w = RunSandbox(write);
  ASSERT_TRUE(w.ok());
  EXPECT_NE(w->exit_code, 0);
  EXPECT_EQ(ReadFile(source), "shown instead\n");
}

}  // namespace
}  // namespace cagent::launcher
