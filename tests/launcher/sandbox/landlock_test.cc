// Landlock: the ruleset is only ever applied in a forked child; the test runner stays unconfined.
// Every guard is shown both ways: the same attempt in a child without the ruleset succeeds.
#include "launcher/sandbox/landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cagent::launcher {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Exit code of a child whose ruleset could not be applied (distinct from any errno we expect).
constexpr int kApplyFailed = 200;

// Runs `body` in a forked child with no_new_privs set and, when `ruleset` is not null, the
// ruleset applied. Returns the child's exit code: `body`'s result (0 or an errno), kApplyFailed,
// or 128 + signal.
int RunChild(const LandlockRuleset* ruleset, const std::function<int()>& body) {
  (void)std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(kApplyFailed);
    if (ruleset != nullptr) {
      const ChildResult r = ruleset->Apply();
      if (!r.ok) {
        (void)std::fprintf(stderr, "Apply failed: %s: %s\n",
                           ruleset->DescribeFailure(r.detail).c_str(), std::strerror(r.err));
        ::_exit(kApplyFailed);
      }
    }
    ::_exit(body());
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// 0 or errno: opens `path` for reading and reads from it.
int ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char c;
  const int r = ::read(fd, &c, 1) < 0 ? errno : 0;
  ::close(fd);
  return r;
}

// 0 or errno: creates (or truncates) `path` and writes `text`.
int WriteFile(const std::string& path, const std::string& text = "x", mode_t mode = 0644) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return errno;
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int r = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : EIO);
  ::close(fd);
  return r;
}

// 0 or errno: copies `from` to a new file `to` with `mode`.
int CopyFile(const std::string& from, const std::string& to, mode_t mode) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return errno;
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (out < 0) {
    const int e = errno;
    ::close(in);
    return e;
  }
  char buf[65536];
  ssize_t n;
  int r = 0;
  while ((n = ::read(in, buf, sizeof(buf))) > 0) {
    if (::write(out, buf, static_cast<size_t>(n)) != n) {
      r = errno != 0 ? errno : EIO;
      break;
    }
  }
  if (n < 0) r = errno;
  ::close(in);
  ::close(out);
  return r;
}

// Replaces the calling (child) process with `path`; returns errno if execve fails. /usr/bin/true
// copies exit 0.
int Exec(const std::string& path) {
  char* const argv[] = {const_cast<char*>(path.c_str()), nullptr};
  char* const envp[] = {nullptr};
  ::execve(path.c_str(), argv, envp);
  return errno;
}

// The read-only system trees a dynamically linked program needs (missing ones are skipped).
std::vector<std::string> SystemPaths() { return {"/usr", "/etc", "/lib", "/lib64", "/bin"}; }

LandlockRules FsOnly() {
  LandlockRules r;
  r.restrict_fs = true;
  return r;
}

LandlockRules NoFs() {
  LandlockRules r;
  r.restrict_fs = false;
  return r;
}

// A temporary tree: ro/ (with file and true), rw/ (with file), outside/ (with secret and true).
class LandlockFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    abi_ = LandlockAbi();
    if (abi_ < 1) GTEST_SKIP() << "kernel lacks Landlock (ABI 0): nothing to test";
    char tmpl[] = "/tmp/cagent-landlock-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
    root_ = tmpl;
    for (const char* d : {"/ro", "/rw", "/outside"}) {
      ASSERT_EQ(::mkdir((root_ + d).c_str(), 0755), 0);
    }
    ASSERT_EQ(WriteFile(Ro("file")), 0);
    ASSERT_EQ(WriteFile(Rw("file")), 0);
    ASSERT_EQ(WriteFile(Outside("secret"), "secret"), 0);
    ASSERT_EQ(CopyFile("/usr/bin/true", Ro("true"), 0755), 0);
    ASSERT_EQ(CopyFile("/usr/bin/true", Outside("true"), 0755), 0);
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  std::string Ro(const std::string& name = "") const { return root_ + "/ro/" + name; }
  std::string Rw(const std::string& name = "") const { return root_ + "/rw/" + name; }
  std::string Outside(const std::string& name = "") const { return root_ + "/outside/" + name; }

  // ro/ read-only, rw/ read-write, plus the system trees read-only; outside/ not covered.
  LandlockRuleset Standard() const {
    LandlockRules rules = FsOnly();
    rules.read_only = SystemPaths();
    rules.read_only.push_back(root_ + "/ro");
    rules.read_write = {root_ + "/rw"};
    auto rs = LandlockRuleset::Prepare(rules, abi_);
    EXPECT_TRUE(rs.ok()) << rs.error().Message();
    return std::move(rs).value();
  }

  int abi_ = 0;
  std::string root_;
};

