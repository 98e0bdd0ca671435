// The built-in profiles let their kind of project build and test (issue: "each built-in profile
// must let its kind of project build and test"), and the sandbox is really built from the profile:
// its deny globs hide a project's secrets, its read-only rules hold, its network mode applies.
// Each guard is shown failing with the profile switched off (`--profile default`, the launcher's
// view without a profile), so the check cannot pass vacuously.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class ProfileSampleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
  }

  // Copies tests/e2e/samples/NAME into a fresh directory owned by the user cagent runs as.
  std::string Sample(const std::string& name) {
    std::string dir = h_.MakeDir(name);
    fs::copy(std::string(CAGENT_SOURCE_DIR) + "/tests/e2e/samples/" + name, dir,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      EXPECT_EQ(::lchown(e.path().c_str(), h_.run_uid(), h_.run_gid()), 0) << e.path();
    }
    return dir;
  }

  RunResult Exec(const std::string& profile, const std::string& ws, const std::string& script,
                 const std::vector<std::string>& extra = {}) {
    RunOptions o;
    o.timeout = std::chrono::seconds(180);
    std::vector<std::string> args = {"exec", "--profile", profile, "--workspace", ws};
    args.insert(args.end(), extra.begin(), extra.end());
    for (const char* a : {"--", "/bin/sh", "-c"}) args.emplace_back(a);
    args.push_back(script);
    return h_.Run(args, o);
  }

  static bool Have(const char* path) { return ::access(path, X_OK) == 0; }

  Harness& h_ = Harness::Get();
};

TEST_F(ProfileSampleTest, BackendRunsPythonTestsWithALoopbackServer) {
  if (!Have("/usr/bin/python3")) GTEST_SKIP() << "python3 is not installed on this machine";
  std::string ws = Sample("backend-python");
  RunResult r = Exec("backend", ws, "/usr/bin/python3 -m unittest -v 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("test_echo_over_loopback"));
  EXPECT_THAT(r.out, HasSubstr("OK"));
}

TEST_F(ProfileSampleTest, BackendBuildsAndTestsACProject) {
  if (!Have("/usr/bin/make") || !Have("/usr/bin/cc")) GTEST_SKIP() << "make or cc is missing";
  std::string ws = Sample("backend-c");
  RunResult r = Exec("backend", ws, "make test");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("ok"));
}

TEST_F(ProfileSampleTest, FrontendRunsNodeTestsWithADevServer) {
  if (!Have("/usr/bin/node")) GTEST_SKIP() << "node is not installed on this machine";
  std::string ws = Sample("frontend-node");
  RunResult r = Exec("frontend", ws, "/usr/bin/node --test 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("pass 2"));
}

TEST_F(ProfileSampleTest, DocsChecksItsLinks) {
  if (!Have("/usr/bin/python3") || !Have("/usr/bin/make"))
    GTEST_SKIP() << "python3 or make missing";
  std::string ws = Sample("docs-site");
  RunResult r = Exec("docs", ws, "make check");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("checked links: 0 broken"));
}

TEST_F(ProfileSampleTest, ReadonlyLooksButCannotTouch) {
  std::string ws = Sample("readonly-repo");
  RunResult look = Exec("readonly", ws, "grep -rn TODO .");
  ASSERT_EQ(look.exit_code, 0) << look.out << look.err;
  EXPECT_THAT(look.out, HasSubstr("TODO: review"));

  RunResult touch = Exec("readonly", ws, "echo x > notes.txt; touch new.txt; ls");
  EXPECT_THAT(touch.err, HasSubstr("Read-only file system")) << touch.out;
  EXPECT_FALSE(fs::exists(ws + "/new.txt"));
  // Twin: without the profile the same command writes.
  RunResult twin = Exec("default", ws, "touch new.txt");
  EXPECT_EQ(twin.exit_code, 0) << twin.err;
  EXPECT_TRUE(fs::exists(ws + "/new.txt"));
}

