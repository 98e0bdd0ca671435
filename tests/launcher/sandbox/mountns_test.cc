#include "launcher/sandbox/mountns.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

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

// issue 32: a read-only cache with a private writable layer is an overlay over the host
// directory, its upper layer on a tmpfs of the staging root; its twin, a plain read-only bind.
TEST(MountPlanTest, AScratchDirBindIsAnOverlayWithItsOwnLayer) {
  char tmpl[] = "/tmp/cagent-ovl-plan-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string cache = std::string(tmpl) + "/a,b:c";
  ASSERT_EQ(::mkdir(cache.c_str(), 0700), 0);
  LaunchSpec spec = DefaultLaunchSpec("/tmp", {"true"});
  spec.dir_binds = {{cache, spec.home + "/.npm", false, /*scratch=*/true}};
  auto plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  const MountOp* ovl = Find(*plan, Kind::kOverlay, "/newroot" + spec.home + "/.npm");
  ASSERT_NE(ovl, nullptr);
  EXPECT_EQ(ovl->source, "/oldroot" + cache);
  // ',' and ':' in the lower path are escaped for overlayfs's option parser.
  EXPECT_EQ(ovl->data,
            "lowerdir=/oldroot" + std::string(tmpl) +
                "/a\\,b\\:c,upperdir=/cagent-layer-1/upper,workdir=/cagent-layer-1/work");
  EXPECT_EQ(ovl->layer, "/cagent-layer-1");
  EXPECT_EQ(ovl->layer_options, "mode=0755,size=" + std::to_string(spec.home_size_bytes));
  EXPECT_TRUE(ovl->source_id.Known());
  EXPECT_EQ(Find(*plan, Kind::kBind, "/newroot" + spec.home + "/.npm"), nullptr);

  spec.dir_binds[0].scratch = false;
  auto plain = PrepareMountPlan(spec);
  ASSERT_TRUE(plain.ok());
  const MountOp* bind = Find(*plain, Kind::kBind, "/newroot" + spec.home + "/.npm");
  ASSERT_NE(bind, nullptr);
  EXPECT_NE(bind->attr_set & MOUNT_ATTR_RDONLY, 0U);
  EXPECT_EQ(Find(*plain, Kind::kOverlay, "/newroot" + spec.home + "/.npm"), nullptr);
  std::filesystem::remove_all(tmpl);
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

// A home file is written after HOME's tmpfs is mounted and after the directories on its way are
// made; its content and mode travel in the op.
TEST(MountPlanTest, AHomeFileIsWrittenIntoHomeAfterItsDirectories) {
  LaunchSpec spec = DefaultLaunchSpec("/tmp", {"true"});
  spec.home_files.push_back({spec.home + "/.config/tool/token", "placeholder\n", 0400});
  auto plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  const std::string home = "/newroot" + spec.home;
  const size_t tmpfs = IndexOf(*plan, Kind::kTmpfs, home);
  const size_t config = IndexOf(*plan, Kind::kMkdir, home + "/.config");
  const size_t tool = IndexOf(*plan, Kind::kMkdir, home + "/.config/tool");
  const size_t file = IndexOf(*plan, Kind::kWriteFile, home + "/.config/tool/token");
  ASSERT_NE(file, SIZE_MAX);
  EXPECT_LT(tmpfs, config);
  EXPECT_LT(config, tool);
  EXPECT_LT(tool, file);
  EXPECT_EQ(plan->ops[file].source, "placeholder\n");
  EXPECT_EQ(plan->ops[file].mode, 0400U);
  EXPECT_EQ(plan->ops[file].parent, home + "/.config/tool");
  EXPECT_EQ(plan->ops[file].name, "token");
}

TEST(MountPlanTest, AHomeFileNeedsTheMountView) {
  LaunchSpec spec = DefaultLaunchSpec("/tmp", {"true"});
  spec.home_files.push_back({spec.home + "/token", "x", 0600});
  spec.disabled.Add(Layer::kMountView);
  auto plan = PrepareMountPlan(spec);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.error().Message(), ::testing::HasSubstr("need the mount view"));
}

// A required file bind the view cannot show fails the plan, naming the path; the same bind not
// required is skipped (resolv.conf in a profile without /etc).
TEST(MountPlanTest, ARequiredFileBindOutsideTheViewFails) {
  char tmpl[] = "/tmp/cagent-required-bind-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/source") << "placeholder\n";
  std::ofstream(dir + "/target") << "real\n";
  LaunchSpec spec = DefaultLaunchSpec("/srv", {"true"});
  spec.read_only_paths = {"/usr"};
  spec.workspace = "/usr";
  spec.file_binds.push_back({dir + "/source", dir + "/target", /*required=*/false});
  auto skipped = PrepareMountPlan(spec);
  ASSERT_TRUE(skipped.ok()) << skipped.error().Message();
  EXPECT_EQ(Find(*skipped, Kind::kBind, "/newroot" + dir + "/target"), nullptr);
  spec.file_binds.back().required = true;
  auto refused = PrepareMountPlan(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().Message(),
              ::testing::HasSubstr("the sandbox's view does not show " + dir + "/target"));
  // Shown by the view (the directory bound): bound over the file.
  spec.read_only_paths.push_back(dir);
  auto bound = PrepareMountPlan(spec);
  ASSERT_TRUE(bound.ok()) << bound.error().Message();
  EXPECT_NE(Find(*bound, Kind::kBind, "/newroot" + dir + "/target"), nullptr);
  std::filesystem::remove_all(dir);
}

