// launcher/profile/init: a starting profile guessed from a repository and the machine's
// toolchains; always compiled before it is written.
#include "launcher/profile/init.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/profile/repo_profiles.h"
#include "policy/language/engine.h"

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
    o.name = "project";
    o.in_repository = true;  // the per-repository directory has its own tests below
    o.home = home_;
    o.path_env = path_env;
    o.search.dirs = {repo_ + "/.cagent"};
    return o;
  }
  // The default since issue 32: the profile outside the repository, under CONFIG/repos/KEY.
  InitOptions Outside(const std::string& path_env = "") {
    InitOptions o;
    o.dir = repo_;
    o.home = home_;
    o.path_env = path_env;
    o.config_dir = root_ + "/config";
    if (auto id = IdentifyRepository(repo_)) {
      o.search.dirs = {repo_ + "/.cagent", RepositoryProfileDir(o.config_dir, *id)};
    }
    return o;
  }

  // Plans, writes and re-loads the profile the way `cagent policy check` will.
  InitPlan InitAndCheck(const InitOptions& o) {
    auto plan = PlanProfile(o);
    EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().Message());
    if (!plan.ok()) return {};
    auto written = WriteProfile(*plan, o.force);
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
  EXPECT_EQ(plan.verify, "python3 -m unittest discover -s tests");
}