TEST_F(LandlockFsTest, ReadingOutsideTheRulesIsDenied) {
  const LandlockRuleset rs = Standard();
  EXPECT_EQ(RunChild(&rs, [&] { return ReadFile(Outside("secret")); }), EACCES);
  // Listing the directory is denied too.
  EXPECT_EQ(RunChild(&rs, [&] { return ReadFile(Outside()); }), EACCES);
  // Twin: without Landlock the same read succeeds.
  EXPECT_EQ(RunChild(nullptr, [&] { return ReadFile(Outside("secret")); }), 0);
  // The read-only tree stays readable.
  EXPECT_EQ(RunChild(&rs, [&] { return ReadFile(Ro("file")); }), 0);
}

TEST_F(LandlockFsTest, WritingIntoReadOnlyIsDenied) {
  const LandlockRuleset rs = Standard();
  EXPECT_EQ(RunChild(&rs, [&] { return WriteFile(Ro("file")); }), EACCES);
  EXPECT_EQ(RunChild(&rs, [&] { return WriteFile(Ro("new")); }), EACCES);
  EXPECT_EQ(RunChild(&rs, [&] { return ::mkdir(Ro("dir").c_str(), 0755) == 0 ? 0 : errno; }),
            EACCES);
  EXPECT_EQ(RunChild(&rs, [&] { return ::unlink(Ro("file").c_str()) == 0 ? 0 : errno; }), EACCES);
  // Twin.
  EXPECT_EQ(RunChild(nullptr, [&] { return WriteFile(Ro("file")); }), 0);
  EXPECT_EQ(RunChild(nullptr, [&] { return WriteFile(Ro("new")); }), 0);
}

TEST_F(LandlockFsTest, ReadWriteTreeAllowsOrdinaryWork) {
  const LandlockRuleset rs = Standard();
  EXPECT_EQ(RunChild(&rs,
                     [&] {
                       if (int e = WriteFile(Rw("file"), "changed")) return e;
                       if (::truncate(Rw("file").c_str(), 1) != 0) return errno;
                       if (::mkdir(Rw("sub").c_str(), 0755) != 0) return errno;
                       if (int e = WriteFile(Rw("sub/a"))) return e;
                       // Rename across directories inside the read-write tree (refer, ABI 2).
                       if (::rename(Rw("sub/a").c_str(), Rw("a").c_str()) != 0) return errno;
                       if (::symlink("a", Rw("link").c_str()) != 0) return errno;
                       if (::mkfifo(Rw("fifo").c_str(), 0600) != 0) return errno;
                       if (::unlink(Rw("a").c_str()) != 0) return errno;
                       if (::rmdir(Rw("sub").c_str()) != 0) return errno;
                       return 0;
                     }),
            abi_ >= 2 ? 0 : EXDEV);
}

