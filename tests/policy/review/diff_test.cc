// policy/diff: what becomes wider or narrower between two compiled policies.
#include "policy/review/diff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using testing::MustCompile;

std::shared_ptr<const Policy> Builtin(std::string_view name) {
  SearchPath search;
  Compiled c = LoadProfile(name, search);
  EXPECT_TRUE(c.ok()) << RenderAll(*c.sources, c.diags);
  return c.policy;
}

// The entries as "direction area: text" lines, for readable assertions.
std::vector<std::string> Lines(const std::vector<DiffEntry>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) {
    out.push_back(std::string(DirectionName(e.direction)) + " " + e.area + ": " + e.text);
  }
  return out;
}

const DiffEntry* Find(const std::vector<DiffEntry>& entries, std::string_view area,
                      std::string_view text_part) {
  for (const auto& e : entries) {
    if (e.area == area && e.text.find(text_part) != std::string::npos) return &e;
  }
  return nullptr;
}

TEST(DiffTest, SameProfileHasNoEntries) {
  auto a = Builtin("backend");
  auto b = Builtin("backend");
  EXPECT_THAT(Diff(*a, *b), ::testing::IsEmpty());
}

TEST(DiffTest, ReadonlyToBackendIsWiderOnNetworkAndWorkspace) {
  auto ro = Builtin("readonly");
  auto be = Builtin("backend");
  auto d = Diff(*ro, *be);
  auto lines = Lines(d);
  EXPECT_THAT(lines, ::testing::Contains("wider network: network none -> loopback"));
  EXPECT_THAT(lines, ::testing::Contains("wider workspace: workspace read-only -> read-write"));
  // readonly's extra denies disappear: wider, located in readonly (the side that had them).
  const DiffEntry* rm = Find(d, "commands", "removed: deny (chmod | cp");
  ASSERT_NE(rm, nullptr) << ::testing::PrintToString(lines);
  EXPECT_EQ(rm->direction, Direction::kWider);
  EXPECT_EQ(rm->change, Change::kRemoved);
  EXPECT_EQ(rm->side, DiffSide::kFrom);
  EXPECT_EQ(DiffWhere(*rm, *ro, *be), "<built-in>/readonly.cagent:12:8");
  // backend's toolchain mounts are added, read-only: wider.
  const DiffEntry* rustup = Find(d, "mounts", "~/.rustup");
  ASSERT_NE(rustup, nullptr);
  EXPECT_EQ(rustup->direction, Direction::kWider);
  EXPECT_EQ(rustup->text, "added: read-only ~/.rustup");
  EXPECT_EQ(DiffWhere(*rustup, *ro, *be), "<built-in>/backend.cagent:14:13");
  // backend adds no command asks (installs are asked only where a registry is reachable).
  EXPECT_EQ(Find(d, "commands", "added: ask"), nullptr);
  // Nothing here makes backend narrower than readonly except its new denies and hidden files.
  for (const auto& e : d) {
    if (e.direction == Direction::kNarrower) {
      EXPECT_TRUE(e.text.starts_with("added: deny") || e.text.starts_with("added: hide"))
          << e.area << ": " << e.text;
    }
  }
}

TEST(DiffTest, TheReverseIsNarrower) {
  auto ro = Builtin("readonly");
  auto be = Builtin("backend");
  auto lines = Lines(Diff(*be, *ro));
  EXPECT_THAT(lines, ::testing::Contains("narrower network: network loopback -> none"));
  EXPECT_THAT(lines, ::testing::Contains("narrower workspace: workspace read-write -> read-only"));
}

TEST(DiffTest, MountsPerPath) {
  auto a = MustCompile(R"(filesystem {
  read-only /srv/a /srv/b /srv/c
  read-write /srv/d
  hide /srv/e
})",
                       "a.cagent");
  auto b = MustCompile(R"(filesystem {
  read-write /srv/a
  read-only /srv/c /srv/d /srv/f
  hide /srv/g
})",
                       "b.cagent");
  auto lines = Lines(Diff(*a, *b));
  EXPECT_THAT(lines, ::testing::ElementsAre("wider mounts: /srv/a: read-only -> read-write",
                                            "narrower mounts: removed: read-only /srv/b",
                                            "narrower mounts: /srv/d: read-write -> read-only",
                                            "neutral mounts: removed: hide /srv/e (nothing of "
                                            "it is mounted in 'b')",
                                            "wider mounts: added: read-only /srv/f",
                                            "narrower mounts: added: hide /srv/g"));
}

