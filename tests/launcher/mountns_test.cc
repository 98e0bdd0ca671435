#include "launcher/mountns.h"

#include <sys/mount.h>

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cagent::launcher {
namespace {

using Kind = MountOp::Kind;

size_t IndexOf(const MountPlan& plan, Kind kind, const std::string& target) {
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    if (plan.ops[i].kind == kind && plan.ops[i].target == target) return i;
  }
  return SIZE_MAX;
}

const MountOp* Find(const MountPlan& plan, Kind kind, const std::string& target) {
  const size_t i = IndexOf(plan, kind, target);
  return i == SIZE_MAX ? nullptr : &plan.ops[i];
}

TEST(MountPlanTest, DefaultViewHasTheExpectedMounts) {
  auto plan = PrepareMountPlan(DefaultLaunchSpec("/tmp", {"true"}));
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  EXPECT_TRUE(plan->fresh_root);
  const MountOp* usr = Find(*plan, Kind::kBind, "/newroot/usr");
  ASSERT_NE(usr, nullptr);
  EXPECT_EQ(usr->source, "/oldroot/usr");
  EXPECT_EQ(usr->attr_set, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  // The workspace is read-write but still nosuid/nodev.
  const MountOp* ws = Find(*plan, Kind::kBind, "/newroot/tmp");
  ASSERT_NE(ws, nullptr);
  EXPECT_EQ(ws->attr_set, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  EXPECT_NE(Find(*plan, Kind::kProc, "/newroot/proc"), nullptr);
  EXPECT_NE(Find(*plan, Kind::kDevpts, "/newroot/dev/pts"), nullptr);
  // Device nodes must not be nodev, and nothing is setuid-capable.
  const MountOp* null = Find(*plan, Kind::kBind, "/newroot/dev/null");
  ASSERT_NE(null, nullptr);
  EXPECT_EQ(null->attr_set & MOUNT_ATTR_NODEV, 0U);
  EXPECT_NE(null->attr_set & MOUNT_ATTR_NOSUID, 0U);
  // The root becomes read-only last.
  EXPECT_EQ(plan->ops.back().kind, Kind::kSetAttr);
  EXPECT_EQ(plan->ops.back().target, "/newroot");
  EXPECT_NE(plan->ops.back().attr_set & MOUNT_ATTR_RDONLY, 0U);
}

TEST(MountPlanTest, TmpfsComesBeforeAWorkspaceInsideIt) {
  // A workspace under /tmp must be bound after the private /tmp is mounted, or the tmpfs would
  // cover it.
  auto plan = PrepareMountPlan(DefaultLaunchSpec("/tmp", {"true"}));
  LaunchSpec spec = DefaultLaunchSpec("/usr/share", {"true"});
  plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok());
  const size_t usr = IndexOf(*plan, Kind::kBind, "/newroot/usr");
  const size_t ws = IndexOf(*plan, Kind::kBind, "/newroot/usr/share");
  ASSERT_NE(usr, SIZE_MAX);
  ASSERT_NE(ws, SIZE_MAX);
  EXPECT_LT(usr, ws);
}

TEST(MountPlanTest, MergedUsrSymlinksAreRecreated) {
  auto plan = PrepareMountPlan(DefaultLaunchSpec("/tmp", {"true"}));
  ASSERT_TRUE(plan.ok());
  struct stat st {};
  if (lstat("/bin", &st) != 0 || !S_ISLNK(st.st_mode)) {
    GTEST_SKIP() << "/bin is not a symlink on this host (not merged-/usr), nothing to check";
  }
  const MountOp* bin = Find(*plan, Kind::kSymlink, "/newroot/bin");
  ASSERT_NE(bin, nullptr);
  EXPECT_EQ(bin->source, "usr/bin");
}

TEST(MountPlanTest, HiddenPathsComeAfterWhatTheyCover) {
  LaunchSpec spec = DefaultLaunchSpec("/tmp", {"true"});
  spec.hidden_paths = {"/etc/passwd", "/usr/share"};
  auto plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok());
  const size_t etc = IndexOf(*plan, Kind::kBind, "/newroot/etc");
  const size_t passwd = IndexOf(*plan, Kind::kBind, "/newroot/etc/passwd");
  const size_t share = IndexOf(*plan, Kind::kTmpfs, "/newroot/usr/share");
  ASSERT_NE(passwd, SIZE_MAX);
  ASSERT_NE(share, SIZE_MAX);
  EXPECT_LT(etc, passwd);
  EXPECT_EQ(plan->ops[passwd].source, "/oldroot/dev/null");
  EXPECT_NE(plan->ops[share].flags & MS_RDONLY, 0U);
  EXPECT_EQ(plan->ops[share].data, "mode=000,size=4k");
}

TEST(MountPlanTest, MissingOptionalPathsAreSkippedButTheWorkspaceIsRequired) {
  LaunchSpec spec = DefaultLaunchSpec("/tmp", {"true"});
  spec.read_only_paths.push_back("/nonexistent-xyz");
  auto plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(IndexOf(*plan, Kind::kBind, "/newroot/nonexistent-xyz"), SIZE_MAX);

  spec.workspace = "/nonexistent-workspace-xyz";
  auto bad = PrepareMountPlan(spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().Message().find("workspace"), std::string::npos);
}

TEST(MountPlanTest, EveryMountPointHasItsParentCreatedFirst) {
  auto plan = PrepareMountPlan(DefaultLaunchSpec("/tmp", {"true"}));
  ASSERT_TRUE(plan.ok());
  std::set<std::string> exists = {"/newroot"};
  for (const auto& op : plan->ops) {
    const std::string parent = op.target.substr(0, op.target.rfind('/'));
    if (op.kind == Kind::kMkdir || op.kind == Kind::kTouch || op.kind == Kind::kSymlink) {
      // Inside a bound tree parents exist on the host; the plan creates the rest.
      if (parent.rfind("/newroot/proc", 0) != 0 && parent.rfind("/newroot/etc", 0) != 0) {
        EXPECT_TRUE(exists.count(parent)) << op.target;
      }
      exists.insert(op.target);
    }
  }
}

TEST(MountPlanTest, WithoutTheMountViewOnlyProcIsReplaced) {
  LaunchSpec spec = DefaultLaunchSpec("/tmp", {"true"});
  spec.disabled.Add(Layer::kMountView);
  auto plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->fresh_root);
  EXPECT_NE(Find(*plan, Kind::kProc, "/proc"), nullptr);
  EXPECT_EQ(Find(*plan, Kind::kBind, "/usr"), nullptr);
}

}  // namespace
}  // namespace cagent::launcher
