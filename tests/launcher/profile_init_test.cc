// launcher/profile_init: a starting profile guessed from a repository and the machine's
// toolchains; always compiled before it is written.
#include "launcher/profile_init.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/engine.h"

namespace cagent::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ProfileInitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp") + "/cagent-init-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    repo_ = root_ + "/repo";
    home_ = root_ + "/home";
    ASSERT_EQ(::mkdir(repo_.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir(home_.c_str(), 0755), 0);
  }
  void TearDown() override {
    if (!root_.empty()) {
      [[maybe_unused]] int rc = std::system(("rm -rf '" + root_ + "'").c_str());
    }
  }

  void Write(const std::string& rel, const std::string& text) {
    std::string path = repo_ + "/" + rel;
    MakeParents(path);
    std::ofstream(path) << text;
  }
  void MakeParents(const std::string& path) {
    for (std::size_t i = root_.size() + 1; i < path.size(); ++i) {
      if (path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
    }
  }
  void HomeDir(const std::string& rel) {
    std::string path = home_ + "/" + rel + "/";
    MakeParents(path);
  }

  InitOptions Options(const std::string& path_env = "") {
    InitOptions o;
    o.dir = repo_;
    o.home = home_;
    o.path_env = path_env;
    o.search.dirs = {repo_ + "/.cagent"};
    return o;
  }

  // Plans, writes and re-loads the profile the way `cagent policy check` will.
  InitPlan InitAndCheck(const InitOptions& o) {
    auto plan = PlanProfile(o);
    EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().Message());
    if (!plan.ok()) return {};
    auto written = WriteProfile(*plan, false);
    EXPECT_TRUE(written.ok()) << (written.ok() ? "" : written.error().Message());
    policy::Compiled c = policy::LoadProfile(plan->path, o.search);
    EXPECT_TRUE(c.ok()) << policy::RenderAll(*c.sources, c.diags) << "\n" << plan->text;
    return *plan;
  }

  std::string root_, repo_, home_;
};

TEST_F(ProfileInitTest, PythonWithPytest) {
  Write("pyproject.toml", "[project]\nname = \"x\"\n[tool.pytest.ini_options]\naddopts = \"-q\"\n");
  Write("tests/test_x.py", "def test_x():\n    pass\n");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.parent, "backend");
  EXPECT_EQ(plan.verify, "python3 -m pytest -q");
  EXPECT_EQ(plan.path, repo_ + "/.cagent/project.cagent");
  EXPECT_THAT(plan.text, HasSubstr("extends backend\n"));
  EXPECT_THAT(plan.text, HasSubstr("run \"python3 -m pytest -q\" timeout 10m"));
  EXPECT_THAT(plan.text, HasSubstr("# "));  // commented
}

TEST_F(ProfileInitTest, PythonWithoutPytestUsesUnittest) {
  Write("setup.py", "from setuptools import setup\nsetup(name='x')\n");
  Write("tests/test_x.py", "import unittest\n");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.parent, "backend");
  EXPECT_EQ(plan.verify, "python3 -m unittest discover");
}

TEST_F(ProfileInitTest, RequirementsNamingPytest) {
  Write("requirements-dev.txt", "pytest==8.0\n");
  EXPECT_EQ(InitAndCheck(Options()).verify, "python3 -m pytest -q");
}

TEST_F(ProfileInitTest, NodeUsesFrontendAndTheTestScript) {
  Write("package.json", R"({"name": "x", "scripts": {"test": "vitest run"}})");
  HomeDir(".nvm/versions");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.parent, "frontend");
  EXPECT_EQ(plan.verify, "npm test");
  // frontend already shows ~/.nvm: not added again.
  EXPECT_THAT(plan.already, ::testing::Contains("~/.nvm"));
  EXPECT_TRUE(plan.exposed.empty());
  EXPECT_THAT(plan.text, Not(HasSubstr("read-only ~/.nvm")));
}

TEST_F(ProfileInitTest, NodePlaceholderTestScriptIsNoVerify) {
  Write("package.json", R"({"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}})");
  Write("yarn.lock", "");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.parent, "frontend");
  EXPECT_EQ(plan.verify, "");
  EXPECT_THAT(plan.text, HasSubstr("# verify {"));
}