// backend hides ~/.cargo/credentials inside its read-only ~/.cargo; frontend mounts no ~/.cargo, so
// dropping the hide exposes nothing. Twin: a profile that still mounts ~/.cargo without the hide is
// wider.
TEST(DiffTest, DroppingAHideOfWhatIsNotMountedIsNotWider) {
  auto a = MustCompile(R"(filesystem {
  read-only ~/.cargo /srv
  hide ~/.cargo/credentials /srv/secret
})",
                       "a.cagent");
  auto unmounted = MustCompile("filesystem {\n  read-only /usr\n}\n", "b.cagent");
  auto lines = Lines(Diff(*a, *unmounted));
  EXPECT_THAT(lines, ::testing::Contains("neutral mounts: removed: hide ~/.cargo/credentials "
                                         "(nothing of it is mounted in 'b')"));
  EXPECT_THAT(lines, ::testing::Contains("neutral mounts: removed: hide /srv/secret (nothing of "
                                         "it is mounted in 'b')"));
  auto still = MustCompile("filesystem {\n  read-only ~/.cargo /srv\n}\n", "c.cagent");
  auto still_lines = Lines(Diff(*a, *still));
  EXPECT_THAT(still_lines, ::testing::Contains("wider mounts: removed: hide ~/.cargo/credentials"));
  EXPECT_THAT(still_lines, ::testing::Contains("wider mounts: removed: hide /srv/secret"));
}

TEST(DiffTest, RulesLimitsEnvironmentRequirements) {
  auto a = MustCompile(R"(approval never-ask
filesystem {
  deny **/.env
}
commands {
  allow git status
  deny curl
}
limits {
  wall-time 30m
  memory 4G
  processes 100
  tool-calls 10
}
environment {
  pass TERM
  scrub AWS_*
  set A 1
}
require landlock seccomp
)",
                       "a.cagent");
  auto b = MustCompile(R"(approval auto
filesystem {
  deny **/*.pem
}
commands {
  allow git status
  allow python3
  ask pip install
}
limits {
  wall-time 1h
  memory 2G
  processes unlimited
}
environment {
  pass TERM HOME
  set A 2
}
require seccomp
best-effort landlock
)",
                       "b.cagent");
  auto d = Diff(*a, *b);
  auto lines = Lines(d);
  EXPECT_THAT(
      lines,
      ::testing::ElementsAre(
          "wider approval: approval never-ask -> auto (every ask is now allowed "
          "without prompting)",
          "narrower filesystem: added: deny **/*.pem", "wider filesystem: removed: deny **/.env",
          "wider commands: added: ask pip install (approval auto: allowed without "
          "asking)",
          "wider commands: added: allow python3", "wider commands: removed: deny curl",
          "wider limits: wall-time 30m -> 1h (raised)",
          "narrower limits: memory 4G -> 2G (lowered)",
          "wider limits: processes 100 -> unlimited (now unbounded)",
          "wider limits: tool-calls 10 -> unset (now unbounded)",
          "wider environment: added: pass HOME", "wider environment: removed: scrub AWS_*",
          "neutral environment: set A 1 -> 2", "wider requirements: removed: require landlock",
          "wider requirements: added: best-effort landlock"));
  const DiffEntry* unset = Find(d, "limits", "tool-calls");
  ASSERT_NE(unset, nullptr);
  EXPECT_EQ(unset->side, DiffSide::kFrom);  // only `a` writes it
  EXPECT_EQ(DiffWhere(*unset, *a, *b), "a.cagent:13:3");
  const DiffEntry* py = Find(d, "commands", "allow python3");
  ASSERT_NE(py, nullptr);
  EXPECT_EQ(DiffWhere(*py, *a, *b), "b.cagent:7:9");
}

TEST(DiffTest, VerifyChangesAreNeutral) {
  auto a = MustCompile("verify {\n  run \"make test\"\n}\n", "a.cagent");
  auto b = MustCompile("verify {\n  run \"make check\" timeout 5m\n}\n", "b.cagent");
  EXPECT_THAT(Lines(Diff(*a, *b)),
              ::testing::ElementsAre("neutral verify: added: run \"make check\" timeout 5m",
                                     "neutral verify: removed: run \"make test\""));
}

TEST(DiffTest, DirectionNames) {
  EXPECT_EQ(DirectionName(Direction::kWider), "wider");
  EXPECT_EQ(DirectionName(Direction::kNarrower), "narrower");
  EXPECT_EQ(DirectionName(Direction::kNeutral), "neutral");
}

TEST(DiffTest, CommandsDefaultAllowIsWider) {
  auto strict = MustCompile("commands {\n  allow make\n}\n");
  auto open = MustCompile("commands {\n  default allow\n  allow make\n}\n");
  ASSERT_NE(strict, nullptr);
  ASSERT_NE(open, nullptr);
  auto lines = Lines(Diff(*strict, *open));
  EXPECT_THAT(lines, ::testing::Contains("wider commands: commands default deny -> allow (a "
                                         "command no rule names is now allowed)"));
  // Allow rules a default-allow profile drops, or a child of one adds, change nothing.
  auto bare = MustCompile("commands {\n  default allow\n}\n");
  ASSERT_NE(bare, nullptr);
  EXPECT_THAT(Lines(Diff(*open, *bare)),
              ::testing::Contains("neutral commands: removed: allow make (covered by commands "
                                  "default allow)"));
  EXPECT_THAT(Lines(Diff(*bare, *open)),
              ::testing::Contains("neutral commands: added: allow make (already allowed: commands "
                                  "default allow)"));
  auto back = Lines(Diff(*open, *strict));
  EXPECT_THAT(back, ::testing::Contains("narrower commands: commands default allow -> deny (a "
                                        "command no rule names is now denied)"));
}

}  // namespace
}  // namespace cagent::policy