TEST_F(ProfileSampleTest, BackendExposesAToolchainUnderHomeReadOnly) {
  // rustup, pyenv, nvm and friends install under the user's home, outside /usr. backend mounts
  // ~/.cargo and ~/.rustup read-only, passes PATH and sets RUSTUP_HOME/CARGO_HOME, so a toolchain
  // there runs inside; it cannot be modified, and the rest of the home stays invisible.
  std::string home = h_.MakeDir("home");
  fs::create_directories(home + "/.cargo/bin");
  fs::create_directories(home + "/.rustup/toolchains");
  std::ofstream(home + "/.cargo/bin/fakecargo")
      << "#!/bin/sh\necho \"fakecargo ran with RUSTUP_HOME=$RUSTUP_HOME\"\n";
  std::ofstream(home + "/.cargo/credentials.toml") << "token = \"cio_sample_secret\"\n";
  std::ofstream(home + "/notes.txt") << "private\n";
  ::chmod((home + "/.cargo/bin/fakecargo").c_str(), 0755);
  for (const auto& e : fs::recursive_directory_iterator(home)) {
    ASSERT_EQ(::lchown(e.path().c_str(), h_.run_uid(), h_.run_gid()), 0);
  }
  std::string ws = h_.MakeDir("rust-ws");
  RunOptions o;
  o.extra_env = {"HOME=" + home, "PATH=" + home + "/.cargo/bin:/usr/bin:/bin"};
  RunResult r = h_.Run({"exec", "--profile", "backend", "--workspace", ws, "--", "/bin/sh", "-c",
                        "fakecargo; touch ~/.cargo/bin/x 2>&1; cat " + home +
                            "/.cargo/credentials.toml 2>&1; ls " + home + "/notes.txt 2>&1"},
                       o);
  EXPECT_THAT(r.out, HasSubstr("fakecargo ran with RUSTUP_HOME=" + home + "/.rustup")) << r.err;
  EXPECT_FALSE(fs::exists(home + "/.cargo/bin/x"));
  EXPECT_THAT(r.out, Not(HasSubstr("cio_sample_secret")));  // hidden by backend
  EXPECT_THAT(r.out, HasSubstr("No such file"));            // the rest of home is not mounted
  // Twin: base does not expose ~/.cargo, so the toolchain is not there.
  RunResult twin = h_.Run(
      {"exec", "--profile", "base", "--workspace", ws, "--", "/bin/sh", "-c", "fakecargo"}, o);
  EXPECT_NE(twin.exit_code, 0);
}

TEST_F(ProfileSampleTest, DenyGlobHidesAProjectSecret) {
  std::string ws = Sample("backend-python");
  RunResult r = Exec("backend", ws, "cat .env; echo; ls -la .env");
  EXPECT_THAT(r.out, Not(HasSubstr("hunter2"))) << r.err;
  // Twin: the launcher's view without the profile shows the file.
  RunResult twin = Exec("default", ws, "cat .env");
  EXPECT_THAT(twin.out, HasSubstr("hunter2"));
}