TEST_F(LandlockFsTest, FilesCreatedAfterTheRestrictionAreCovered) {
  const LandlockRuleset rs = Standard();
  // A file the restricted child creates in rw/ cannot be moved or linked into ro/ or outside/:
  // the rule of its new parent would not grant the rights it needs (EXDEV when the move would
  // escalate its rights, EACCES when the target directory forbids creating it).
  const int moved = RunChild(&rs, [&] {
    if (int e = WriteFile(Rw("late"))) return 100 + e;
    return ::rename(Rw("late").c_str(), Ro("late").c_str()) == 0 ? 0 : errno;
  });
  EXPECT_TRUE(moved == EXDEV || moved == EACCES) << "rename into ro/ returned " << moved;
  const int linked = RunChild(&rs, [&] {
    return ::link(Rw("file").c_str(), Outside("hardlink").c_str()) == 0 ? 0 : errno;
  });
  EXPECT_TRUE(linked == EXDEV || linked == EACCES) << "link into outside/ returned " << linked;
  // Twin.
  EXPECT_EQ(RunChild(nullptr,
                     [&] {
                       if (int e = WriteFile(Rw("late"))) return 100 + e;
                       return ::rename(Rw("late").c_str(), Ro("late").c_str()) == 0 ? 0 : errno;
                     }),
            0);

  // A file the (unrestricted) parent creates outside/ after the child restricted itself is just
  // as unreadable: the rule is the directory's, not a list of names taken at apply time.
  int ready[2], go[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  auto wait_for_file = [&](const LandlockRuleset* ruleset) {
    (void)std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
      if (ruleset != nullptr && !ruleset->Apply().ok) ::_exit(kApplyFailed);
      char c = 1;
      if (::write(ready[1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) ::_exit(kApplyFailed);
      ::_exit(ReadFile(Outside("created-later")));
    }
    char c;
    EXPECT_EQ(::read(ready[0], &c, 1), 1);
    EXPECT_EQ(WriteFile(Outside("created-later")), 0);
    EXPECT_EQ(::write(go[1], &c, 1), 1);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::unlink(Outside("created-later").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(wait_for_file(&rs), EACCES);
  EXPECT_EQ(wait_for_file(nullptr), 0);  // twin
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
}

TEST_F(LandlockFsTest, ExecutingFromReadWriteIsAllowedAndFromOutsideDenied) {
  const LandlockRuleset rs = Standard();
  // Created after the restriction, then executed: the rw/ rule grants execute.
  EXPECT_EQ(RunChild(&rs,
                     [&] {
                       if (int e = CopyFile("/usr/bin/true", Rw("built"), 0755)) return 100 + e;
                       return Exec(Rw("built"));
                     }),
            0);
  EXPECT_EQ(RunChild(&rs, [&] { return Exec(Ro("true")); }), 0);
  EXPECT_EQ(RunChild(&rs, [&] { return Exec(Outside("true")); }), EACCES);
  // Twin.
  EXPECT_EQ(RunChild(nullptr, [&] { return Exec(Outside("true")); }), 0);
}

TEST_F(LandlockFsTest, SymlinkFromReadWriteToOutsideIsDenied) {
  ASSERT_EQ(::symlink(Outside("secret").c_str(), Rw("planted").c_str()), 0);
  const LandlockRuleset rs = Standard();
  EXPECT_EQ(RunChild(&rs, [&] { return ReadFile(Rw("planted")); }), EACCES);
  // Creating a symlink is allowed in rw/ (make_sym); following it still checks the target.
  EXPECT_EQ(RunChild(&rs,
                     [&] {
                       if (::symlink(Outside("secret").c_str(), Rw("made").c_str()) != 0) {
                         return 100 + errno;
                       }
                       return ReadFile(Rw("made"));
                     }),
            EACCES);
  // Twin.
  EXPECT_EQ(RunChild(nullptr, [&] { return ReadFile(Rw("planted")); }), 0);
}

TEST_F(LandlockFsTest, RuleOnAFileGrantsThatFileOnly) {
  ASSERT_EQ(WriteFile(Outside("single")), 0);
  LandlockRules rules = FsOnly();
  rules.read_write = {Outside("single")};  // a file: directory rights must be masked off
  rules.read_only = {Outside("secret")};
  auto rs = LandlockRuleset::Prepare(rules, abi_);
  ASSERT_TRUE(rs.ok()) << rs.error().Message();
  EXPECT_EQ(RunChild(&*rs, [&] { return WriteFile(Outside("single"), "y"); }), 0);
  EXPECT_EQ(RunChild(&*rs, [&] { return ReadFile(Outside("secret")); }), 0);
  EXPECT_EQ(RunChild(&*rs, [&] { return WriteFile(Outside("secret")); }), EACCES);
  EXPECT_EQ(RunChild(&*rs, [&] { return ReadFile(Ro("file")); }), EACCES);
}

TEST_F(LandlockFsTest, MissingPathsAreSkipped) {
  LandlockRules rules = FsOnly();
  rules.read_only = {"/nonexistent-cagent-landlock", Ro("file/not-a-dir"), Ro()};
  auto rs = LandlockRuleset::Prepare(rules, abi_);
  ASSERT_TRUE(rs.ok()) << rs.error().Message();
  EXPECT_EQ(RunChild(&*rs, [&] { return ReadFile(Ro("file")); }), 0);
  EXPECT_EQ(RunChild(&*rs, [&] { return ReadFile(Rw("file")); }), EACCES);
}

TEST_F(LandlockFsTest, InheritedFdsKeepTheirRights) {
  // Like stdout redirected by the caller: opened before the restriction, usable after it.
  const int fd = ::open(Outside("secret").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const LandlockRuleset rs = Standard();
  EXPECT_EQ(RunChild(&rs,
                     [&] {
                       char c;
                       if (::pread(fd, &c, 1, 0) != 1) return errno;
                       return ::pwrite(fd, "S", 1, 0) == 1 ? 0 : errno;
                     }),
            0);
  // Re-opening the same file by name is what the rules decide.
  EXPECT_EQ(RunChild(&rs, [&] { return ReadFile(Outside("secret")); }), EACCES);
  ::close(fd);
}

TEST_F(LandlockFsTest, DeviceRuleAllowsTerminalIoctls) {
  if (abi_ < 5) GTEST_SKIP() << "Landlock ABI " << abi_ << " < 5: device ioctls not restricted";
  auto ptmx_ioctl = [] {
    const int fd = ::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return 100 + errno;
    unsigned pty = 0;
    const int r = ::ioctl(fd, TIOCGPTN, &pty) == 0 ? 0 : errno;
    ::close(fd);
    return r;
  };
  if (RunChild(nullptr, ptmx_ioctl) != 0) GTEST_SKIP() << "no usable /dev/ptmx here";
  LandlockRules rules = FsOnly();
  rules.device_paths = {"/dev"};
  auto dev = LandlockRuleset::Prepare(rules, abi_);
  ASSERT_TRUE(dev.ok()) << dev.error().Message();
  EXPECT_EQ(RunChild(&*dev, ptmx_ioctl), 0);
  EXPECT_EQ(RunChild(&*dev, [] { return WriteFile("/dev/null"); }), 0);
  // Devices are not a place to create files.
  EXPECT_EQ(RunChild(&*dev, [] { return WriteFile("/dev/cagent-landlock-test"); }), EACCES);
  // The same tree as read-write: the device opens, but its ioctls are denied.
  rules.device_paths.clear();
  rules.read_write = {"/dev"};
  auto rw_dev = LandlockRuleset::Prepare(rules, abi_);
  ASSERT_TRUE(rw_dev.ok()) << rw_dev.error().Message();
  EXPECT_EQ(RunChild(&*rw_dev, ptmx_ioctl), EACCES);
}

TEST_F(LandlockFsTest, BestEffortWithoutLandlockRestrictsNothing) {
  LandlockRules rules = FsOnly();
  rules.require_fs = false;
  auto rs = LandlockRuleset::Prepare(rules, /*abi=*/0);
  ASSERT_TRUE(rs.ok()) << rs.error().Message();
  EXPECT_FALSE(rs->Summary().fs);
  EXPECT_EQ(RunChild(&*rs, [&] { return ReadFile(Outside("secret")); }), 0);
}

// ---- network (ABI 4) ----

// A TCP listener on 127.0.0.1 owned by the test runner.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() {
    if (fd_ >= 0) ::close(fd_);
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  [[nodiscard]] std::uint16_t Port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// 0 or errno: a TCP connect to 127.0.0.1:port.
int Connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 100 + errno;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const int r = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : errno;
  ::close(fd);
  return r;
}

// 0 or errno: a TCP bind to 127.0.0.1:port.
int Bind(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 100 + errno;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const int r = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : errno;
  ::close(fd);
  return r;
}

class LandlockNetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    abi_ = LandlockAbi();
    if (abi_ < 4) GTEST_SKIP() << "Landlock ABI " << abi_ << " < 4: no TCP rules on this kernel";
    ASSERT_NE(listener_.Port(), 0) << "cannot listen on 127.0.0.1";
  }
  LandlockRuleset Tcp(std::vector<std::uint16_t> bind, std::vector<std::uint16_t> connect) const {
    LandlockRules rules = NoFs();
    rules.restrict_tcp = true;
    rules.tcp_bind_ports = std::move(bind);
    rules.tcp_connect_ports = std::move(connect);
    auto rs = LandlockRuleset::Prepare(rules, abi_);
    EXPECT_TRUE(rs.ok()) << rs.error().Message();
    return std::move(rs).value();
  }

  int abi_ = 0;
  Listener listener_;
};

TEST_F(LandlockNetTest, UnlistedConnectAndBindAreDenied) {
  const LandlockRuleset rs = Tcp({}, {});
  EXPECT_EQ(RunChild(&rs, [&] { return Connect(listener_.Port()); }), EACCES);
  EXPECT_EQ(RunChild(&rs, [] { return Bind(0); }), EACCES);
  // Twin.
  EXPECT_EQ(RunChild(nullptr, [&] { return Connect(listener_.Port()); }), 0);
  EXPECT_EQ(RunChild(nullptr, [] { return Bind(0); }), 0);
}

TEST_F(LandlockNetTest, ListedPortsAreAllowed) {
  Listener other;
  ASSERT_NE(other.Port(), 0);
  const LandlockRuleset rs = Tcp({0}, {listener_.Port()});
  EXPECT_EQ(RunChild(&rs, [&] { return Connect(listener_.Port()); }), 0);
  EXPECT_EQ(RunChild(&rs, [&] { return Connect(other.Port()); }), EACCES);
  // Port 0 in the bind list: an ephemeral port may be bound.
  EXPECT_EQ(RunChild(&rs, [] { return Bind(0); }), 0);
  // Twin of the denied connect.
  EXPECT_EQ(RunChild(nullptr, [&] { return Connect(other.Port()); }), 0);
}

// ---- scopes (ABI 6) ----

class LandlockScopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    abi_ = LandlockAbi();
    if (abi_ < 6) GTEST_SKIP() << "Landlock ABI " << abi_ << " < 6: no scopes on this kernel";
  }
  LandlockRuleset Scoped(bool unix_sockets, bool signals) const {
    LandlockRules rules = NoFs();
    rules.scope_abstract_unix = unix_sockets;
    rules.scope_signals = signals;
    auto rs = LandlockRuleset::Prepare(rules, abi_);
    EXPECT_TRUE(rs.ok()) << rs.error().Message();
    return std::move(rs).value();
  }
  int abi_ = 0;
};