// ---- the prepare-to-mount race (mountns.h): identities recorded, paths canonical ----

FileIdentity HostIdentity(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return {st.st_dev, st.st_ino, st.st_mode & S_IFMT};
}

void ExpectIdentity(const FileIdentity& got, const std::string& host_path) {
  const FileIdentity want = HostIdentity(host_path);
  EXPECT_TRUE(got.Known()) << host_path;
  EXPECT_EQ(got.dev, want.dev) << host_path;
  EXPECT_EQ(got.ino, want.ino) << host_path;
  EXPECT_EQ(got.type, want.type) << host_path;
}

class MountPlanIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-mountns-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ws_ = dir_ + "/ws";
    std::filesystem::create_directories(ws_ + "/sub");
    std::filesystem::create_directories(ws_ + "/real");
    std::filesystem::create_directories(ws_ + "/private");
    std::ofstream(ws_ + "/real/secret") << "s";
    std::ofstream(ws_ + "/private/key") << "k";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir_, ws_;
};

TEST_F(MountPlanIdentityTest, BindSourcesCarryTheHostIdentity) {
  auto plan = PrepareMountPlan(DefaultLaunchSpec(ws_, {"true"}));
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  const MountOp* usr = Find(*plan, Kind::kBind, "/newroot/usr");
  ASSERT_NE(usr, nullptr);
  ExpectIdentity(usr->source_id, "/usr");
  // /usr's mount point is a directory cagent makes in its own tmpfs: nothing to compare there.
  EXPECT_FALSE(usr->target_id.Known());
  const MountOp* ws = Find(*plan, Kind::kBind, "/newroot" + ws_);
  ASSERT_NE(ws, nullptr);
  ExpectIdentity(ws->source_id, ws_);
  const MountOp* null = Find(*plan, Kind::kBind, "/newroot/dev/null");
  ASSERT_NE(null, nullptr);
  ExpectIdentity(null->source_id, "/dev/null");
  EXPECT_EQ(null->source_id.type, static_cast<mode_t>(S_IFCHR));
}

TEST_F(MountPlanIdentityTest, SelfBindsInsideTheWorkspaceCheckTheTargetToo) {
  LaunchSpec spec = DefaultLaunchSpec(ws_, {"true"});
  spec.read_write_paths = {ws_ + "/sub"};
  auto plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  const MountOp* sub = Find(*plan, Kind::kBind, "/newroot" + ws_ + "/sub");
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->source, "/oldroot" + ws_ + "/sub");
  ExpectIdentity(sub->source_id, ws_ + "/sub");
  ExpectIdentity(sub->target_id, ws_ + "/sub");
}

TEST_F(MountPlanIdentityTest, HiddenPathsCarryTheIdentityOfWhatTheyCover) {
  LaunchSpec spec = DefaultLaunchSpec(ws_, {"true"});
  spec.hidden_paths = {ws_ + "/private/key"};
  auto plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  const MountOp* key = Find(*plan, Kind::kBind, "/newroot" + ws_ + "/private/key");
  ASSERT_NE(key, nullptr);
  ExpectIdentity(key->target_id, ws_ + "/private/key");
  ExpectIdentity(key->source_id, "/dev/null");

  spec.hidden_paths = {ws_ + "/private"};
  plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  const MountOp* dir = Find(*plan, Kind::kTmpfs, "/newroot" + ws_ + "/private");
  ASSERT_NE(dir, nullptr);
  ExpectIdentity(dir->target_id, ws_ + "/private");
}

TEST_F(MountPlanIdentityTest, HiddenPathsAreCanonicalThroughTheirParent) {
  // A component that is a symlink at prepare would make the checked child refuse the path; the
  // plan holds the canonical path instead, which is where mount(2) would have landed anyway.
  ASSERT_EQ(::symlink("real", (ws_ + "/link").c_str()), 0);
  LaunchSpec spec = DefaultLaunchSpec(ws_, {"true"});
  spec.hidden_paths = {ws_ + "/link/secret"};
  auto plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  EXPECT_EQ(Find(*plan, Kind::kBind, "/newroot" + ws_ + "/link/secret"), nullptr);
  const MountOp* hide = Find(*plan, Kind::kBind, "/newroot" + ws_ + "/real/secret");
  ASSERT_NE(hide, nullptr);
  EXPECT_EQ(hide->description, "hide " + ws_ + "/real/secret");
  ExpectIdentity(hide->target_id, ws_ + "/real/secret");
}