TEST_F(ProfileInitTest, RequirementsNamingPytest) {
  Write("requirements-dev.txt", "pytest==8.0\n");
  // A requirement is a dependency: the tests run in the virtualenv setup makes.
  EXPECT_EQ(InitAndCheck(Options()).verify, ".venv/bin/python -m pytest -q");
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

// A version manager's shim (pyenv, rbenv, nodenv, asdf) is a script that runs ROOT/libexec and
// ROOT/versions: the shims directory alone gives a python3 that exits 127 inside (found on a
// machine with pyenv, issue 32). The manager's root is the toolchain.
TEST_F(ProfileInitTest, AVersionManagersShimExposesTheManagersRoot) {
  Write("pyproject.toml", "[project]\nname = \"x\"\n");
  const std::string shims = root_ + "/tools/.pyenv/shims";
  MakeParents(shims + "/python3");
  MakeParents(root_ + "/tools/.pyenv/libexec/pyenv");
  std::ofstream(shims + "/python3") << "#!/bin/sh\nexec ROOT/libexec/pyenv exec python3\n";
  ::chmod((shims + "/python3").c_str(), 0755);
  InitPlan plan = InitAndCheck(Options("/nonexistent:" + shims));
  ASSERT_EQ(plan.exposed.size(), 1u);
  EXPECT_EQ(plan.exposed[0].path, root_ + "/tools/.pyenv");
  EXPECT_THAT(plan.exposed[0].why, HasSubstr("python3 on PATH"));
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
  EXPECT_EQ(plan.verify,
            "cmake -S . -B build && cmake --build build && ctest --test-dir build "
            "--output-on-failure");
  EXPECT_EQ(plan.outputs, (std::vector<std::string>{"build"}));
  EXPECT_THAT(plan.text, HasSubstr("\noutputs build\n"));
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

// ---- issue 32: outside the repository, named after it, per ecosystem ----

TEST_F(ProfileInitTest, ByDefaultTheProfileIsWrittenOutsideTheRepositoryUnderItsName) {
  Write("go.mod", "module example.com/x\n");
  const InitOptions o = Outside();
  InitPlan plan = InitAndCheck(o);
  auto id = IdentifyRepository(repo_);
  ASSERT_TRUE(id);
  EXPECT_EQ(plan.name, "repo");  // the directory's name
  EXPECT_FALSE(plan.in_repository);
  EXPECT_EQ(plan.repository, id->root);
  EXPECT_EQ(plan.path, root_ + "/config/repos/" + id->key + "/repo.cagent");
  EXPECT_TRUE(id->key.starts_with("repo-"));
  EXPECT_EQ(id->key.size(), std::string("repo-").size() + 12);
  struct stat st {};
  EXPECT_NE(::stat((repo_ + "/.cagent").c_str(), &st), 0) << "nothing is written into the repo";
  EXPECT_THAT(plan.text, HasSubstr("Kept outside the repository"));
  // A second repository of the same name elsewhere has another key.
  const std::string other = root_ + "/elsewhere/repo";
  MakeParents(other + "/x");
  auto other_id = IdentifyRepository(other);
  ASSERT_TRUE(other_id);
  EXPECT_EQ(other_id->name, "repo");
  EXPECT_NE(other_id->key, id->key);
}

TEST_F(ProfileInitTest, WithoutAConfigurationDirectoryOnlyInRepoWorks) {
  Write("go.mod", "module x\n");
  InitOptions o = Outside();
  o.config_dir.clear();
  auto plan = PlanProfile(o);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, Error::Code::kInvalidInput);
  EXPECT_THAT(plan.error().Message(), HasSubstr("--in-repo"));
}

TEST_F(ProfileInitTest, AnOutsideProfileNeverTakesItsParentFromTheRepository) {
  // Twin of RefusesToWriteAProfileThatDoesNotCompile: the same broken .cagent/backend.cagent is
  // the parent of a profile written into the repository, never of one written outside it.
  Write("Cargo.toml", "[package]\n");
  Write(".cagent/backend.cagent", "network sideways\n");
  InitPlan plan = InitAndCheck(Outside());
  EXPECT_EQ(plan.parent, "backend");
}

TEST(RepositoryProfileName, IsSanitisedAndNeverABuiltinsName) {
  EXPECT_EQ(RepositoryProfileName("my-app"), "my-app");
  EXPECT_EQ(RepositoryProfileName("My App (v2)"), "My-App-v2");
  EXPECT_EQ(RepositoryProfileName(".dotfiles"), "dotfiles");
  EXPECT_EQ(RepositoryProfileName("../../etc"), "etc");
  EXPECT_EQ(RepositoryProfileName("日本"), "repo");
  EXPECT_EQ(RepositoryProfileName("backend"), "backend-repo");
  EXPECT_EQ(RepositoryProfileName(std::string(100, 'a')).size(), 48U);
}

TEST(RepositoryIdentity, TheTopLevelIsTheDirectoryHoldingGit) {
  char tmpl[] = "/tmp/cagent-init-id-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string d = tmpl;
  ASSERT_EQ(::mkdir((d + "/proj").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((d + "/proj/.git").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((d + "/proj/src").c_str(), 0755), 0);
  auto top = IdentifyRepository(d + "/proj");
  auto sub = IdentifyRepository(d + "/proj/src");
  ASSERT_TRUE(top && sub);
  EXPECT_EQ(sub->root, top->root);
  EXPECT_EQ(sub->key, top->key);
  EXPECT_EQ(top->name, "proj");
  EXPECT_FALSE(IdentifyRepository(d + "/missing"));
  [[maybe_unused]] int rc = std::system(("rm -rf '" + d + "'").c_str());
}

TEST_F(ProfileInitTest, PythonSrcLayoutWithUnittestAndNoDependencies) {
  Write("pyproject.toml", "[project]\nname = \"calc\"\ndependencies = []\n");
  Write("src/calc/__init__.py", "");
  Write("tests/__init__.py", "");
  Write("tests/test_calc.py", "import unittest\n");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.verify, "PYTHONPATH=src python3 -m unittest discover -s tests -t .");
  EXPECT_TRUE(plan.setup.empty());
  EXPECT_THAT(plan.outputs, ::testing::Contains("**/__pycache__"));
  EXPECT_THAT(plan.text, HasSubstr("no dependencies are declared"));
}

TEST_F(ProfileInitTest, PythonWithDependenciesGetsAVirtualenvFromPyPi) {
  Write("pyproject.toml", "[project]\nname = \"x\"\ndependencies = [\n  \"requests\",\n]\n");
  Write("src/x/__init__.py", "");
  Write("tests/test_x.py", "def test_x():\n    pass\n");
  Write("conftest.py", "");
  InitPlan plan = InitAndCheck(Options());
  ASSERT_EQ(plan.setup.size(), 1U);
  EXPECT_EQ(plan.setup[0],
            "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/pip install -q "
            "pytest");
  EXPECT_EQ(plan.verify, ".venv/bin/python -m pytest -q");
  EXPECT_EQ(plan.setup_hosts,
            (std::vector<std::string>{"pypi.org:443", "files.pythonhosted.org:443"}));
  EXPECT_EQ(plan.caches, (std::vector<std::string>{"~/.cache/pip"}));
  EXPECT_THAT(plan.outputs, ::testing::Contains(".venv"));
  EXPECT_THAT(plan.text,
              HasSubstr("  hosts {\n    allow pypi.org:443 files.pythonhosted.org:443\n  }\n"));
}

TEST_F(ProfileInitTest, RequirementsFilesAreInstalledIntoTheVirtualenv) {
  Write("requirements.txt", "# pinned\nflask==3.0\n");
  Write("requirements-empty.txt", "# nothing\n");
  Write("test_app.py", "");
  InitPlan plan = InitAndCheck(Options());
  ASSERT_EQ(plan.setup.size(), 1U);
  EXPECT_EQ(plan.setup[0], "python3 -m venv .venv && .venv/bin/pip install -q -r requirements.txt");
  EXPECT_EQ(plan.verify, ".venv/bin/python -m unittest discover");
}

TEST_F(ProfileInitTest, NodeChoosesThePackageManagerByLockfile) {
  Write("package.json", R"({"scripts": {"test": "node --test"}, "dependencies": {"a": "1"}})");
  Write("package-lock.json", "{}");
  InitPlan npm = InitAndCheck(Options());
  EXPECT_EQ(npm.setup, (std::vector<std::string>{"npm ci --no-audit --no-fund"}));
  EXPECT_EQ(npm.caches, (std::vector<std::string>{"~/.npm"}));
  EXPECT_EQ(npm.setup_hosts, (std::vector<std::string>{"registry.npmjs.org:443"}));
  EXPECT_EQ(npm.verify, "npm test");
  EXPECT_THAT(npm.outputs, ::testing::Contains("node_modules"));
  ::unlink((repo_ + "/package-lock.json").c_str());
  InitOptions o = Options();
  o.force = true;
  InitPlan bare = InitAndCheck(o);
  EXPECT_EQ(bare.setup,
            (std::vector<std::string>{"npm install --no-audit --no-fund --no-package-lock"}));
  Write("pnpm-lock.yaml", "");
  auto pnpm = PlanProfile(o);
  ASSERT_TRUE(pnpm.ok());
  EXPECT_EQ(pnpm->setup, (std::vector<std::string>{"pnpm install --frozen-lockfile"}));
  EXPECT_EQ(pnpm->verify, "pnpm test");
}

TEST_F(ProfileInitTest, NodeWithoutDependenciesHasNoSetupAndSaysSo) {
  Write("package.json", R"({"scripts": {"test": "node --test"}})");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_TRUE(plan.setup.empty());
  EXPECT_TRUE(plan.caches.empty());
  EXPECT_THAT(plan.text, HasSubstr("declares no dependencies and there is no lockfile: no setup"));
  EXPECT_THAT(plan.text, Not(HasSubstr("setup {")));
}

TEST_F(ProfileInitTest, GoKeepsItsBuildCacheAndDownloadsModulesWhenItRequiresSome) {
  Write("go.mod", "module x\n\ngo 1.19\n");
  InitPlan plain = InitAndCheck(Options());
  EXPECT_TRUE(plain.setup.empty());
  EXPECT_EQ(plain.caches, (std::vector<std::string>{"~/.cache/go-build"}));
  Write("go.mod", "module x\n\ngo 1.19\n\nrequire golang.org/x/text v0.14.0\n");
  InitOptions o = Options();
  o.force = true;
  InitPlan deps = InitAndCheck(o);
  EXPECT_EQ(deps.setup, (std::vector<std::string>{"go mod download"}));
  EXPECT_EQ(deps.caches, (std::vector<std::string>{"~/go/pkg/mod", "~/.cache/go-build"}));
  EXPECT_EQ(deps.setup_hosts,
            (std::vector<std::string>{"proxy.golang.org:443", "sum.golang.org:443"}));
}

TEST_F(ProfileInitTest, RustFetchesThenTestsOffline) {
  Write("Cargo.toml", "[package]\nname = \"x\"\n");
  InitPlan plan = InitAndCheck(Options());
  EXPECT_EQ(plan.setup, (std::vector<std::string>{"cargo fetch"}));
  EXPECT_EQ(plan.caches, (std::vector<std::string>{"~/.cargo/registry", "~/.cargo/git"}));
  EXPECT_EQ(plan.outputs, (std::vector<std::string>{"target", "Cargo.lock"}));
  EXPECT_EQ(plan.verify, "cargo test --offline");
}

TEST_F(ProfileInitTest, MesonMavenGradleAndShell) {
  Write("meson.build", "project('x', 'c')\n");
  EXPECT_EQ(InitAndCheck(Options()).verify, "meson setup build && meson test -C build");
  ::unlink((repo_ + "/meson.build").c_str());
  InitOptions o = Options();
  o.force = true;
  Write("pom.xml", "<project/>\n");
  InitPlan maven = InitAndCheck(o);
  EXPECT_EQ(maven.setup, (std::vector<std::string>{"mvn -q -B dependency:go-offline"}));
  EXPECT_EQ(maven.verify, "mvn -o -q test");
  EXPECT_EQ(maven.caches, (std::vector<std::string>{"~/.m2/repository"}));
  ::unlink((repo_ + "/pom.xml").c_str());
  Write("build.gradle", "");
  Write("gradlew", "#!/bin/sh\n");
  InitPlan gradle = InitAndCheck(o);
  EXPECT_EQ(gradle.verify, "./gradlew --offline --no-daemon test");
  ::unlink((repo_ + "/build.gradle").c_str());
  ::unlink((repo_ + "/gradlew").c_str());
  Write("install.sh", "#!/bin/sh\n");
  Write("test/install.bats", "@test x { true; }\n");
  // bats and shellcheck found on PATH (fakes, never run here).
  const std::string bin = root_ + "/bin";
  for (const char* tool : {"bats", "shellcheck"}) {
    MakeParents(bin + "/" + tool);
    std::ofstream(bin + "/" + tool) << "#!/bin/sh\n";
    ::chmod((bin + "/" + tool).c_str(), 0755);
  }
  InitOptions sh = Options(bin);
  sh.force = true;
  EXPECT_EQ(InitAndCheck(sh).verify, "bats test && shellcheck *.sh");
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