// An abstract Unix socket address "\0<name>" and its length.
socklen_t AbstractAddress(const std::string& name, sockaddr_un& addr) {
  addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

int ConnectAbstract(const std::string& name) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 100 + errno;
  sockaddr_un addr;
  const socklen_t len = AbstractAddress(name, addr);
  const int r = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 ? 0 : errno;
  ::close(fd);
  return r;
}

// Binds and listens on an abstract socket; returns the fd or -errno.
int ListenAbstract(const std::string& name) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_un addr;
  const socklen_t len = AbstractAddress(name, addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 4) != 0) {
    const int e = errno;
    ::close(fd);
    return -e;
  }
  return fd;
}

TEST_F(LandlockScopeTest, AbstractUnixSocketOutsideTheDomainIsDenied) {
  const std::string name = "cagent-landlock-test-" + std::to_string(::getpid());
  const int server = ListenAbstract(name);
  ASSERT_GE(server, 0) << std::strerror(-server);
  const LandlockRuleset rs = Scoped(/*unix_sockets=*/true, /*signals=*/false);
  EXPECT_EQ(RunChild(&rs, [&] { return ConnectAbstract(name); }), EPERM);
  // Twin.
  EXPECT_EQ(RunChild(nullptr, [&] { return ConnectAbstract(name); }), 0);
  // A socket created inside the domain stays reachable from it.
  EXPECT_EQ(RunChild(&rs,
                     [&] {
                       const int own = ListenAbstract(name + "-inner");
                       if (own < 0) return 100 - own;
                       return ConnectAbstract(name + "-inner");
                     }),
            0);
  ::close(server);
}