TEST_F(ProfileInitTest, YarnProject) {
  Write("package.json", R"({"scripts": {"test": "jest"}})");
  Write("yarn.lock", "");
  EXPECT_EQ(InitAndCheck(Options()).verify, "yarn test");
}

TEST_F(ProfileInitTest, RustExposesNothingBackendAlreadyShows) {
  Write("Cargo.toml", "[package]\nname = \"x\"\n");
  HomeDir(".rustup/toolchains");
  HomeDir(".cargo/bin");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.parent, "backend");
  EXPECT_EQ(plan.verify, "cargo test --offline");
  EXPECT_THAT(plan.already, ::testing::UnorderedElementsAre("~/.rustup", "~/.cargo"));
  EXPECT_TRUE(plan.exposed.empty());
}

TEST_F(ProfileInitTest, GoToolchainsOutsideTheParentAreExposedReadOnly) {
  Write("go.mod", "module example.com/x\n");
  HomeDir("go/pkg");
  HomeDir("sdk/go1.22.0");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.verify, "go test ./...");
  ASSERT_EQ(plan.exposed.size(), 1u);
  EXPECT_EQ(plan.exposed[0].path, "~/sdk");
  EXPECT_THAT(plan.text, HasSubstr("read-only ~/sdk"));
  // The written profile shows it; its parent did not.
  policy::Compiled c = policy::LoadProfile(plan.path, Options().search);
  ASSERT_TRUE(c.ok());
  policy::Engine engine(*c.policy, {repo_, home_});
  EXPECT_EQ(engine.Path(policy::Access::kRead, home_ + "/sdk/go1.22.0").verdict,
            policy::Verdict::kAllow);
  EXPECT_EQ(engine.Path(policy::Access::kWrite, home_ + "/sdk/go1.22.0").verdict,
            policy::Verdict::kDeny);
}

TEST_F(ProfileInitTest, BackendWithPackageJsonAllowsNodeAndItsToolchains) {
  Write("pyproject.toml", "[project]\nname = \"x\"\n");
  Write("package.json", R"({"scripts": {"test": "jest"}})");
  HomeDir(".nvm");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.parent, "backend");
  ASSERT_EQ(plan.exposed.size(), 1u);
  EXPECT_EQ(plan.exposed[0].path, "~/.nvm");
  EXPECT_THAT(plan.text, HasSubstr("allow (node | npm | npx)"));
}

TEST_F(ProfileInitTest, BinaryOnPathOutsideTheParentExposesItsInstallRoot) {
  Write("package.json", R"({"scripts": {"test": "jest"}})");
  const std::string bin = root_ + "/opt-tools/node-v20/bin";
  MakeParents(bin + "/node");
  std::ofstream(bin + "/node") << "#!/bin/sh\n";
  ::chmod((bin + "/node").c_str(), 0755);
  InitPlan plan = InitAndCheck(Options("/nonexistent:" + bin));
  ASSERT_EQ(plan.exposed.size(), 1u);
  EXPECT_EQ(plan.exposed[0].path, root_ + "/opt-tools/node-v20");
  EXPECT_THAT(plan.exposed[0].why, HasSubstr("node on PATH"));
}

TEST_F(ProfileInitTest, MakefileTestTarget) {
  Write("Makefile", "CC := gcc\nall: prog\n\ntest: all\n\t./run-tests\n");
  Write("README.md", "# x\n");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.parent, "backend");
  EXPECT_EQ(plan.verify, "make test");
}

TEST_F(ProfileInitTest, CMakeProject) {
  Write("CMakeLists.txt", "project(x)\n");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.parent, "backend");
  EXPECT_THAT(plan.verify, HasSubstr("ctest --test-dir build-verify"));
}

TEST_F(ProfileInitTest, DocsOnlyRepository) {
  Write("README.md", "# x\n");
  Write("docs/index.md", "hello\n");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.parent, "docs");
  EXPECT_EQ(plan.verify, "");
  EXPECT_THAT(plan.text, HasSubstr("extends docs\n"));
}

TEST_F(ProfileInitTest, MkDocsSite) {
  Write("mkdocs.yml", "site_name: x\n");
  Write("docs/index.md", "hello\n");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.parent, "docs");
  EXPECT_THAT(plan.verify, HasSubstr("mkdocs build --strict"));
}

