// policy/audit: risk findings, each located at the statement responsible.
#include "policy/review/audit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using ::testing::HasSubstr;
using testing::MustCompile;

std::shared_ptr<const Policy> Builtin(std::string_view name) {
  SearchPath search;
  Compiled c = LoadProfile(name, search);
  EXPECT_TRUE(c.ok()) << RenderAll(*c.sources, c.diags);
  return c.policy;
}

std::vector<const Finding*> Of(const std::vector<Finding>& fs, std::string_view id) {
  std::vector<const Finding*> out;
  for (const auto& f : fs) {
    if (f.rule_id == id) out.push_back(&f);
  }
  return out;
}

std::string Print(const Policy& p, const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs) {
    s += std::string(RiskName(f.risk)) + " " + std::string(f.rule_id) + " " + p.Where(f.loc) +
         ": " + f.message + "\n";
  }
  return s;
}

TEST(AuditTest, RulesHaveStableUniqueIds) {
  std::set<std::string_view> ids;
  for (const auto& r : AuditRules()) {
    EXPECT_TRUE(r.id.starts_with("CAGENT")) << r.id;
    EXPECT_TRUE(ids.insert(r.id).second) << r.id;
    EXPECT_FALSE(r.short_description.empty());
  }
  EXPECT_EQ(AuditRules().front().id, "CAGENT001");
  EXPECT_EQ(AuditRules().size(), 18u);
  for (const auto& r : AuditRules()) EXPECT_FALSE(r.help.empty()) << r.id;
}

TEST(AuditTest, BuiltinBackend) {
  auto p = Builtin("backend");
  auto parent = Builtin("base");
  auto fs = Audit(*p, parent.get());
  const std::string all = Print(*p, fs);

  // Every program runs (`commands { default allow }`): said once, plainly, where it is written.
  auto interp = Of(fs, "CAGENT005");
  ASSERT_FALSE(interp.empty()) << all;
  bool by_default = false;
  for (const auto* f : interp) {
    if (f->message.starts_with("'commands: default allow' lets every program no rule names run")) {
      by_default = true;
      EXPECT_EQ(p->Where(f->loc),
                "<built-in>/backend.cagent:" + std::to_string(p->command_default.loc.line) + ":3");
      EXPECT_EQ(f->risk, Risk::kLow);
      EXPECT_THAT(f->message, HasSubstr("not the command list, is the boundary"));
    }
  }
  EXPECT_TRUE(by_default) << all;

  auto net = Of(fs, "CAGENT001");
  ASSERT_EQ(net.size(), 1u) << all;
  EXPECT_THAT(net[0]->message, HasSubstr("network loopback"));
  EXPECT_EQ(p->Where(net[0]->loc), "<built-in>/backend.cagent:6:1");

  auto be = Of(fs, "CAGENT009");
  ASSERT_EQ(be.size(), 1u) << all;
  EXPECT_THAT(be[0]->message, HasSubstr("best-effort cgroup"));
  EXPECT_EQ(be[0]->risk, Risk::kLow);
  ASSERT_FALSE(p->best_effort.empty());
  EXPECT_EQ(p->Where(be[0]->loc), p->Where(p->best_effort.front().loc));
  EXPECT_TRUE(p->Where(be[0]->loc).starts_with("<built-in>/base.cagent:")) << p->Where(be[0]->loc);

  // backend asks a person (approval on-request), so its asks are not silent denials.
  EXPECT_THAT(Of(fs, "CAGENT006"), ::testing::IsEmpty()) << all;
  // The default covers programs in the workspace and every runner: no finding per runner, and
  // none for the wrappers, xargs and find -exec, whose command the engine judges.
  for (const auto* f : interp) {
    EXPECT_THAT(f->message, ::testing::Not(HasSubstr("programs in the workspace [runner]")));
    EXPECT_THAT(f->message, ::testing::Not(HasSubstr("find [runner")));
    EXPECT_THAT(f->message, ::testing::Not(HasSubstr("xargs [runner")));
    EXPECT_THAT(f->message, ::testing::Not(HasSubstr("timeout [runner")));
  }

  // ~/.cargo, ~/.m2 and ~/.gradle are exposed read-only, but the credential files inside them are
  // hidden by the profile (the audit found them before they were).
  EXPECT_THAT(Of(fs, "CAGENT003"), ::testing::IsEmpty()) << all;

  // base denies secrets in the workspace, bounds every limit and requires landlock and seccomp.
  EXPECT_THAT(Of(fs, "CAGENT004"), ::testing::IsEmpty()) << all;
  EXPECT_THAT(Of(fs, "CAGENT008"), ::testing::IsEmpty()) << all;
  EXPECT_THAT(Of(fs, "CAGENT010"), ::testing::IsEmpty()) << all;
  EXPECT_THAT(Of(fs, "CAGENT002"), ::testing::IsEmpty()) << all;
  EXPECT_THAT(Of(fs, "CAGENT007"), ::testing::IsEmpty()) << all;
  for (const auto& f : fs) EXPECT_NE(f.risk, Risk::kHigh) << all;

  // Against base: turning the network on overrides a value base set (medium); added allow rules
  // are what a child is for (info).
  auto weak = Of(fs, "CAGENT011");
  bool network_override = false;
  for (const auto* f : weak) {
    if (f->message.find("network none -> loopback") != std::string::npos) {
      network_override = true;
      EXPECT_EQ(f->risk, Risk::kMedium);
      EXPECT_EQ(p->Where(f->loc), "<built-in>/backend.cagent:6:1");
    } else if (f->message.find("added: allow") != std::string::npos) {
      EXPECT_EQ(f->risk, Risk::kInfo) << f->message;
    }
  }
  EXPECT_TRUE(network_override) << all;

  // Most severe first.
  for (std::size_t i = 1; i < fs.size(); ++i) EXPECT_LE(fs[i - 1].risk, fs[i].risk) << all;
}