TEST_F(LandlockScopeTest, SignalsToProcessesOutsideTheDomainAreDenied) {
  // A sibling of the restricted child, started by the (unrestricted) test runner.
  auto start_sibling = [] {
    (void)std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      for (;;) ::pause();
    }
    return pid;
  };
  auto reap = [](pid_t pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  };
  const LandlockRuleset rs = Scoped(/*unix_sockets=*/false, /*signals=*/true);

  const pid_t sibling = start_sibling();
  ASSERT_GT(sibling, 0);
  EXPECT_EQ(RunChild(&rs, [&] { return ::kill(sibling, SIGTERM) == 0 ? 0 : errno; }), EPERM);
  // Twin: the same kill without the scope reaches the sibling.
  EXPECT_EQ(RunChild(nullptr, [&] { return ::kill(sibling, SIGTERM) == 0 ? 0 : errno; }), 0);
  const int status = reap(sibling);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);

  // The restricted child's own children, created after the restriction, are in its domain.
  EXPECT_EQ(RunChild(&rs,
                     [&] {
                       const pid_t own = ::fork();
                       if (own == 0) {
                         for (;;) ::pause();
                       }
                       if (own < 0) return 100 + errno;
                       const int r = ::kill(own, SIGKILL) == 0 ? 0 : errno;
                       int st = 0;
                       ::waitpid(own, &st, 0);
                       return r;
                     }),
            0);
}