TEST_F(ProfileInitTest, NeverOverwritesWithoutForce) {
  Write("Cargo.toml", "[package]\nname = \"x\"\n");
  InitPlan plan = InitAndCheck(Options());
  std::ofstream(plan.path) << "# mine\n";
  auto again = WriteProfile(plan, false);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.error().Message(), HasSubstr("already exists"));
  std::ifstream in(plan.path);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_EQ(s.str(), "# mine\n");
  ASSERT_TRUE(WriteProfile(plan, true).ok());
  std::ifstream in2(plan.path);
  std::stringstream s2;
  s2 << in2.rdbuf();
  EXPECT_EQ(s2.str(), plan.text);
}

TEST_F(ProfileInitTest, DoesNotFollowASymlinkAtThePath) {
  Write("Cargo.toml", "[package]\nname = \"x\"\n");
  auto plan = PlanProfile(Options());
  ASSERT_TRUE(plan.ok());
  MakeParents(plan->path);
  const std::string target = root_ + "/elsewhere";
  std::ofstream(target) << "keep\n";
  ASSERT_EQ(::symlink(target.c_str(), plan->path.c_str()), 0);
  EXPECT_FALSE(WriteProfile(*plan, true).ok());
  std::ifstream in(target);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_EQ(s.str(), "keep\n");
}

TEST_F(ProfileInitTest, RefusesNamesThatShadowBuiltinsOrAreInvalid) {
  Write("Cargo.toml", "[package]\n");
  InitOptions o = Options();
  o.name = "backend";
  auto plan = PlanProfile(o);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.error().Message(), HasSubstr("built-in"));
  // Usage errors (exit 2), told apart from a profile that does not compile (exit 1) by the code.
  EXPECT_EQ(plan.error().code, Error::Code::kInvalidInput);
  o.name = "../evil";
  auto evil = PlanProfile(o);
  ASSERT_FALSE(evil.ok());
  EXPECT_EQ(evil.error().code, Error::Code::kInvalidInput);
  o.name = ".hidden";
  EXPECT_FALSE(PlanProfile(o).ok());
  o.name = "project";
  o.dir = root_ + "/no-such-directory";
  auto missing = PlanProfile(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Error::Code::kInvalidInput);
  EXPECT_THAT(missing.error().Message(), HasSubstr("is not a directory"));
}

TEST_F(ProfileInitTest, RefusesToWriteAProfileThatDoesNotCompile) {
  // The repository's own copy of the parent is broken: the generated profile extends it (as it
  // would when loaded from here), so it cannot compile, and nothing is written.
  Write("Cargo.toml", "[package]\n");
  Write(".cagent/backend.cagent", "network sideways\n");
  auto plan = PlanProfile(Options());
  ASSERT_FALSE(plan.ok());
  // kFailed, not kInvalidInput: `cagent profile init` returns 1 for it (and prints the detail as
  // the diagnostics), 2 for a usage error.
  EXPECT_EQ(plan.error().code, Error::Code::kFailed) << CodeName(plan.error().code);
  EXPECT_THAT(plan.error().op, HasSubstr("the generated profile does not compile"));
  EXPECT_THAT(plan.error().detail, HasSubstr("backend.cagent:1:9: error: unknown network mode"));
  EXPECT_THAT(plan.error().detail, HasSubstr("  network sideways\n" + std::string(10, ' ') + "^" +
                                             std::string(7, '~') + "\n"));
  struct stat st {};
  EXPECT_NE(::stat((repo_ + "/.cagent/project.cagent").c_str(), &st), 0);
}

TEST_F(ProfileInitTest, NotADirectory) {
  InitOptions o = Options();
  o.dir = root_ + "/missing";
  EXPECT_FALSE(PlanProfile(o).ok());
}

TEST(MakefileScanTest, InspectRepositoryFindsMarkers) {
  char tmpl[] = "/tmp/cagent-init-scan-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string d = tmpl;
  std::ofstream(d + "/go.mod") << "module x\n";
  std::ofstream(d + "/GNUmakefile") << "check:\n\tgo vet ./...\n";
  RepoFacts f = InspectRepository(d);
  EXPECT_TRUE(f.go);
  EXPECT_TRUE(f.make);
  EXPECT_EQ(f.make_target, "check");
  EXPECT_THAT(f.markers, ::testing::ElementsAre("go.mod", "GNUmakefile"));
  [[maybe_unused]] int rc = std::system(("rm -rf '" + d + "'").c_str());
}

}  // namespace
}  // namespace cagent::launcher
