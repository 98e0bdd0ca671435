// WorkspaceFs: the string checks before any syscall, and openat2's verdicts beneath the root.
#include "agent/workspace_fs.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>

#include "tests/agent/tool_test_util.h"

namespace cagent::agent {
namespace {

using ::testing::HasSubstr;
using testing::TempWorkspace;

WorkspaceFs OpenFs(const TempWorkspace& ws) {
  auto fs = WorkspaceFs::Open(ws.path());
  if (auto* f = std::get_if<FsFailure>(&fs)) {
    ADD_FAILURE() << f->message;
    std::abort();
  }
  return std::get<WorkspaceFs>(std::move(fs));
}

std::string Code(const FsResult<OpenedPath>& r) {
  return std::holds_alternative<FsFailure>(r) ? std::get<FsFailure>(r).code : "ok";
}

TEST(WorkspaceFs, RelativizeRefusesEmptyNulAndOutsideAbsolutePaths) {
  TempWorkspace ws;
  auto fs = OpenFs(ws);
  auto empty = fs.Relativize("");
  ASSERT_TRUE(std::holds_alternative<FsFailure>(empty));
  EXPECT_EQ(std::get<FsFailure>(empty).code, "bad_arguments");
  EXPECT_EQ(std::get<FsFailure>(empty).err, 0);
  auto nul = fs.Relativize(std::string_view("a\0b", 3));
  ASSERT_TRUE(std::holds_alternative<FsFailure>(nul));
  EXPECT_THAT(std::get<FsFailure>(nul).message, HasSubstr("NUL byte"));
  auto outside = fs.Relativize("/etc/passwd");
  ASSERT_TRUE(std::holds_alternative<FsFailure>(outside));
  EXPECT_EQ(std::get<FsFailure>(outside).code, "outside_workspace");
  EXPECT_EQ(std::get<std::string>(fs.Relativize(ws.path())), ".");
  EXPECT_EQ(std::get<std::string>(fs.Relativize(ws.path() + "//src/./a.c")), "src/a.c");
  EXPECT_EQ(std::get<std::string>(fs.Relativize("src/../x")), "src/../x");  // the kernel judges
}

TEST(WorkspaceFs, CanonicalPathAcceptsTheWorkspaceThroughASymlink) {
  TempWorkspace ws;
  const std::string alias = ws.outside() + "/alias";
  ASSERT_EQ(::symlink(ws.path().c_str(), alias.c_str()), 0);
  auto opened = WorkspaceFs::Open(alias);
  ASSERT_TRUE(std::holds_alternative<WorkspaceFs>(opened));
  auto& fs = std::get<WorkspaceFs>(opened);
  EXPECT_EQ(fs.canonical(), std::filesystem::canonical(ws.path()).string());
  // Both spellings of the workspace are accepted for absolute paths.
  EXPECT_EQ(std::get<std::string>(fs.Relativize(alias + "/a")), "a");
  EXPECT_EQ(std::get<std::string>(fs.Relativize(fs.canonical() + "/a")), "a");
  ws.Write("a", "x");
  auto file = fs.Open("a", O_RDONLY);
  ASSERT_EQ(Code(file), "ok");
  EXPECT_EQ(std::get<OpenedPath>(file).relative, "a");
}

TEST(WorkspaceFs, KernelRefusesEscapes) {
  TempWorkspace ws;
  testing::WriteAbsolute(ws.outside() + "/s", "secret");
  ws.Symlink("../outside/s", "rel");
  ws.Symlink(ws.outside() + "/s", "abs");
  ws.Symlink("/proc/self/root" + ws.outside() + "/s", "proc");
  ws.Symlink("loop2", "loop1");
  ws.Symlink("loop1", "loop2");
  ws.Mkdir("d");
  auto fs = OpenFs(ws);
  EXPECT_EQ(Code(fs.Open("../outside/s", O_RDONLY)), "outside_workspace");
  EXPECT_EQ(Code(fs.Open("d/../../outside/s", O_RDONLY)), "outside_workspace");
  EXPECT_EQ(Code(fs.Open("rel", O_RDONLY)), "outside_workspace");
  EXPECT_EQ(Code(fs.Open("abs", O_RDONLY)), "outside_workspace");
  EXPECT_EQ(Code(fs.Open("proc", O_RDONLY)), "outside_workspace");
  EXPECT_EQ(Code(fs.Open("loop1", O_RDONLY)), "outside_workspace");
  auto exdev = fs.Open("rel", O_RDONLY);
  EXPECT_EQ(std::get<FsFailure>(exdev).err, EXDEV);
  EXPECT_EQ(Code(fs.Open("missing", O_RDONLY)), "not_found");
  EXPECT_EQ(Code(fs.Open("d", O_RDONLY | O_DIRECTORY)), "ok");
  EXPECT_EQ(std::get<OpenedPath>(fs.Open("d/..", O_RDONLY)).relative, ".");
}

TEST(WorkspaceFs, ProcMagicLinksAreRefusedAndWouldOtherwiseWork) {
  // Inside the workspace a path cannot reach /proc at all (RESOLVE_BENEATH stops the climb, and an
  // absolute symlink is refused). To see RESOLVE_NO_MAGICLINKS itself fire, use "/" as the root:
  // /proc/self/root is then beneath it, and only the magic-link guard stands in the way.
  auto opened = WorkspaceFs::Open("/");
  ASSERT_TRUE(std::holds_alternative<WorkspaceFs>(opened));
  auto& fs = std::get<WorkspaceFs>(opened);
  if (::access("/proc/self/root/proc", F_OK) != 0) {
    GTEST_SKIP() << "/proc is not mounted here, so there is no magic link to refuse";
  }
  auto r = fs.Open("proc/self/root/proc", O_RDONLY | O_DIRECTORY);
  ASSERT_EQ(Code(r), "outside_workspace");
  EXPECT_EQ(std::get<FsFailure>(r).err, ELOOP);
  EXPECT_THAT(std::get<FsFailure>(r).message, HasSubstr("magic link"));
  // The twin: the same lookup without the resolve flags follows the magic link. (RESOLVE_BENEATH
  // alone currently refuses magic links too, but openat2(2) says that may change, which is why
  // RESOLVE_NO_MAGICLINKS is passed explicitly.)
  struct open_how how {};
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = 0;
  int fd =
      static_cast<int>(::syscall(SYS_openat2, fs.root(), "proc/self/root/proc", &how, sizeof(how)));
  EXPECT_GE(fd, 0) << "without RESOLVE_NO_MAGICLINKS the magic link is followed";
  if (fd >= 0) ::close(fd);
}

TEST(WorkspaceFs, OpenParentCreatesDirectoriesOnlyWhenAsked) {
  TempWorkspace ws;
  auto fs = OpenFs(ws);
  auto no = fs.OpenParent("x/y/z.txt", false);
  ASSERT_TRUE(std::holds_alternative<FsFailure>(no));
  EXPECT_EQ(std::get<FsFailure>(no).code, "not_found");
  EXPECT_FALSE(std::filesystem::exists(ws.At("x")));
  auto yes = fs.OpenParent("x/y/z.txt", true);
  ASSERT_TRUE(std::holds_alternative<OpenedParent>(yes));
  EXPECT_EQ(std::get<OpenedParent>(yes).name, "z.txt");
  EXPECT_EQ(std::get<OpenedParent>(yes).relative, "x/y/z.txt");
  EXPECT_TRUE(std::filesystem::is_directory(ws.At("x/y")));
  for (const char* bad : {"a/", "a/..", "."}) {
    auto r = fs.OpenParent(bad, true);
    ASSERT_TRUE(std::holds_alternative<FsFailure>(r)) << bad;
    EXPECT_EQ(std::get<FsFailure>(r).code, "bad_arguments") << bad;
  }
}

TEST(WorkspaceFs, OpenParentDoesNotCreateThroughASymlinkOut) {
  TempWorkspace ws;
  ws.Symlink(ws.outside(), "out");
  auto fs = OpenFs(ws);
  auto r = fs.OpenParent("out/newdir/f.txt", true);
  ASSERT_TRUE(std::holds_alternative<FsFailure>(r));
  EXPECT_EQ(std::get<FsFailure>(r).code, "outside_workspace");
  EXPECT_FALSE(std::filesystem::exists(ws.outside() + "/newdir"));
}

TEST(WorkspaceFs, LexicalHelpers) {
  EXPECT_EQ(NormalizeLexically(""), ".");
  EXPECT_EQ(NormalizeLexically("./a//b/./c/"), "a/b/c");
  EXPECT_EQ(NormalizeLexically("a/../b"), "b");
  EXPECT_EQ(NormalizeLexically("../a"), "../a");
  EXPECT_EQ(JoinRelative(".", "x"), "x");
  EXPECT_EQ(JoinRelative("d", "x"), "d/x");
  EXPECT_EQ(SplitComponents("/a//b/"), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace cagent::agent