// ---- Prepare: masks and downgrades, no kernel involved ----

LandlockRules Everything() {
  LandlockRules rules;
  rules.read_only = {"/usr"};
  rules.read_write = {"/work"};
  rules.device_paths = {"/dev"};
  rules.restrict_tcp = true;
  rules.tcp_connect_ports = {443};
  rules.scope_abstract_unix = true;
  rules.scope_signals = true;
  return rules;
}

TEST(LandlockPrepareTest, CurrentAbiEnforcesEverythingWithoutDowngrades) {
  auto rs = LandlockRuleset::Prepare(Everything(), 7);
  ASSERT_TRUE(rs.ok()) << rs.error().Message();
  EXPECT_THAT(rs->Downgrades(), IsEmpty());
  const LandlockSummary s = rs->Summary();
  EXPECT_EQ(s.abi, 7);
  EXPECT_TRUE(s.fs);
  EXPECT_TRUE(s.net);
  EXPECT_TRUE(s.scopes);
  EXPECT_EQ(s.handled_fs, 0xFFFFU);  // bits 0-15: ABI 1's thirteen, refer, truncate, ioctl_dev
  EXPECT_EQ(s.handled_net, 0x3U);
  EXPECT_EQ(s.scoped, 0x3U);
  EXPECT_EQ(s.ToString(), "Landlock ABI 7: filesystem enforced, network enforced, scopes enforced");
}

TEST(LandlockPrepareTest, Abi3ReportsNetworkIoctlAndScopeDowngrades) {
  LandlockRules rules = Everything();
  rules.require_net = false;
  rules.require_scopes = false;
  auto rs = LandlockRuleset::Prepare(rules, 3);
  ASSERT_TRUE(rs.ok()) << rs.error().Message();
  EXPECT_THAT(rs->Downgrades(),
              ::testing::ElementsAre(
                  "Landlock ABI 3 < 5: ioctl(2) on device files is not restricted (needs Linux "
                  ">= 6.10)",
                  "Landlock ABI 3 < 4: TCP bind/connect rules not enforced (needs Linux >= 6.7)",
                  "Landlock ABI 3 < 6: abstract Unix socket and signal scoping not enforced "
                  "(needs Linux >= 6.12)"));
  const LandlockSummary s = rs->Summary();
  EXPECT_TRUE(s.fs);
  EXPECT_FALSE(s.net);
  EXPECT_FALSE(s.scopes);
  EXPECT_EQ(s.handled_fs, 0x7FFFU);  // truncate (bit 14) yes, ioctl_dev (bit 15) no
}