TEST_F(ProfileSampleTest, HidingWhatTheViewDoesNotShowIsNotAnError) {
  // The host secrets are always hidden, ~/.config is hidden here and .env points outside the view:
  // none of them is visible, so there is nothing to cover and the launch must still work.
  std::string ws = h_.MakeDir("noetc");
  std::string prof = ws + "/noetc.cagent";
  std::ofstream(prof) << "filesystem {\n  read-only /usr /bin /lib /lib64\n  hide ~/.config\n"
                         "  deny **/.env\n}\n";
  ::chmod(prof.c_str(), 0644);
  fs::create_symlink("/etc/hostname", ws + "/.env");
  RunResult r = h_.Run({"exec", "--profile", prof, "--workspace", ws, "--", "/bin/sh", "-c",
                        "ls /etc 2>&1; cat .env 2>&1; echo done"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("done"));
  EXPECT_THAT(r.out, HasSubstr("No such file"));
}

TEST_F(ProfileSampleTest, GitHooksAreReadOnlyUnderTheProfile) {
  std::string ws = Sample("backend-c");
  fs::create_directories(ws + "/.git/hooks");
  std::ofstream(ws + "/.git/config") << "[core]\n";
  for (const char* p : {"/.git", "/.git/hooks", "/.git/config"}) {
    ASSERT_EQ(::lchown((ws + p).c_str(), h_.run_uid(), h_.run_gid()), 0);
  }
  const std::string plant =
      "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit; "
      "printf '[core]\\n\\thooksPath = /tmp\\n' >> .git/config; true";
  RunResult r = Exec("backend", ws, plant);
  EXPECT_THAT(r.err, HasSubstr("Read-only file system"));
  EXPECT_FALSE(fs::exists(ws + "/.git/hooks/pre-commit"));
  // .git/config is git's to write inside; after the sandbox cagent drops the planted key.
  std::ifstream config(ws + "/.git/config");
  std::string text((std::istreambuf_iterator<char>(config)), {});
  EXPECT_THAT(text, Not(HasSubstr("hooksPath"))) << text;
  EXPECT_THAT(r.err, HasSubstr("without core.hookspath")) << r.err;
  // Twin: without the profile's rules and the launcher's git guard, the hook is planted.
  RunResult twin = Exec("default", ws, plant, {"--disable-layer", "git-guard"});
  EXPECT_TRUE(fs::exists(ws + "/.git/hooks/pre-commit")) << twin.err;
}

TEST_F(ProfileSampleTest, NetworkNoneComesFromTheProfile) {
  if (!Have("/usr/bin/python3")) GTEST_SKIP() << "python3 is not installed on this machine";
  std::string ws = h_.MakeDir("net");
  const std::string script =
      "/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); "
      "print(\"bound\")'";
  // base says `network none`: no IP socket at all.
  RunResult none = Exec("base", ws, script + " 2>&1");
  EXPECT_THAT(none.out, Not(HasSubstr("bound")));
  EXPECT_THAT(none.out, HasSubstr("Address family not supported"));  // seccomp: EAFNOSUPPORT
  // backend says loopback.
  RunResult loopback = Exec("backend", ws, script);
  EXPECT_THAT(loopback.out, HasSubstr("bound")) << loopback.err;
}

TEST_F(ProfileSampleTest, EnvironmentIsScrubbedByTheProfile) {
  std::string ws = h_.MakeDir("env");
  RunOptions o;
  o.extra_env = {"GITHUB_TOKEN=ghp_sample_secret", "LANG=C.UTF-8", "GOPATH=/nonexistent/go"};
  RunResult r =
      h_.Run({"exec", "--profile", "backend", "--workspace", ws, "--", "/usr/bin/env"}, o);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("ghp_sample_secret")));
  EXPECT_THAT(r.out, HasSubstr("LANG=C.UTF-8"));            // base passes LANG
  EXPECT_THAT(r.out, HasSubstr("GOPATH=/nonexistent/go"));  // backend passes GOPATH
  EXPECT_THAT(r.out, HasSubstr("GOTOOLCHAIN=local"));       // backend sets it
  // Even an explicit pattern in a child cannot pass a scrubbed name.
  std::string prof = ws + "/leaky.cagent";
  std::ofstream(prof) << "extends base\nenvironment {\n  pass GITHUB_*\n}\n";
  ::chmod(prof.c_str(), 0644);
  RunResult leaky = h_.Run({"exec", "--profile", prof, "--workspace", ws, "--", "/usr/bin/env"}, o);
  ASSERT_EQ(leaky.exit_code, 0) << leaky.err;
  EXPECT_THAT(leaky.out, Not(HasSubstr("ghp_sample_secret")));
  // Twin: the same pattern in a profile without base's scrub lets the token through.
  std::string open = ws + "/open.cagent";
  std::ofstream(open) << "filesystem {\n  read-only /usr /bin /lib /lib64\n}\n"
                         "environment {\n  pass GITHUB_*\n}\n";
  ::chmod(open.c_str(), 0644);
  RunResult twin = h_.Run({"exec", "--profile", open, "--workspace", ws, "--", "/usr/bin/env"}, o);
  ASSERT_EQ(twin.exit_code, 0) << twin.err;
  EXPECT_THAT(twin.out, HasSubstr("GITHUB_TOKEN=ghp_sample_secret"));
}

