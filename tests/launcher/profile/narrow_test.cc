// Narrow: `cagent exec`'s overrides on the spec a profile built. Each override is shown lowering
// the profile (accepted), widening it (refused, with the exact message naming the flag and the
// profile's value), and — the twin — accepted as given without a profile, so each refusal is seen
// to come from the profile. End to end: tests/e2e/profile_samples_test.cc
// (CommandLineLimitsCanOnlyLower).
#include "launcher/profile/narrow.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "launcher/profile/spec.h"
#include "policy/language/diagnostics.h"
#include "policy/language/loader.h"
#include "policy/language/lowering.h"

namespace cagent::launcher {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

// Line numbers matter: the messages cite them.
constexpr const char* kProfile =
    "network none\n"      // 1
    "limits {\n"          // 2
    "  wall-time 10m\n"   // 3
    "  cpu-time 5m\n"     // 4
    "  memory 2G\n"       // 5
    "  processes 100\n"   // 6
    "  open-files 256\n"  // 7
    "  file-size 1M\n"    // 8
    "}\n"                 // 9
    "require landlock\n"  // 10
    "environment {\n"     // 11
    "  scrub *_TOKEN\n"   // 12
    "}\n";                // 13

class NarrowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-narrow-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ + "/ws");
    fs::create_directories(root_ + "/home");
    policy_ = Compile(kProfile);
    ASSERT_NE(policy_, nullptr);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::shared_ptr<const policy::Policy> Compile(const std::string& text) {
    policy::SearchPath search;
    policy::Compiled c = policy::CompileText("t.cagent", text, search);
    EXPECT_TRUE(c.ok()) << policy::RenderAll(*c.sources, c.diags);
    return c.policy;
  }
  // The spec `cagent exec --profile` starts from.
  LaunchSpec ProfileSpec(const policy::Policy& p) {
    auto r = SpecFromPolicy(p, {"true"},
                            ProfileContext{policy::Binding{root_ + "/ws", root_ + "/home"}, {}});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().Message());
    return r.ok() ? std::move(r->spec) : LaunchSpec{};
  }
  Result<LaunchSpec> WithProfile(const ExecOverrides& o) {
    return Narrow(ProfileSpec(*policy_), o, policy_.get());
  }
  Result<LaunchSpec> WithoutProfile(const ExecOverrides& o) {
    return Narrow(DefaultLaunchSpec(root_ + "/ws", {"true"}), o, nullptr);
  }
  // Refused with kInvalidInput and exactly `message`.
  void ExpectRefused(const ExecOverrides& o, const std::string& message) {
    auto r = WithProfile(o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Error::Code::kInvalidInput);
    EXPECT_EQ(r.error().Message(), message);
  }

  std::string root_;
  std::shared_ptr<const policy::Policy> policy_;
};

TEST_F(NarrowTest, NoOverridesLeaveTheSpecAsTheProfileMadeIt) {
  const LaunchSpec before = ProfileSpec(*policy_);
  auto r = WithProfile({});
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_EQ(r->network, NetworkMode::kNone);
  EXPECT_EQ(r->limits.cpu_seconds, before.limits.cpu_seconds);
  EXPECT_EQ(r->timeout, before.timeout);
  EXPECT_EQ(r->read_only_paths, before.read_only_paths);
  EXPECT_EQ(r->env_set.size(), before.env_set.size());
}

TEST_F(NarrowTest, LimitsMayBeLoweredOrKeptEqual) {
  ExecOverrides o;
  o.cpu_time = "1m";
  o.file_size = "512K";
  o.open_files = 256;  // equal is not a widening
  o.processes = 50;
  o.memory = "1G";
  o.pids = 100;
  o.timeout = "10m";
  auto r = WithProfile(o);
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_EQ(r->limits.cpu_seconds, 60U);
  EXPECT_EQ(r->limits.file_size_bytes, 512U << 10);
  EXPECT_EQ(r->limits.open_files, 256U);
  EXPECT_EQ(r->limits.processes, 50U);
  EXPECT_EQ(r->cgroup_limits.memory_max, 1ULL << 30);
  EXPECT_EQ(r->cgroup_limits.swap_max, 0U);
  EXPECT_EQ(r->cgroup_limits.pids_max, 100U);
  EXPECT_EQ(r->timeout, std::chrono::minutes(10));
}

