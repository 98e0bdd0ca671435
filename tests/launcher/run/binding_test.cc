// One binding, four consumers (policy/language/binding.h): a profile's `read-only`, `hide` and
// `deny` paths name the same files in the sandbox's view (SpecFromPolicy), in the broker's engine
// and the agent's path filter (policy::Engine over the run's binding), in the run's patch check
// (CheckPatch) and in `policy explain` (which binds with RunBinding, as the run does).
//
// The twin: with the bindings the consumers used before they shared one (the engine and the patch
// check bound "~" to the sandbox's own /home/cagent while the view bound it to the caller's home),
// the same profile hides a file in the view that the engine allows, and the patch check passes a
// change the view protects.
#include "policy/language/binding.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "launcher/profile/spec.h"
#include "launcher/run/workspace.h"
#include "policy/language/diagnostics.h"
#include "policy/language/engine.h"
#include "policy/language/loader.h"

namespace cagent::launcher {
namespace {

namespace fs = std::filesystem;

constexpr const char* kProfile =
    "network none\n"
    "filesystem {\n"
    "  read-only ~/tools\n"
    "  hide ~/.cargo/credentials.toml\n"
    "  deny write ~/proj/**/*.lock\n"
    "}\n";

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

class BindingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-binding-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = fs::canonical(tmpl).string();
    home_ = root_ + "/alice";
    ws_ = home_ + "/proj";  // a workspace inside the caller's home, as a checkout usually is
    fs::create_directories(home_ + "/tools");
    fs::create_directories(home_ + "/.cargo");
    fs::create_directories(ws_ + "/sub");
    std::ofstream(home_ + "/.cargo/credentials.toml") << "token = \"secret\"\n";
    std::ofstream(ws_ + "/sub/old.lock") << "v1\n";
    policy::SearchPath search;
    policy::Compiled c = policy::CompileText("binding.cagent", kProfile, search);
    ASSERT_TRUE(c.ok()) << policy::RenderAll(*c.sources, c.diags);
    compiled_ = std::move(c);
    const char* old = std::getenv("HOME");
    old_home_ = old != nullptr ? old : "";
    had_home_ = old != nullptr;
    ::setenv("HOME", home_.c_str(), 1);
  }
  void TearDown() override {
    if (had_home_) {
      ::setenv("HOME", old_home_.c_str(), 1);
    } else {
      ::unsetenv("HOME");
    }
    fs::remove_all(root_);
  }
  const policy::Policy& P() const { return *compiled_.policy; }

  // The patch check over a change set that adds `path` (workspace-relative).
  std::vector<run::PatchViolation> Check(const std::string& path, const policy::Binding& b) {
    run::CapturedPatch patch;
    patch.patch = "diff --git a/" + path + " b/" + path + "\n";
    patch.files.push_back(run::ChangedFile{path, 'A', "", "100644", false, false});
    return run::CheckPatch(patch, P(), b);
  }

  std::string root_, home_, ws_, old_home_;
  bool had_home_ = false;
  policy::Compiled compiled_;
};

TEST_F(BindingTest, RunBindingIsTheCallersHomeAndTheSandboxesOwnHome) {
  const policy::Binding b = RunBinding(ws_);
  EXPECT_EQ(b.workspace, ws_);
  EXPECT_EQ(b.home, home_);                   // "~" is the caller's home...
  EXPECT_EQ(b.sandbox_home, "/home/cagent");  // ...not the sandbox's HOME
  EXPECT_EQ(b, RunBinding(ws_)) << "the binding is a function of the workspace and the caller";
}

TEST_F(BindingTest, ViewEngineAndPatchCheckNameTheSameFiles) {
  const policy::Binding b = RunBinding(ws_);
  const std::string secret = home_ + "/.cargo/credentials.toml";
  const std::string tools = home_ + "/tools";
  const std::string old_lock = ws_ + "/sub/old.lock";

  // 1. The view.
  auto built = SpecFromPolicy(P(), {"true"}, ProfileContext{b, {}});
  ASSERT_TRUE(built.ok()) << built.error().Message();
  const LaunchSpec& spec = built->spec;
  EXPECT_TRUE(Contains(spec.hidden_paths, secret));
  EXPECT_TRUE(Contains(spec.read_only_paths, tools));
  EXPECT_TRUE(Contains(spec.read_only_paths, old_lock)) << "deny write covers an existing match";
  EXPECT_EQ(spec.home, b.sandbox_home);

  // 2. The broker's engine (and the agent's filter, which gets the same binding in `welcome`).
  const policy::Engine engine(P(), b);
  EXPECT_EQ(engine.Path(policy::Access::kRead, secret).verdict, policy::Verdict::kDeny);
  EXPECT_EQ(engine.Path(policy::Access::kRead, tools + "/bin/x").verdict, policy::Verdict::kAllow);
  EXPECT_EQ(engine.Path(policy::Access::kWrite, tools + "/bin/x").verdict, policy::Verdict::kDeny);
  EXPECT_EQ(engine.Path(policy::Access::kWrite, old_lock).verdict, policy::Verdict::kDeny);
  EXPECT_EQ(engine.Path(policy::Access::kWrite, "sub/new.lock").verdict, policy::Verdict::kDeny)
      << "a file created later: the view cannot cover it, the engine does";
  EXPECT_EQ(engine.Path(policy::Access::kWrite, "sub/new.txt").verdict, policy::Verdict::kAllow);

  // 3. The patch check: the lockfile the agent created is refused, an ordinary file is not.
  const auto refused = Check("sub/new.lock", b);
  ASSERT_EQ(refused.size(), 1U);
  EXPECT_EQ(refused[0].path, "sub/new.lock");
  EXPECT_TRUE(Check("sub/new.txt", b).empty());

  // 4. `policy explain` binds with RunBinding over its workspace: the same value as the run's.
  EXPECT_EQ(RunBinding(ws_), b);
}

// The guard switched off: the bindings each consumer made on its own before. The view still hides
// the file (it bound "~" to the caller's home), but the engine and the patch check, bound to the
// sandbox's /home/cagent, judge another file under the same rule text.
TEST_F(BindingTest, SeparateBindingsDisagreeAboutTheSameRule) {
  const policy::Binding view_binding{ws_, home_, "/home/cagent"};
  const policy::Binding old_engine_binding{ws_, "/home/cagent", "/home/cagent"};
  const std::string secret = home_ + "/.cargo/credentials.toml";

  auto built = SpecFromPolicy(P(), {"true"}, ProfileContext{view_binding, {}});
  ASSERT_TRUE(built.ok()) << built.error().Message();
  EXPECT_TRUE(Contains(built->spec.hidden_paths, secret));

  const policy::Engine old_engine(P(), old_engine_binding);
  EXPECT_NE(old_engine.Path(policy::Access::kRead, secret).verdict, policy::Verdict::kDeny)
      << "with its own binding the engine does not see the hide rule's file";
  EXPECT_NE(old_engine.Path(policy::Access::kWrite, "sub/new.lock").verdict,
            policy::Verdict::kDeny);
  EXPECT_TRUE(Check("sub/new.lock", old_engine_binding).empty())
      << "with its own binding the patch check passes a lockfile the profile protects";
}

}  // namespace
}  // namespace cagent::launcher