TEST(LandlockPrepareTest, Abi1ReportsReferAndTruncate) {
  LandlockRules rules;
  rules.read_write = {"/work"};
  auto rs = LandlockRuleset::Prepare(rules, 1);
  ASSERT_TRUE(rs.ok()) << rs.error().Message();
  EXPECT_EQ(rs->Summary().handled_fs, 0x1FFFU);
  EXPECT_THAT(rs->Downgrades(), Contains(HasSubstr("Landlock ABI 1 < 2: renames and links")));
  EXPECT_THAT(rs->Downgrades(),
              Contains("Landlock ABI 1 < 3: truncate(2) is not restricted (needs Linux >= 6.2)"));
}

TEST(LandlockPrepareTest, RequiredNetworkFailsBelowAbi4) {
  LandlockRules rules = Everything();
  rules.require_scopes = false;
  auto rs = LandlockRuleset::Prepare(rules, 3);
  ASSERT_FALSE(rs.ok());
  EXPECT_EQ(rs.error().Message(),
            "Landlock: kernel's Landlock ABI 3 lacks TCP bind/connect rules (ABI 4); run on Linux "
            ">= 6.7, or mark the network rules best-effort");
}

TEST(LandlockPrepareTest, RequiredScopesFailBelowAbi6) {
  LandlockRules rules = NoFs();
  rules.scope_signals = true;
  auto rs = LandlockRuleset::Prepare(rules, 5);
  ASSERT_FALSE(rs.ok());
  EXPECT_EQ(rs.error().Message(),
            "Landlock: kernel's Landlock ABI 5 lacks signal scoping (ABI 6); run on Linux >= "
            "6.12, or mark the scopes best-effort");
}

TEST(LandlockPrepareTest, NoLandlockFailsClosedWhenFilesystemRulesAreRequired) {
  LandlockRules rules;
  rules.read_only = {"/usr"};
  auto rs = LandlockRuleset::Prepare(rules, 0);
  ASSERT_FALSE(rs.ok());
  EXPECT_EQ(rs.error().Message(),
            "Landlock: kernel lacks Landlock (ABI 0), needed for filesystem rules (ABI 1); run "
            "on Linux >= 5.13 with landlock in the lsm= list, or mark the filesystem rules "
            "best-effort");
  // Several missing required features are all named.
  auto all = LandlockRuleset::Prepare(Everything(), 0);
  ASSERT_FALSE(all.ok());
  EXPECT_THAT(all.error().Message(), HasSubstr("filesystem rules"));
  EXPECT_THAT(all.error().Message(), HasSubstr("TCP bind/connect rules"));
  EXPECT_THAT(all.error().Message(), HasSubstr("abstract Unix socket and signal scoping"));
}

// A required feature the kernel lacks is "unsupported" (cagent exits setup-failed, 125); a rule
// set that is wrong in itself is "invalid input". Commands map them by the code (ExitCodeFor).
TEST(LandlockPrepareTest, RefusalsCarryTheirErrorCode) {
  LandlockRules fs;
  fs.read_only = {"/usr"};
  auto no_landlock = LandlockRuleset::Prepare(fs, 0);
  ASSERT_FALSE(no_landlock.ok());
  EXPECT_EQ(no_landlock.error().code, Error::Code::kUnsupported);
  LandlockRules net = Everything();
  net.require_scopes = false;
  auto old_abi = LandlockRuleset::Prepare(net, 3);
  ASSERT_FALSE(old_abi.ok());
  EXPECT_EQ(old_abi.error().code, Error::Code::kUnsupported);
  // The same rules marked best effort are not refused at all.
  fs.require_fs = false;
  EXPECT_TRUE(LandlockRuleset::Prepare(fs, 0).ok());

  LandlockRules relative;
  relative.read_write = {"work"};
  auto rel = LandlockRuleset::Prepare(relative, 7);
  ASSERT_FALSE(rel.ok());
  EXPECT_EQ(rel.error().code, Error::Code::kInvalidInput);
  LandlockRules ports = NoFs();
  ports.tcp_connect_ports = {443};
  auto no_restrict = LandlockRuleset::Prepare(ports, 7);
  ASSERT_FALSE(no_restrict.ok());
  EXPECT_EQ(no_restrict.error().code, Error::Code::kInvalidInput);
}