TEST_F(NarrowTest, EachLimitAboveTheProfileIsRefusedNamingTheFlagAndTheProfilesValue) {
  ExecOverrides cpu;
  cpu.cpu_time = "6m";
  ExpectRefused(cpu,
                "--cpu-time can only lower the profile's limit: 6m asked, but 't' sets cpu-time "
                "5m at t.cagent:4:3; pass at most 5m");
  ExecOverrides file;
  file.file_size = "2M";
  ExpectRefused(file,
                "--file-size can only lower the profile's limit: 2M asked, but 't' sets "
                "file-size 1M at t.cagent:8:3; pass at most 1M");
  ExecOverrides fds;
  fds.open_files = 257;
  ExpectRefused(fds,
                "--open-files can only lower the profile's limit: 257 asked, but 't' sets "
                "open-files 256 at t.cagent:7:3; pass at most 256");
  ExecOverrides procs;
  procs.processes = 101;
  ExpectRefused(procs,
                "--processes can only lower the profile's limit: 101 asked, but 't' sets "
                "processes 100 at t.cagent:6:3; pass at most 100");
  ExecOverrides memory;
  memory.memory = "3G";
  ExpectRefused(memory,
                "--memory can only lower the profile's limit: 3G asked, but 't' sets memory 2G "
                "at t.cagent:5:3; pass at most 2G");
  ExecOverrides pids;  // pids.max is checked against the profile's processes
  pids.pids = 101;
  ExpectRefused(pids,
                "--pids can only lower the profile's limit: 101 asked, but 't' sets processes "
                "100 at t.cagent:6:3; pass at most 100");
  ExecOverrides timeout;  // the sandbox's timeout is checked against the profile's wall-time
  timeout.timeout = "11m";
  ExpectRefused(timeout,
                "--timeout can only lower the profile's limit: 11m asked, but 't' sets wall-time "
                "10m at t.cagent:3:3; pass at most 10m");
}

TEST_F(NarrowTest, WithoutAProfileEveryLimitIsTakenAsGiven) {
  ExecOverrides o;
  o.cpu_time = "6m";
  o.file_size = "2M";
  o.open_files = 257;
  o.processes = 101;
  o.memory = "3G";
  o.pids = 101;
  o.timeout = "11m";
  auto r = WithoutProfile(o);
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_EQ(r->limits.cpu_seconds, 360U);
  EXPECT_EQ(r->limits.file_size_bytes, 2U << 20);
  EXPECT_EQ(r->limits.open_files, 257U);
  EXPECT_EQ(r->limits.processes, 101U);
  EXPECT_EQ(r->cgroup_limits.memory_max, 3ULL << 30);
  EXPECT_EQ(r->cgroup_limits.pids_max, 101U);
  EXPECT_EQ(r->timeout, std::chrono::minutes(11));
}

TEST_F(NarrowTest, AProfileWithoutALimitAcceptsAnyValueForIt) {
  auto open = Compile("network loopback\n");
  ASSERT_NE(open, nullptr);
  ExecOverrides o;
  o.cpu_time = "10h";
  auto r = Narrow(ProfileSpec(*open), o, open.get());
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_EQ(r->limits.cpu_seconds, 36000U);
}

TEST_F(NarrowTest, NetworkMayBeNarrowedNeverWidened) {
  ExecOverrides loopback;
  loopback.network = "loopback";
  ExpectRefused(loopback,
                "--network loopback would widen the profile 't', which sets network none at "
                "t.cagent:1:1; the command line can only narrow a profile");
  auto without = WithoutProfile(loopback);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->network, NetworkMode::kLoopback);

  ExecOverrides none;
  none.network = "none";
  auto same = WithProfile(none);
  ASSERT_TRUE(same.ok()) << same.error().Message();
  EXPECT_EQ(same->network, NetworkMode::kNone);
  // A loopback profile narrowed to none.
  auto open = Compile("network loopback\n");
  auto narrowed = Narrow(ProfileSpec(*open), none, open.get());
  ASSERT_TRUE(narrowed.ok()) << narrowed.error().Message();
  EXPECT_EQ(narrowed->network, NetworkMode::kNone);
}

TEST_F(NarrowTest, ExtraBindsWouldWidenAProfile) {
  ExecOverrides ro;
  ro.ro_paths = {"/opt"};
  ExpectRefused(ro,
                "--ro would widen the profile 't'; add the path to a profile (read-only PATH / "
                "read-write PATH) instead");
  ExecOverrides rw;
  rw.rw_paths = {"/var/tmp"};
  ExpectRefused(rw,
                "--rw would widen the profile 't'; add the path to a profile (read-only PATH / "
                "read-write PATH) instead");
  ExecOverrides both = rw;
  both.ro_paths = {"/opt"};
  auto r = WithoutProfile(both);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->read_only_paths.back(), "/opt");
  EXPECT_THAT(r->read_write_paths, ElementsAre("/var/tmp"));
}

