// cagent_probe: a tiny program run *inside* the sandbox by the e2e tests. Each subcommand tries
// one thing and reports the result on stdout as "ok ..." or "fail <errno name>", exiting 0 or 1,
// so the tests assert on kernel-observable effects rather than on shell quirks.
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int Fail(const char* what) {
  std::printf("fail %s %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "?", what);
  return 1;
}

// connect ADDR PORT: a TCP connect to an IPv4 address.
int Connect(const char* addr, int port) {
  const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Fail("socket");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, addr, &sa.sin_addr);
  if (connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) return Fail("connect");
  std::printf("ok connected\n");
  return 0;
}

// connect-abstract NAME: connect to the abstract Unix socket "\0NAME".
int ConnectAbstract(const char* name) {
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Fail("socket");
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  const size_t len = std::strlen(name);
  std::memcpy(sa.sun_path + 1, name, len);
  const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + len);
  if (connect(s, reinterpret_cast<sockaddr*>(&sa), size) != 0) return Fail("connect");
  std::printf("ok connected\n");
  return 0;
}

// resolve NAME: getaddrinfo(NAME), reported as "ok ADDRESS" or "fail EAI_..." (the error class
// a client such as npm or pip sees: EAI_NONAME is permanent, EAI_AGAIN is worth retrying).
int Resolve(const char* name) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(name, "80", &hints, &res);
  if (rc != 0) {
    const char* cls = rc == EAI_NONAME   ? "EAI_NONAME"
                      : rc == EAI_AGAIN  ? "EAI_AGAIN"
                      : rc == EAI_FAIL   ? "EAI_FAIL"
                      : rc == EAI_SYSTEM ? "EAI_SYSTEM"
                      : rc == EAI_NODATA ? "EAI_NODATA"
                                         : "EAI_OTHER";
    std::printf("fail %s %s\n", cls, gai_strerror(rc));
    return 1;
  }
  char text[INET6_ADDRSTRLEN] = "?";
  if (res->ai_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, text, sizeof(text));
  } else if (res->ai_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(res->ai_addr)->sin6_addr, text,
              sizeof(text));
  }
  freeaddrinfo(res);
  std::printf("ok %s\n", text);
  return 0;
}

// res-query NAME: the DNS resolver asked directly for NAME's A record (res_query, as nsswitch's
// `dns` source would ask), reported as "ok" or "fail HOST_NOT_FOUND" (an NXDOMAIN answer) /
// "fail TRY_AGAIN" (no server answered) / "fail NO_RECOVERY" / "fail NO_DATA".
int ResQuery(const char* name) {
  unsigned char answer[1024];
  if (res_query(name, ns_c_in, ns_t_a, answer, sizeof(answer)) >= 0) {
    std::printf("ok\n");
    return 0;
  }
  const int e = h_errno;
  std::printf("fail %s\n", e == HOST_NOT_FOUND ? "HOST_NOT_FOUND"
                           : e == TRY_AGAIN    ? "TRY_AGAIN"
                           : e == NO_RECOVERY  ? "NO_RECOVERY"
                           : e == NO_DATA      ? "NO_DATA"
                                               : "OTHER");
  return 1;
}

// loopback-echo: a server and a client inside the sandbox talk over 127.0.0.1.
int LoopbackEcho() {
  const int srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (srv < 0) return Fail("socket");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(srv, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) return Fail("bind");
  if (listen(srv, 1) != 0) return Fail("listen");
  socklen_t len = sizeof(sa);
  getsockname(srv, reinterpret_cast<sockaddr*>(&sa), &len);
  const pid_t pid = fork();
  if (pid == 0) {
    const int c = accept(srv, nullptr, nullptr);
    char buf[16] = {};
    const ssize_t n = read(c, buf, sizeof(buf));
    if (n > 0) (void)!write(c, buf, static_cast<size_t>(n));
    _exit(0);
  }
  const int cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(cli, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) return Fail("connect");
  if (write(cli, "ping", 4) != 4) return Fail("write");
  char buf[16] = {};
  if (read(cli, buf, sizeof(buf)) != 4 || std::strcmp(buf, "ping") != 0) return Fail("read");
  waitpid(pid, nullptr, 0);
  std::printf("ok echo\n");
  return 0;
}