TEST_F(ProfileSampleTest, CommandLineLimitsCanOnlyLower) {
  std::string ws = h_.MakeDir("limits");
  RunResult higher =
      h_.Run({"exec", "--profile", "backend", "--workspace", ws, "--cpu-time", "2h", "--", "true"});
  EXPECT_EQ(higher.exit_code, 2);
  EXPECT_THAT(higher.err, HasSubstr("can only lower the profile's limit"));
  EXPECT_THAT(higher.err, HasSubstr("cpu-time 20m at <built-in>/base.cagent:"));
  RunResult lower =
      h_.Run({"exec", "--profile", "backend", "--workspace", ws, "--cpu-time", "1m", "--", "true"});
  EXPECT_EQ(lower.exit_code, 0) << lower.err;
  RunResult widen = h_.Run(
      {"exec", "--profile", "base", "--workspace", ws, "--network", "loopback", "--", "true"});
  EXPECT_EQ(widen.exit_code, 2);
  EXPECT_THAT(widen.err, HasSubstr("would widen the profile 'base'"));
  // Paths, scrubbed variables and switched-off layers cannot be added to a profile either.
  RunResult rw = h_.Run(
      {"exec", "--profile", "readonly", "--workspace", ws, "--rw", "/var/tmp", "--", "true"});
  EXPECT_EQ(rw.exit_code, 2);
  EXPECT_THAT(rw.err, HasSubstr("--rw would widen the profile 'readonly'"));
  RunOptions token;
  token.extra_env = {"GITHUB_TOKEN=ghp_sample_secret"};
  RunResult pass = h_.Run({"exec", "--profile", "backend", "--workspace", ws, "--pass-env",
                           "GITHUB_TOKEN", "--", "/usr/bin/env"},
                          token);
  EXPECT_EQ(pass.exit_code, 2);
  EXPECT_THAT(pass.err, HasSubstr("scrubs it (scrub *_TOKEN at <built-in>/base.cagent:"));
  EXPECT_THAT(pass.out, Not(HasSubstr("ghp_sample_secret")));
  RunResult off = h_.Run(
      {"exec", "--profile", "backend", "--workspace", ws, "--disable-layer", "fs", "--", "true"});
  EXPECT_EQ(off.exit_code, 2);
  EXPECT_THAT(off.err, HasSubstr("--disable-layer cannot be combined with --profile"));
}

TEST_F(ProfileSampleTest, ARequiredMemoryLimitIsEnforcedOrTheRunIsRefused) {
  // `require memory-limit`: either the memory limit is applied, or cagent refuses to run (125)
  // and says why; it never runs without it. The twin accepts the downgrade (best-effort cgroup,
  // inherited from base) and runs, reporting it.
  std::string ws = h_.MakeDir("require");
  std::string strict = ws + "/strict.cagent";
  std::ofstream(strict) << "extends base\nrequire memory-limit\nlimits {\n  memory 1G\n}\n";
  std::string lax = ws + "/lax.cagent";
  std::ofstream(lax) << "extends base\nlimits {\n  memory 1G\n}\n";
  ::chmod(strict.c_str(), 0644);
  ::chmod(lax.c_str(), 0644);
  RunResult r =
      h_.RunJson({"exec", "--profile", strict, "--workspace", ws, "--json", "--", "true"});
  if (r.exit_code == 0) {
    EXPECT_THAT(r.json, Not(HasSubstr("memory and pids not enforced"))) << r.err;
    EXPECT_THAT(r.json, Not(HasSubstr("\"downgrades\":[\"cgroup"))) << r.json;
  } else {
    EXPECT_EQ(r.exit_code, 125) << r.err;
    EXPECT_THAT(r.err, HasSubstr("memory controller"));
    EXPECT_THAT(r.err, HasSubstr("require memory-limit"));
  }
  RunResult twin = h_.Run({"exec", "--profile", lax, "--workspace", ws, "--", "true"});
  EXPECT_EQ(twin.exit_code, 0) << twin.err;
  if (r.exit_code != 0) {
    EXPECT_THAT(twin.err, HasSubstr("downgrade: cgroup"));
  }
}

TEST_F(ProfileSampleTest, ABrokenProfileIsRefusedWithItsDiagnostics) {
  std::string ws = h_.MakeDir("broken");
  std::string prof = ws + "/broken.cagent";
  std::ofstream(prof) << "extends base\nlimits {\n  wal-time 10m\n}\n";
  ::chmod(prof.c_str(), 0644);
  RunResult r = h_.Run({"exec", "--profile", prof, "--workspace", ws, "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("broken.cagent:3:3: error: unknown key 'wal-time' in limits"));
  EXPECT_THAT(r.err, HasSubstr("did you mean 'wall-time'?"));
}

}  // namespace
}  // namespace cagent::testing