TEST_F(NarrowTest, HidingAndSettingVariablesNarrowAndAreAccepted) {
  ExecOverrides o;
  o.hide_paths = {root_ + "/ws/secret"};
  o.env_set = {"A=1", "B=x=y"};
  o.env_pass = {"EDITOR"};
  o.hostname = "box";
  auto r = WithProfile(o);
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_EQ(r->hidden_paths.back(), root_ + "/ws/secret");
  // Each --env goes in front, so the last given is first and wins over the profile's `set`.
  ASSERT_GE(r->env_set.size(), 2U);
  EXPECT_EQ(r->env_set[0].name, "B");
  EXPECT_EQ(r->env_set[0].value, "x=y");
  EXPECT_EQ(r->env_set[1].name, "A");
  EXPECT_EQ(r->env_pass.back(), "EDITOR");
  EXPECT_EQ(r->hostname, "box");
}

TEST_F(NarrowTest, PassingAVariableTheProfileScrubsIsRefused) {
  ExecOverrides o;
  o.env_pass = {"GH_TOKEN"};
  ExpectRefused(o,
                "--pass-env GH_TOKEN: the profile 't' scrubs it (scrub *_TOKEN at t.cagent:12:9)");
  auto r = WithoutProfile(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->env_pass.back(), "GH_TOKEN");
}

TEST_F(NarrowTest, LayersCannotBeSwitchedOffUnderAProfile) {
  ExecOverrides o;
  o.disable_layers = {"seccomp"};
  ExpectRefused(o,
                "--disable-layer cannot be combined with --profile: a profile's sandbox is not "
                "switched off piecemeal; use it without --profile to debug a layer");
  auto r = WithoutProfile(o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->disabled.Has(Layer::kSeccomp));
}

TEST_F(NarrowTest, BestEffortOfARequiredLayerIsRefused) {
  ExecOverrides landlock;
  landlock.best_effort = {"landlock"};
  ExpectRefused(landlock,
                "--best-effort landlock conflicts with the profile 't', which requires it");
  auto without = WithoutProfile(landlock);
  ASSERT_TRUE(without.ok());
  EXPECT_TRUE(without->best_effort.Has(Layer::kLandlock));
  // The profile does not require a cgroup: best effort for it is accepted.
  ExecOverrides cgroup;
  cgroup.best_effort = {"cgroup"};
  auto r = WithProfile(cgroup);
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_TRUE(r->best_effort.Has(Layer::kCgroupLimits));
}

TEST_F(NarrowTest, MalformedValuesAreTheUsersMistakeWithOrWithoutAProfile) {
  auto expect_invalid = [&](const ExecOverrides& o, const std::string& starts) {
    for (auto r : {WithProfile(o), WithoutProfile(o)}) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().code, Error::Code::kInvalidInput);
      EXPECT_EQ(r.error().Message().rfind(starts, 0), 0U) << r.error().Message();
    }
  };
  ExecOverrides cpu;
  cpu.cpu_time = "soon";
  expect_invalid(cpu, "--cpu-time: ");
  ExecOverrides env;
  env.env_set = {"NOEQUALS"};
  expect_invalid(env, "--env expects NAME=VALUE, got 'NOEQUALS'");
  ExecOverrides cpus;
  cpus.cpus = "0";
  expect_invalid(cpus, "--cpus expects a positive number of cores");
  ExecOverrides net;
  net.network = "internet";
  expect_invalid(net, "--network: ");
  ExecOverrides best;
  best.best_effort = {"seccomp"};
  expect_invalid(best, "--best-effort takes 'landlock' or 'cgroup', got 'seccomp'");
}

TEST_F(NarrowTest, TheLimitRefusalIsTheSharedLoweringCheck) {
  // The same primitive the broker's budget lowering uses (budgets_test.cc): one rule, one message.
  ExecOverrides o;
  o.cpu_time = "6m";
  auto r = WithProfile(o);
  ASSERT_FALSE(r.ok());
  const Status direct = policy::CheckLowers(
      "--cpu-time", policy::CeilingOf(*policy_, policy::Limit::kCpuTime), 6 * 60 * 1000);
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(r.error().Message(), direct.error().Message());
}

}  // namespace
}  // namespace cagent::launcher