// fds: the open descriptors >= 3 (other than the one listing them).
int Fds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return Fail("opendir");
  std::string out;
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd < 3 || fd == dirfd(d)) continue;
    out += std::to_string(fd) + " ";
  }
  closedir(d);
  std::printf("ok fds: %s\n", out.c_str());
  return 0;
}

int Ptrace(pid_t pid) {
  if (ptrace(PTRACE_ATTACH, pid, nullptr, nullptr) != 0) return Fail("ptrace");
  waitpid(pid, nullptr, __WALL);
  ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
  std::printf("ok attached\n");
  return 0;
}

// ptrace-child: attach to an ordinary child process of ours.
int PtraceChild() {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  const int rc = Ptrace(child);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return rc;
}

// tiocsti: push a character into the input queue of the terminal on stdin.
int Tiocsti() {
  const char c = '#';
  if (ioctl(0, TIOCSTI, &c) != 0) return Fail("TIOCSTI");
  std::printf("ok injected\n");
  return 0;
}

// inject: TIOCSTI of "id\n" into stdin's terminal and into /dev/tty (the controlling terminal),
// one line per target ("ok injected fd0", "fail EPERM TIOCSTI fd0", "fail ENXIO open /dev/tty").
int Inject() {
  auto push = [](int fd, const char* target) {
    for (const char* p = "id\n"; *p != '\0'; ++p) {
      if (ioctl(fd, TIOCSTI, p) != 0) {
        Fail((std::string("TIOCSTI ") + target).c_str());
        return;
      }
    }
    std::printf("ok injected %s\n", target);
  };
  push(0, "fd0");
  const int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
  if (tty < 0) {
    Fail("open /dev/tty");
  } else {
    push(tty, "/dev/tty");
    close(tty);
  }
  std::fflush(stdout);
  return 0;
}

// ids: the real, effective and saved uids.
int Ids() {
  uid_t r = 0, e = 0, su = 0;
  getresuid(&r, &e, &su);
  std::printf("ok uids %u %u %u\n", r, e, su);
  return 0;
}

int Ctty() {
  const int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
  if (fd < 0) return Fail("open /dev/tty");
  std::printf("ok controlling terminal\n");
  return 0;
}

int Read(const char* path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail("open");
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof(buf));
  if (n < 0) return Fail("read");
  std::printf("ok read: %.*s\n", static_cast<int>(n), buf);
  return 0;
}

int Write(const char* path) {
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Fail("open");
  if (write(fd, "pwned\n", 6) != 6) return Fail("write");
  close(fd);
  std::printf("ok written\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "connect" && argc == 4) return Connect(argv[2], std::atoi(argv[3]));
  if (cmd == "loopback-echo") return LoopbackEcho();
  if (cmd == "resolve" && argc == 3) return Resolve(argv[2]);
  if (cmd == "res-query" && argc == 3) return ResQuery(argv[2]);
  if (cmd == "connect-abstract" && argc == 3) return ConnectAbstract(argv[2]);
  if (cmd == "fds") return Fds();
  if (cmd == "ptrace" && argc == 3) return Ptrace(std::atoi(argv[2]));
  if (cmd == "ptrace-child") return PtraceChild();
  if (cmd == "tiocsti") return Tiocsti();
  if (cmd == "inject") return Inject();
  if (cmd == "ctty") return Ctty();
  if (cmd == "ids") return Ids();
  if (cmd == "read" && argc == 3) return Read(argv[2]);
  if (cmd == "write" && argc == 3) return Write(argv[2]);
  std::fprintf(stderr,
               "usage: cagent_probe connect ADDR PORT | connect-abstract NAME | loopback-echo | "
               "fds | ptrace PID | ptrace-child | tiocsti | inject "
               "| ctty | ids | read PATH | write PATH\n");
  return 2;
}