constexpr std::string_view kBad = R"(description "deliberately bad"
approval auto
network loopback
filesystem {
  read-write ~
}
commands {
  allow *
  ask pip install
}
limits {
  wall-time unlimited
  memory unlimited
}
)";

TEST(AuditTest, DeliberatelyBadProfile) {
  auto p = MustCompile(kBad, "bad.cagent");
  ASSERT_NE(p, nullptr);
  auto fs = Audit(*p);
  const std::string all = Print(*p, fs);

  auto writable = Of(fs, "CAGENT002");
  ASSERT_EQ(writable.size(), 1u) << all;
  EXPECT_EQ(writable[0]->risk, Risk::kHigh);
  EXPECT_THAT(writable[0]->message, HasSubstr("read-write ~"));
  EXPECT_EQ(p->Where(writable[0]->loc), "bad.cagent:5:14");

  auto secrets = Of(fs, "CAGENT003");
  ASSERT_EQ(secrets.size(), 1u) << all;
  EXPECT_EQ(secrets[0]->risk, Risk::kHigh);
  EXPECT_THAT(secrets[0]->message, HasSubstr("~/.docker"));
  EXPECT_THAT(secrets[0]->message, HasSubstr("~/.config"));
  // The host secret set (~/.ssh, ~/.aws, ...) is hidden by cagent in every sandbox.
  EXPECT_THAT(secrets[0]->message, ::testing::Not(HasSubstr("~/.ssh")));
  EXPECT_EQ(p->Where(secrets[0]->loc), "bad.cagent:5:14");

  auto autoapp = Of(fs, "CAGENT007");
  ASSERT_EQ(autoapp.size(), 1u) << all;
  EXPECT_EQ(autoapp[0]->risk, Risk::kHigh);
  EXPECT_EQ(p->Where(autoapp[0]->loc), "bad.cagent:2:1");
  EXPECT_THAT(Of(fs, "CAGENT006"), ::testing::IsEmpty());

  auto everything = Of(fs, "CAGENT005");
  ASSERT_EQ(everything.size(), 1u) << all;  // `allow *` decides for the interpreters too
  EXPECT_THAT(everything[0]->message, HasSubstr("allows every command"));
  EXPECT_EQ(p->Where(everything[0]->loc), "bad.cagent:8:9");

  auto limits = Of(fs, "CAGENT008");
  EXPECT_EQ(limits.size(), 14u) << all;  // two unlimited, twelve unset
  bool wall = false;
  for (const auto* f : limits) {
    if (f->message.starts_with("wall-time is unlimited")) {
      wall = true;
      EXPECT_EQ(f->risk, Risk::kMedium);
      EXPECT_EQ(p->Where(f->loc), "bad.cagent:12:3");
    }
    if (f->message.starts_with("no model-turns limit")) {
      EXPECT_EQ(f->risk, Risk::kLow);
      EXPECT_EQ(p->Where(f->loc), "bad.cagent:1:1");  // an absence: the top of the file
    }
  }
  EXPECT_TRUE(wall) << all;

  EXPECT_EQ(Of(fs, "CAGENT004").size(), 1u) << all;
  EXPECT_THAT(Of(fs, "CAGENT004")[0]->message, HasSubstr(".env"));
  EXPECT_EQ(Of(fs, "CAGENT010").size(), 2u) << all;
  EXPECT_EQ(Of(fs, "CAGENT001").size(), 1u) << all;
  EXPECT_EQ(fs.front().risk, Risk::kHigh);
}

