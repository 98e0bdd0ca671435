#include "launcher/sandbox/process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cagent::launcher {
namespace {

using ::testing::ElementsAre;

TEST(ProcessTest, EnvironmentHasOnlyWhatTheSpecAllows) {
  LaunchSpec spec = DefaultLaunchSpec("/ws", {"true"});
  spec.env_set = {{"PATH", "/usr/bin"}, {"HOME", "/home/cagent"}};
  spec.env_pass = {"TERM", "LANG"};
  std::vector<std::string> storage = {"SECRET_TOKEN=x", "TERM=xterm", "PATH=/evil", "LANG",
                                      "LANGUAGE=fr"};
  std::vector<char*> caller;
  for (auto& s : storage) caller.push_back(s.data());
  caller.push_back(nullptr);
  // Set values win over passed ones; a name without '=' and a mere prefix match do not pass.
  EXPECT_THAT(BuildEnvironment(spec, caller.data()),
              ElementsAre("PATH=/usr/bin", "HOME=/home/cagent", "TERM=xterm"));
  spec.disabled.Add(Layer::kEnvScrub);
  // With the layer off, the caller's environment passes verbatim.
  EXPECT_EQ(BuildEnvironment(spec, caller.data()), storage);
}

// issue 36: a credential's placeholder is an override; neither a set nor a passed variable of the
// same name can bring the real value in, not even with the env layer off. Twin: without the
// override the passed variable carries the caller's value.
TEST(ProcessTest, AnOverrideWinsOverSetAndPassedVariables) {
  LaunchSpec spec = DefaultLaunchSpec("/ws", {"true"});
  spec.env_set = {{"PATH", "/usr/bin"}, {"TOKEN", "from-set"}};
  spec.env_pass = {"TOKEN", "NPM_TOKEN"};
  std::vector<std::string> storage = {"TOKEN=real", "NPM_TOKEN=real-npm"};
  std::vector<char*> caller;
  for (auto& s : storage) caller.push_back(s.data());
  caller.push_back(nullptr);
  EXPECT_THAT(BuildEnvironment(spec, caller.data()),
              ElementsAre("PATH=/usr/bin", "TOKEN=from-set", "NPM_TOKEN=real-npm"));
  spec.env_override = {{"NPM_TOKEN", "npm_placeholder"}, {"TOKEN", "placeholder"}};
  EXPECT_THAT(BuildEnvironment(spec, caller.data()),
              ElementsAre("NPM_TOKEN=npm_placeholder", "TOKEN=placeholder", "PATH=/usr/bin"));
  spec.disabled.Add(Layer::kEnvScrub);
  EXPECT_THAT(BuildEnvironment(spec, caller.data()),
              ElementsAre("NPM_TOKEN=npm_placeholder", "TOKEN=placeholder"));
}

TEST(ProcessTest, CommandIsSearchedInTheSandboxPath) {
  LaunchSpec spec = DefaultLaunchSpec("/ws", {"make", "-j2"});
  spec.env_set = {{"PATH", "/usr/local/bin::/usr/bin"}};
  char* empty_env[] = {nullptr};
  auto plan = PrepareExec(spec, empty_env);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->candidates, ElementsAre("/usr/local/bin/make", "./make", "/usr/bin/make"));
  ASSERT_EQ(plan->argv.size(), 3U);
  EXPECT_STREQ(plan->argv[1], "-j2");
  EXPECT_EQ(plan->argv[2], nullptr);

  spec.argv = {"./build.sh"};
  plan = PrepareExec(spec, empty_env);
  EXPECT_THAT(plan->candidates, ElementsAre("./build.sh"));
}

TEST(ProcessTest, CloseFdsExceptKeepsOnlyTheListed) {
  // In a forked child, so the test runner's own descriptors are untouched.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int a = open("/dev/null", O_RDONLY);
    const int b = open("/dev/null", O_RDONLY);
    const int c = open("/dev/null", O_RDONLY);
    const int keep[] = {b};
    if (CloseFdsExcept(keep, 1) != 0) _exit(10);
    const bool ok = fcntl(a, F_GETFD) == -1 && fcntl(b, F_GETFD) != -1 && fcntl(c, F_GETFD) == -1 &&
                    fcntl(2, F_GETFD) != -1;
    _exit(ok ? 0 : 11);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace cagent::launcher