TEST_F(MountPlanIdentityTest, HiddenPathsBelowADirectoryBindAreLookedUpInItsSource) {
  // A carried tree: the workspace has an empty mount point, the files are in the bind's source.
  const std::string carried = dir_ + "/checkout/node_modules";
  std::filesystem::create_directories(carried + "/pkg");
  std::filesystem::create_directories(ws_ + "/node_modules");
  std::ofstream(carried + "/pkg/.env") << "secret";
  LaunchSpec spec = DefaultLaunchSpec(ws_, {"true"});
  spec.dir_binds = {{carried, ws_ + "/node_modules", false}};
  spec.hidden_paths = {ws_ + "/node_modules/pkg/.env"};
  auto plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  const MountOp* hide = Find(*plan, Kind::kBind, "/newroot" + ws_ + "/node_modules/pkg/.env");
  ASSERT_NE(hide, nullptr) << "the hide below the carry bind was dropped";
  ExpectIdentity(hide->target_id, carried + "/pkg/.env");
  ExpectIdentity(hide->source_id, "/dev/null");
  // After the bind it covers.
  const auto bind = std::find_if(plan->ops.begin(), plan->ops.end(), [&](const MountOp& op) {
    return op.kind == Kind::kBind && op.target == "/newroot" + ws_ + "/node_modules";
  });
  ASSERT_NE(bind, plan->ops.end());
  EXPECT_LT(bind - plan->ops.begin(), hide - plan->ops.data());

  // A link in the source on the way is not followed: nothing is hidden through it (the profile
  // side hides what such a link leads to in the view instead).
  std::filesystem::create_directory_symlink(dir_ + "/elsewhere", carried + "/linked");
  std::filesystem::create_directories(dir_ + "/elsewhere");
  std::ofstream(dir_ + "/elsewhere/.env") << "x";
  spec.hidden_paths = {ws_ + "/node_modules/linked/.env"};
  plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  EXPECT_EQ(Find(*plan, Kind::kBind, "/newroot" + ws_ + "/node_modules/linked/.env"), nullptr);
  EXPECT_EQ(Find(*plan, Kind::kBind, "/newroot" + dir_ + "/elsewhere/.env"), nullptr);
}

TEST_F(MountPlanIdentityTest, MountPointsInCagentsOwnTmpfsHaveNoTargetIdentity) {
  // /tmp, HOME, /dev and /dev/shm are mounted on directories cagent made in its own tmpfs, and
  // what lies below a private tmpfs in the view is cagent's: a host file's identity there would
  // be a false alarm. The workspace below the private /tmp is such a mount point too.
  LaunchSpec spec = DefaultLaunchSpec(ws_, {"true"});
  auto plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok());
  for (const std::string& view :
       {std::string("/tmp"), std::string("/dev"), std::string("/dev/shm"), spec.home}) {
    const MountOp* op = Find(*plan, Kind::kTmpfs, "/newroot" + view);
    ASSERT_NE(op, nullptr) << view;
    EXPECT_FALSE(op->target_id.Known()) << view;
  }
  const MountOp* ws = Find(*plan, Kind::kBind, "/newroot" + ws_);
  ASSERT_NE(ws, nullptr);
  EXPECT_FALSE(ws->target_id.Known());
  // A hidden directory of the host-bound /etc is the host's, and is checked.
  struct stat st {};
  if (::lstat("/etc/ssh", &st) != 0 || !S_ISDIR(st.st_mode)) {
    GTEST_SKIP() << "no /etc/ssh directory on this host to see a hidden system path checked";
  }
  const MountOp* ssh = Find(*plan, Kind::kTmpfs, "/newroot/etc/ssh");
  ASSERT_NE(ssh, nullptr);
  ExpectIdentity(ssh->target_id, "/etc/ssh");
}

TEST_F(MountPlanIdentityTest, EveryOpKnowsItsParentAndNameAndFilesystemsGoThroughScratch) {
  auto plan = PrepareMountPlan(DefaultLaunchSpec(ws_, {"true"}));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->scratch, "/scratch");
  EXPECT_TRUE(plan->verify_paths);
  for (const auto& op : plan->ops) {
    EXPECT_EQ(op.parent == "/" ? "/" + op.name : op.parent + "/" + op.name, op.target);
    EXPECT_FALSE(op.name.empty()) << op.target;
  }
  LaunchSpec off = DefaultLaunchSpec(ws_, {"true"});
  off.disabled.Add(Layer::kMountView);
  auto host = PrepareMountPlan(off);
  ASSERT_TRUE(host.ok());
  EXPECT_TRUE(host->scratch.empty()) << "without a staging root /proc is mounted by path";
}

}  // namespace
}  // namespace cagent::launcher
