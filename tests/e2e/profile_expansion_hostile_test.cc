// Issue #13, class 1: profile expansion never adds a host path derived from workspace content to
// the view. A workspace symlink whose name matches a deny / deny write rule used to make
// SpecFromPolicy bind its host target read-only: `test_helpers.py -> (a host dir)` under the demo
// profile's `deny write test_*.py`, or `.git/info/attributes -> (a host dir)` under backend,
// showed the sandboxed command that directory's files and let it connect to its Unix sockets.
//
// Twin: the "guard off" case runs the same command with the target bound read-only on the command
// line (`cagent exec --ro DIR`, or `read-only DIR` in the profile for `cagent agent`), which is
// exactly what the old expansion added to the view; the attack then reads the secret and connects.
// With the guard on the launch still succeeds and the command finds neither.
//
// Runs as the caller and as nobody (CAGENT_TEST_AS_USER=nobody), like every e2e suite.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// Run inside the sandbox: reads each path and connects to each "sock:PATH", writing one line per
// attempt to view-report.txt in the working directory and to stdout.
constexpr const char kProbeScript[] = R"(import socket, sys
out = []
for arg in sys.argv[1:]:
    if arg.startswith('sock:'):
        path = arg[5:]
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            out.append('connected ' + path)
        except OSError as e:
            out.append('refused %s: %s' % (path, e.strerror))
    else:
        try:
            with open(arg) as f:
                out.append('read %s: %s' % (arg, f.read().strip()))
        except OSError as e:
            out.append('unreadable %s: %s' % (arg, e.strerror))
text = '\n'.join(out) + '\n'
with open('view-report.txt', 'w') as f:
    f.write(text)
print(text, end='')
)";

std::string Turn(const json& calls) {
  json t = {{"text", ""}, {"usage", {{"input_tokens", 100}, {"output_tokens", 10}}}};
  t["tool_calls"] = calls;
  return t.dump() + "\n";
}

// The last JSON object on stdout (exec --json prints it after the command's own output).
json LastJson(const std::string& out) {
  const auto brace = out.rfind("\n{");
  const std::string text = brace == std::string::npos ? out : out.substr(brace + 1);
  return json::parse(text, nullptr, false);
}

class ProfileExpansionHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    dir_ = h_.MakeDir("expand");
    ws_ = dir_ + "/ws";
    secret_dir_ = dir_ + "/host-secrets";
    fs::create_directories(ws_);
    fs::create_directories(secret_dir_);
    secret_ = "TOPSECRET-" + std::to_string(::getpid());
    WriteFile(secret_dir_ + "/secret.txt", secret_ + "\n");
    WriteFile(ws_ + "/probe_view.py", kProbeScript);
    // A host Unix socket in the target directory, listening (connect succeeds without accept).
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener_, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    socket_path_ = secret_dir_ + "/host.sock";
    ASSERT_LT(socket_path_.size(), sizeof(sa.sun_path));
    std::memcpy(sa.sun_path, socket_path_.c_str(), socket_path_.size());
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0)
        << std::strerror(errno);
    ASSERT_EQ(::listen(listener_, 8), 0);
    ::chmod(socket_path_.c_str(), 0777);
    // The hostile workspace: names the profiles deny, pointing at the host directory.
    fs::create_directory_symlink(secret_dir_, ws_ + "/test_helpers.py");
    fs::create_directories(ws_ + "/.git/info");
    fs::create_directory_symlink(secret_dir_, ws_ + "/.git/info/attributes");
    // The demo's profile: backend plus protected tests. By path, outside the workspace.
    profile_ = dir_ + "/demo.cagent";
    WriteFile(profile_, DemoProfile(""));
    const std::string chown = "chown -R " + std::to_string(h_.run_uid()) + ":" +
                              std::to_string(h_.run_gid()) + " " + dir_;
    ASSERT_EQ(std::system(chown.c_str()), 0);
  }
  void TearDown() override {
    if (listener_ >= 0) ::close(listener_);
  }

  static std::string DemoProfile(const std::string& extra_filesystem) {
    return "description \"fix-add demo, as in examples/fix-add\"\nextends backend\n"
           "filesystem {\n  deny write test_*.py\n" +
           extra_filesystem + "}\n";
  }

  // What the sandboxed probe is asked to reach: through each link, the file and the socket.
  std::vector<std::string> Targets() const {
    return {"test_helpers.py/secret.txt", "sock:test_helpers.py/host.sock",
            ".git/info/attributes/secret.txt", "sock:.git/info/attributes/host.sock"};
  }

  RunResult Exec(const std::vector<std::string>& before) {
    std::vector<std::string> args = {"exec", "--workspace", ws_};
    args.insert(args.end(), before.begin(), before.end());
    args.insert(args.end(), {"--", "/usr/bin/python3", "probe_view.py"});
    for (const auto& t : Targets()) args.push_back(t);
    return h_.RunJson(args);
  }

  Harness& h_ = Harness::Get();
  std::string dir_, ws_, secret_dir_, secret_, socket_path_, profile_;
  int listener_ = -1;
};