TEST(LandlockPrepareTest, NoLandlockBestEffortReportsEverything) {
  LandlockRules rules = Everything();
  rules.require_fs = rules.require_net = rules.require_scopes = false;
  auto rs = LandlockRuleset::Prepare(rules, 0);
  ASSERT_TRUE(rs.ok()) << rs.error().Message();
  EXPECT_EQ(rs->Downgrades().size(), 3U);
  EXPECT_EQ(rs->Downgrades().front(),
            "Landlock unavailable (ABI 0): filesystem rules not enforced (needs Linux >= 5.13 with "
            "landlock in the lsm= list)");
  EXPECT_EQ(rs->Summary().ToString().rfind(
                "Landlock ABI 0: filesystem off, network off, scopes off; ", 0),
            0U);
}

TEST(LandlockPrepareTest, RejectsRelativePathsAndPortsWithoutRestriction) {
  LandlockRules rules;
  rules.read_write = {"work"};
  auto rel = LandlockRuleset::Prepare(rules, 7);
  ASSERT_FALSE(rel.ok());
  EXPECT_EQ(rel.error().Message(),
            "Landlock read-write path 'work': not an absolute path; rules name paths inside the "
            "sandbox view");

  LandlockRules ports = NoFs();
  ports.tcp_connect_ports = {443};
  auto no_restrict = LandlockRuleset::Prepare(ports, 7);
  ASSERT_FALSE(no_restrict.ok());
  EXPECT_THAT(no_restrict.error().Message(), HasSubstr("restrict_tcp is off"));
}

TEST(LandlockPrepareTest, DescribesFailuresByDetail) {
  LandlockRules rules = Everything();
  rules.tcp_bind_ports = {443, 8080};
  auto rs = LandlockRuleset::Prepare(rules, 7);
  ASSERT_TRUE(rs.ok()) << rs.error().Message();
  EXPECT_EQ(rs->DescribeFailure(0), "add Landlock rule for /usr (read-only)");
  EXPECT_EQ(rs->DescribeFailure(1), "add Landlock rule for /work (read-write)");
  EXPECT_EQ(rs->DescribeFailure(2), "add Landlock rule for /dev (device)");
  EXPECT_EQ(rs->DescribeFailure(3), "add Landlock rule for TCP port 443 (bind/connect)");
  EXPECT_EQ(rs->DescribeFailure(4), "add Landlock rule for TCP port 8080 (bind)");
  EXPECT_EQ(rs->DescribeFailure(-2), "landlock_create_ruleset");
  EXPECT_EQ(rs->DescribeFailure(-3), "landlock_restrict_self");
  EXPECT_EQ(rs->DescribeFailure(99), "apply Landlock rules");
}

TEST(LandlockPrepareTest, NothingRequestedIsANoOp) {
  auto rs = LandlockRuleset::Prepare(NoFs(), LandlockAbi());
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->Summary().ToString().rfind("Landlock ABI", 0), 0U);
  EXPECT_FALSE(rs->Summary().fs);
  // Applying it changes nothing (and needs no kernel support).
  EXPECT_EQ(RunChild(&*rs, [] { return ReadFile("/etc/hostname"); }),
            RunChild(nullptr, [] { return ReadFile("/etc/hostname"); }));
}

}  // namespace
}  // namespace cagent::launcher