TEST(AuditTest, PassingTheWholeEnvironmentIsAWarning) {
  // `pass *` over base: base's scrub patterns remove *_TOKEN, AWS_*, ... but not a connection
  // string or a config path.
  auto p = MustCompile("extends base\nenvironment {\n  pass *\n}\n");
  auto fs = Audit(*p);
  auto env = Of(fs, "CAGENT016");
  ASSERT_EQ(env.size(), 1u) << Print(*p, fs);
  EXPECT_EQ(env[0]->risk, Risk::kMedium);
  EXPECT_THAT(env[0]->message, HasSubstr("'pass *' passes every variable"));
  EXPECT_THAT(env[0]->message, HasSubstr("DATABASE_URL"));
  EXPECT_THAT(env[0]->message, HasSubstr("KUBECONFIG"));
  EXPECT_THAT(env[0]->message, ::testing::Not(HasSubstr("GITHUB_TOKEN")));  // scrubbed by base
  EXPECT_EQ(p->Where(env[0]->loc), "test.cagent:3:8");

  // A named credential without base's scrubs; and the twin: base alone passes none.
  auto named = MustCompile("environment {\n  pass TERM GITHUB_TOKEN\n}\n");
  auto named_fs = Audit(*named);
  ASSERT_EQ(Of(named_fs, "CAGENT016").size(), 1u) << Print(*named, named_fs);
  EXPECT_THAT(Of(named_fs, "CAGENT016")[0]->message, HasSubstr("not scrubbed: GITHUB_TOKEN"));
  auto base = Builtin("base");
  EXPECT_THAT(Of(Audit(*base), "CAGENT016"), ::testing::IsEmpty());
}

TEST(AuditTest, HiddenSecretsAreNotReported) {
  auto p = MustCompile(R"(extends base
filesystem {
  read-only ~
  hide ~/.ssh ~/.aws ~/.gnupg ~/.docker ~/.kube ~/.netrc ~/.git-credentials ~/.config
  hide ~/.azure ~/.npmrc
}
)");
  auto fs = Audit(*p);
  auto secrets = Of(fs, "CAGENT003");
  ASSERT_EQ(secrets.size(), 1u) << Print(*p, fs);
  EXPECT_THAT(secrets[0]->message, HasSubstr("~/.m2/settings.xml"));
  EXPECT_THAT(secrets[0]->message, ::testing::Not(HasSubstr("~/.ssh")));
  // Hidden by cagent whatever the profile says (the host secret set).
  EXPECT_THAT(secrets[0]->message, ::testing::Not(HasSubstr("~/.pypirc")));
  // A read-only mount of ~ is not a writable path.
  EXPECT_THAT(Of(fs, "CAGENT002"), ::testing::IsEmpty());
}

TEST(AuditTest, ChildWeakeningItsParentIsLocatedInTheChild) {
  auto base = Builtin("base");
  auto child = MustCompile(R"(extends base
filesystem {
  read-write /etc
}
limits {
  memory unlimited
}
approval on-request
)",
                           "child.cagent");
  auto fs = Audit(*child, base.get());
  const std::string all = Print(*child, fs);
  auto weak = Of(fs, "CAGENT011");
  std::vector<std::string> where;
  for (const auto* f : weak) {
    EXPECT_EQ(f->risk, Risk::kMedium) << f->message;
    EXPECT_THAT(f->message, HasSubstr("widens its parent 'base'"));
    where.push_back(child->Where(f->loc) + " " + f->message.substr(f->message.find(": ") + 2));
  }
  EXPECT_THAT(where, ::testing::UnorderedElementsAre(
                         "child.cagent:8:1 approval: approval never-ask -> on-request (a person "
                         "at the terminal decides each ask)",
                         "child.cagent:3:14 mounts: /etc: read-only -> read-write",
                         "child.cagent:6:3 limits: memory 8G -> unlimited (now unbounded)"))
      << all;
  // The same remount is also a writable path outside the workspace, in a system tree: high.
  auto writable = Of(fs, "CAGENT002");
  ASSERT_EQ(writable.size(), 1u);
  EXPECT_EQ(writable[0]->risk, Risk::kHigh);
}

TEST(AuditTest, AsksUnderNeverAskAreLocatedAtEachRule) {
  auto p = MustCompile(R"(extends base
commands {
  ask make install
}
)");
  auto fs = Audit(*p);
  auto silent = Of(fs, "CAGENT006");
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(p->Where(silent[0]->loc), "test.cagent:3:7");
  EXPECT_THAT(silent[0]->message, HasSubstr("'commands: ask make install' is a silent denial"));
}

TEST(AuditTest, RiskNames) {
  EXPECT_EQ(RiskName(Risk::kHigh), "high");
  EXPECT_EQ(RiskName(Risk::kMedium), "medium");
  EXPECT_EQ(RiskName(Risk::kLow), "low");
  EXPECT_EQ(RiskName(Risk::kInfo), "info");
}

}  // namespace
}  // namespace cagent::policy