TEST_F(ProfileExpansionHostile,
       ExecTwinWithTheLinkTargetInTheViewTheSecretIsReadAndTheSocketReached) {
  // Guard off: the old expansion bound the link's host target read-only; --ro does the same.
  const RunResult r = Exec({"--ro", secret_dir_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("read test_helpers.py/secret.txt: " + secret_));
  EXPECT_THAT(r.out, HasSubstr("read .git/info/attributes/secret.txt: " + secret_));
  EXPECT_THAT(r.out, HasSubstr("connected test_helpers.py/host.sock"));
  EXPECT_THAT(r.out, HasSubstr("connected .git/info/attributes/host.sock"));
}

TEST_F(ProfileExpansionHostile, ExecWithTheDemoProfileNeitherReadsTheSecretNorConnects) {
  const RunResult r = Exec({"--profile", profile_, "--json"});
  // The launch succeeds: the links are noted, not fatal.
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr(secret_)));
  EXPECT_THAT(r.out, HasSubstr("unreadable test_helpers.py/secret.txt: No such file or directory"));
  EXPECT_THAT(r.out,
              HasSubstr("unreadable .git/info/attributes/secret.txt: No such file or directory"));
  EXPECT_THAT(r.out, HasSubstr("refused test_helpers.py/host.sock"));
  EXPECT_THAT(r.out, HasSubstr("refused .git/info/attributes/host.sock"));
  EXPECT_THAT(r.out, Not(HasSubstr("connected")));
  const json j = LastJson(r.json);
  ASSERT_TRUE(j.is_object()) << r.json;
  const std::string notes = j.value("profile_notes", json::array()).dump();
  EXPECT_THAT(notes, HasSubstr("test_helpers.py leads to " + secret_dir_ + " (deny write rule)"));
  EXPECT_THAT(notes, HasSubstr(".git/info/attributes leads to " + secret_dir_));
  EXPECT_THAT(notes, Not(HasSubstr("read-only " + secret_dir_)));
}

TEST_F(ProfileExpansionHostile, ExecWithBackendAloneDoesNotMountTheAttributesTarget) {
  // backend's (base's) own `deny write .git/info/attributes`, no repository profile at all.
  const RunResult r = Exec({"--profile", "backend"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr(secret_)));
  EXPECT_THAT(r.out,
              HasSubstr("unreadable .git/info/attributes/secret.txt: No such file or directory"));
  EXPECT_THAT(r.out, HasSubstr("refused .git/info/attributes/host.sock"));
}

TEST_F(ProfileExpansionHostile, ALinkInsideTheWorkspaceIsStillWriteProtected) {
  // The rule keeps working where the view does show the target: test_inner.py -> lib/helpers.py
  // is re-bound read-only onto itself, so writing through the link fails.
  fs::create_directories(ws_ + "/lib");
  WriteFile(ws_ + "/lib/helpers.py", "x = 1\n");
  fs::create_symlink("lib/helpers.py", ws_ + "/test_inner.py");
  const std::string chown =
      "chown -R " + std::to_string(h_.run_uid()) + ":" + std::to_string(h_.run_gid()) + " " + ws_;
  ASSERT_EQ(std::system(chown.c_str()), 0);
  const RunResult r = h_.Run({"exec", "--workspace", ws_, "--profile", profile_, "--", "/bin/sh",
                              "-c", "(echo hacked > test_inner.py) 2>&1 || echo refused"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("Read-only file system"));
  EXPECT_THAT(r.out, HasSubstr("refused"));
  EXPECT_EQ(ReadFile(ws_ + "/lib/helpers.py"), "x = 1\n");
}

class ProfileExpansionHostileAgent : public ProfileExpansionHostile {
 protected:
  // `cagent agent` with a replayed model whose one command runs the probe, then finishes.
  RunResult RunAgent(const std::string& profile_text) {
    WriteFile(profile_, profile_text);
    std::string command = "python3 probe_view.py";
    for (const auto& t : Targets()) command += " " + t;
    std::string session;
    session += Turn(json::array(
        {json{{"id", "c1"}, {"name", "run_command"}, {"arguments", {{"command", command}}}}}));
    session += Turn(json::array(
        {json{{"id", "c2"}, {"name", "finish"}, {"arguments", {{"summary", "probed"}}}}}));
    WriteFile(dir_ + "/session.jsonl", session);
    WriteFile(dir_ + "/task.md", "# Probe\n");
    const std::string chown = "chown -R " + std::to_string(h_.run_uid()) + ":" +
                              std::to_string(h_.run_gid()) + " " + dir_;
    EXPECT_EQ(std::system(chown.c_str()), 0);
    RunOptions o;
    o.extra_env = {"XDG_STATE_HOME=" + dir_ + "/state"};
    return h_.Run({"agent", "--profile", profile_, "--workspace", ws_, "--model",
                   "replay:" + dir_ + "/session.jsonl", "--approve", "never", "--audit-log",
                   dir_ + "/audit.jsonl", "--json", dir_ + "/task.md"},
                  o);
  }
};

TEST_F(ProfileExpansionHostileAgent, TwinWithTheTargetInTheProfileTheAgentsCommandReadsIt) {
  // Guard off: what the old expansion added implicitly, written into the profile explicitly.
  const RunResult r = RunAgent(DemoProfile("  read-only " + secret_dir_ + "\n"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string report = ReadFile(ws_ + "/view-report.txt");
  EXPECT_THAT(report, HasSubstr("read test_helpers.py/secret.txt: " + secret_)) << r.err;
  EXPECT_THAT(report, HasSubstr("connected test_helpers.py/host.sock"));
}

TEST_F(ProfileExpansionHostileAgent, TheAgentsSandboxShowsNothingOfTheLinkTargets) {
  const RunResult r = RunAgent(DemoProfile(""));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string report = ReadFile(ws_ + "/view-report.txt");
  ASSERT_FALSE(report.empty()) << "the probe did not run: " << r.out << r.err;
  EXPECT_THAT(report, Not(HasSubstr(secret_)));
  EXPECT_THAT(report,
              HasSubstr("unreadable test_helpers.py/secret.txt: No such file or directory"));
  EXPECT_THAT(report,
              HasSubstr("unreadable .git/info/attributes/secret.txt: No such file or directory"));
  EXPECT_THAT(report, Not(HasSubstr("connected")));
}

}  // namespace
}  // namespace cagent::testing
