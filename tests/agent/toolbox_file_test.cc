// read_file, write_file, edit_file and the argument checks, each in a fresh temporary workspace.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "agent/toolbox.h"
#include "common/sha256.h"
#include "common/tool_schemas.h"
#include "tests/agent/tool_test_util.h"

namespace cagent::agent {
namespace {

using ::testing::AllOf;
using testing::Call;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::OpenToolbox;
using testing::PrepareFailure;
using testing::PrepareOk;
using ::testing::StartsWith;
using testing::TempWorkspace;

std::string Numbered(int from, int to) {
  std::string s;
  for (int i = from; i <= to; ++i) s += "line " + std::to_string(i) + "\n";
  return s;
}

// ---- argument validation and rendering ----

TEST(ToolboxArgs, UnknownToolListsTheAvailableOnes) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws);
  auto out = PrepareFailure(box, "delete_everything", {{"path", "."}});
  EXPECT_EQ(out.code, "unknown_tool");
  EXPECT_THAT(out.hint, HasSubstr("read_file"));
}

TEST(ToolboxArgs, UnknownPropertyWrongTypeAndMissingRequiredNameTheField) {
  TempWorkspace ws;
  ws.Write("a.txt", "x\n");
  auto box = OpenToolbox(ws);
  auto unknown = PrepareFailure(box, "read_file", {{"path", "a.txt"}, {"mode", "rw"}});
  EXPECT_EQ(unknown.code, "bad_arguments");
  EXPECT_THAT(unknown.message, HasSubstr("unknown property `mode`"));
  auto wrong = PrepareFailure(box, "read_file", {{"path", "a.txt"}, {"offset", "3"}});
  EXPECT_EQ(wrong.code, "bad_arguments");
  EXPECT_THAT(wrong.message, HasSubstr("`offset` must be an integer, got string"));
  auto missing = PrepareFailure(box, "edit_file", {{"path", "a.txt"}, {"old_string", "x"}});
  EXPECT_EQ(missing.code, "bad_arguments");
  EXPECT_THAT(missing.message, HasSubstr("missing required property `new_string`"));
  auto below = PrepareFailure(box, "read_file", {{"path", "a.txt"}, {"offset", 0}});
  EXPECT_THAT(below.message, HasSubstr("`offset` must be at least 1"));
  auto not_object = PrepareFailure(box, "read_file", nlohmann::json::array({"a.txt"}));
  EXPECT_THAT(not_object.message, HasSubstr("must be a JSON object"));
}

TEST(ToolboxArgs, NullOptionalPropertyIsTreatedAsAbsent) {
  TempWorkspace ws;
  ws.Write("a.txt", "x\n");
  auto box = OpenToolbox(ws);
  auto out = Call(box, "read_file", {{"path", "a.txt"}, {"offset", nullptr}});
  EXPECT_TRUE(out.ok) << out.Render();
  auto required_null = PrepareFailure(box, "read_file", {{"path", nullptr}});
  EXPECT_THAT(required_null.message, HasSubstr("`path` must be a string, got null"));
}

// The toolbox validates against the shared schemas the broker offers the provider: one per tool it
// implements, in the same order.
TEST(ToolboxArgs, SchemasAreStrictObjects) {
  const auto& schemas = ToolboxSchemas();
  ASSERT_EQ(schemas.size(), Toolbox::Names().size());
  for (std::size_t i = 0; i < schemas.size(); ++i) {
    const auto& s = schemas[i];
    EXPECT_EQ(s["name"], Toolbox::Names()[i]);
    EXPECT_FALSE(s["description"].get<std::string>().empty());
    EXPECT_EQ(s["parameters"]["type"], "object");
    EXPECT_EQ(s["parameters"]["additionalProperties"], false);
    for (const auto& req : s["parameters"]["required"]) {
      EXPECT_TRUE(s["parameters"]["properties"].contains(req.get<std::string>())) << req;
    }
    for (const auto& [key, prop] : s["parameters"]["properties"].items()) {
      EXPECT_TRUE(prop.contains("type")) << key;
      EXPECT_TRUE(prop.contains("description")) << key;
    }
  }
}

// common/tool_schemas.h also knows `finish`; it is the loop's, never a toolbox call.
TEST(ToolboxArgs, FinishIsNotAToolboxTool) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws);
  ASSERT_NE(FindToolSchema("finish"), nullptr);
  auto out = PrepareFailure(box, "finish", {{"summary", "done"}});
  EXPECT_EQ(out.code, "unknown_tool");
  // The twin: a toolbox tool with the same kind of arguments is prepared.
  auto listed = Call(box, "list_dir", nlohmann::json::object());
  EXPECT_TRUE(listed.ok) << listed.Render();
}

TEST(ToolOutcomeRender, FailureShowsCodeHintAndOutput) {
  auto fail = ToolOutcome::Fail("timeout", "it took too long", "be quicker");
  fail.output = "partial";
  EXPECT_EQ(fail.Render(), "error [timeout]: it took too long\nhint: be quicker\npartial");
  ToolOutcome ok;
  ok.message = "exit code 0";
  ok.output = "hello\n";
  EXPECT_EQ(ok.Render(), "exit code 0\nhello\n");
  ok.message.clear();
  EXPECT_EQ(ok.Render(), "hello\n");
}

// ---- path guards ----

TEST(ToolboxPaths, EmptyAndNulAreRefusedBeforeAnyLookup) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws);
  auto empty = PrepareFailure(box, "read_file", {{"path", ""}});
  EXPECT_EQ(empty.code, "bad_arguments");
  EXPECT_THAT(empty.message, HasSubstr("path is empty"));
  auto nul = PrepareFailure(box, "read_file", {{"path", std::string("a.txt\0/../../etc", 16)}});
  EXPECT_EQ(nul.code, "bad_arguments");
  EXPECT_THAT(nul.message, HasSubstr("NUL byte"));
}

TEST(ToolboxPaths, DotDotOutOfTheWorkspaceIsRefused) {
  TempWorkspace ws;
  testing::WriteAbsolute(ws.outside() + "/secret.txt", "s3cr3t\n");
  auto box = OpenToolbox(ws);
  auto out = PrepareFailure(box, "read_file", {{"path", "../outside/secret.txt"}});
  EXPECT_EQ(out.code, "outside_workspace");
  EXPECT_THAT(out.message, StartsWith("read_file refused: "));
  EXPECT_THAT(out.message, HasSubstr("resolves outside the workspace"));
  EXPECT_FALSE(out.hint.empty());
  // ".." that stays inside is fine.
  ws.Write("sub/a.txt", "inside\n");
  auto inside = Call(box, "read_file", {{"path", "sub/../sub/a.txt"}});
  EXPECT_TRUE(inside.ok) << inside.Render();
}

TEST(ToolboxPaths, AbsolutePathOutsideIsRefusedInsideIsMadeRelative) {
  TempWorkspace ws;
  testing::WriteAbsolute(ws.outside() + "/secret.txt", "s3cr3t\n");
  ws.Write("src/a.txt", "hello\n");
  auto box = OpenToolbox(ws);
  auto out = PrepareFailure(box, "read_file", {{"path", ws.outside() + "/secret.txt"}});
  EXPECT_EQ(out.code, "outside_workspace");
  EXPECT_THAT(out.message, HasSubstr("is outside the workspace"));
  EXPECT_THAT(out.message, HasSubstr("absolute paths are accepted only inside the workspace"));
  auto etc = PrepareFailure(box, "read_file", {{"path", "/etc/passwd"}});
  EXPECT_EQ(etc.code, "outside_workspace");
  // A sibling whose name extends the workspace's is not inside it.
  auto sibling = PrepareFailure(box, "read_file", {{"path", ws.path() + "2/x"}});
  EXPECT_EQ(sibling.code, "outside_workspace");

  auto call = PrepareOk(box, "read_file", {{"path", ws.At("src/a.txt")}});
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->paths(), std::vector<std::string>{"src/a.txt"});
  auto result = call->Execute();
  EXPECT_TRUE(result.ok);
  EXPECT_THAT(result.output, HasSubstr("hello"));
  // Inside by prefix, outside by "..": the kernel refuses it.
  auto climb = PrepareFailure(box, "read_file", {{"path", ws.path() + "/../outside/secret.txt"}});
  EXPECT_EQ(climb.code, "outside_workspace");
}

TEST(ToolboxPaths, SymlinksPointingOutAreRefusedForFilesAndDirectories) {
  TempWorkspace ws;
  testing::WriteAbsolute(ws.outside() + "/secret.txt", "s3cr3t\n");
  ws.Symlink(ws.outside() + "/secret.txt", "abs_file");
  ws.Symlink("../outside/secret.txt", "rel_file");
  ws.Symlink(ws.outside(), "dir_link");
  auto box = OpenToolbox(ws);
  for (const char* p : {"abs_file", "rel_file", "dir_link/secret.txt"}) {
    auto out = PrepareFailure(box, "read_file", {{"path", p}});
    EXPECT_EQ(out.code, "outside_workspace") << p;
    EXPECT_THAT(out.Render(), Not(HasSubstr("s3cr3t"))) << p;
  }
  auto list = PrepareFailure(box, "list_dir", {{"path", "dir_link"}});
  EXPECT_EQ(list.code, "outside_workspace");
  auto write = PrepareFailure(box, "write_file", {{"path", "dir_link/new.txt"}, {"content", "x"}});
  EXPECT_EQ(write.code, "outside_workspace");
  EXPECT_FALSE(std::filesystem::exists(ws.outside() + "/new.txt"));
  auto edit = PrepareFailure(box, "edit_file",
                             {{"path", "rel_file"}, {"old_string", "s3"}, {"new_string", "x"}});
  EXPECT_EQ(edit.code, "outside_workspace");
  EXPECT_EQ(testing::ReadAbsolute(ws.outside() + "/secret.txt"), "s3cr3t\n");
}

TEST(ToolboxPaths, SymlinkInsideTheWorkspaceResolvesToItsTarget) {
  TempWorkspace ws;
  ws.Write("real/a.txt", "content\n");
  ws.Symlink("real/a.txt", "link.txt");
  auto box = OpenToolbox(ws);
  auto call = PrepareOk(box, "read_file", {{"path", "link.txt"}});
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->paths(), std::vector<std::string>{"real/a.txt"});
}

TEST(ToolboxPaths, ProcSelfRootIsRefused) {
  TempWorkspace ws;
  testing::WriteAbsolute(ws.outside() + "/secret.txt", "s3cr3t\n");
  auto box = OpenToolbox(ws);
  // As an absolute argument: not inside the workspace path.
  auto direct = PrepareFailure(box, "read_file",
                               {{"path", "/proc/self/root" + ws.outside() + "/secret.txt"}});
  EXPECT_EQ(direct.code, "outside_workspace");
  // Through a planted symlink: absolute symlinks and magic links are refused by openat2.
  ws.Symlink("/proc/self/root" + ws.outside() + "/secret.txt", "via_proc");
  auto planted = PrepareFailure(box, "read_file", {{"path", "via_proc"}});
  EXPECT_EQ(planted.code, "outside_workspace");
  // A relative symlink climbing to / and then into /proc (refused at the first ".." above the
  // workspace, before the magic link is reached).
  std::string up;
  for (const auto& c : std::filesystem::path(ws.path())) {
    if (c != "/") up += "../";
  }
  ws.Symlink(up + "proc/self/root", "proc_root");
  auto magic =
      PrepareFailure(box, "read_file", {{"path", "proc_root" + ws.outside() + "/secret.txt"}});
  EXPECT_EQ(magic.code, "outside_workspace");
  EXPECT_THAT(magic.Render(), Not(HasSubstr("s3cr3t")));
}

TEST(ToolboxPaths, SwappedSymlinkAfterPrepareDoesNotRedirectRead) {
  TempWorkspace ws;
  testing::WriteAbsolute(ws.outside() + "/secret.txt", "s3cr3t\n");
  ws.Write("a.txt", "original\n");
  auto box = OpenToolbox(ws);
  auto call = PrepareOk(box, "read_file", {{"path", "a.txt"}});
  ASSERT_NE(call, nullptr);
  // After the decision: a.txt becomes a symlink to a file outside.
  ASSERT_EQ(::rename(ws.At("a.txt").c_str(), ws.At("a.orig").c_str()), 0);
  ws.Symlink(ws.outside() + "/secret.txt", "a.txt");
  auto out = call->Execute();
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_THAT(out.output, HasSubstr("original"));
  EXPECT_THAT(out.output, Not(HasSubstr("s3cr3t")));
}

TEST(ToolboxPaths, SwappedSymlinkAfterPrepareDoesNotRedirectEditOrWrite) {
  TempWorkspace ws;
  testing::WriteAbsolute(ws.outside() + "/secret.txt", "s3cr3t\n");
  ws.Write("a.txt", "original\n");
  ws.Write("b.txt", "bee\n");
  auto box = OpenToolbox(ws);
  ASSERT_TRUE(Call(box, "read_file", {{"path", "a.txt"}}).ok);
  ASSERT_TRUE(Call(box, "read_file", {{"path", "b.txt"}}).ok);
  auto edit = PrepareOk(box, "edit_file",
                        {{"path", "a.txt"}, {"old_string", "original"}, {"new_string", "edited"}});
  auto write = PrepareOk(box, "write_file", {{"path", "b.txt"}, {"content", "written\n"}});
  ASSERT_NE(edit, nullptr);
  ASSERT_NE(write, nullptr);
  for (const char* name : {"a.txt", "b.txt"}) {
    ASSERT_EQ(::rename(ws.At(name).c_str(), ws.At(std::string(name) + ".orig").c_str()), 0);
    ws.Symlink(ws.outside() + "/secret.txt", name);
  }
  auto e = edit->Execute();
  auto w = write->Execute();
  EXPECT_TRUE(e.ok) << e.Render();
  EXPECT_TRUE(w.ok) << w.Render();
  // The file outside is untouched; the names in the workspace now hold regular files with the
  // new content (the planted symlinks were replaced, not followed).
  EXPECT_EQ(testing::ReadAbsolute(ws.outside() + "/secret.txt"), "s3cr3t\n");
  EXPECT_EQ(ws.Read("a.txt"), "edited\n");
  EXPECT_EQ(ws.Read("b.txt"), "written\n");
  struct stat st {};
  ASSERT_EQ(::lstat(ws.At("a.txt").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(ToolboxPaths, DeniedPathIsRefusedNamingTheRule) {
  TempWorkspace ws;
  ws.Write(".env", "TOKEN=abc\n");
  ws.Write("config/.env", "TOKEN=def\n");
  ws.Write("ok.txt", "fine\n");
  ws.Symlink(".env", "innocent");
  PathFilter filter = [](std::string_view path, PathAccess) -> std::optional<PathDenial> {
    if (path == ".env" || path.ends_with("/.env")) return PathDenial{"deny **/.env", "secrets"};
    return std::nullopt;
  };
  auto box = OpenToolbox(ws, {}, filter);
  auto out = PrepareFailure(box, "read_file", {{"path", ".env"}});
  EXPECT_EQ(out.code, "denied");
  EXPECT_THAT(out.message, HasSubstr("read_file refused: .env is denied by rule `deny **/.env`"));
  auto nested = PrepareFailure(box, "read_file", {{"path", "config/.env"}});
  EXPECT_EQ(nested.code, "denied");
  // Through a symlink: the resolved path is what is judged.
  auto via_link = PrepareFailure(box, "read_file", {{"path", "innocent"}});
  EXPECT_EQ(via_link.code, "denied");
  auto write = PrepareFailure(box, "write_file", {{"path", "sub/.env"}, {"content", "x"}});
  EXPECT_EQ(write.code, "denied");
  EXPECT_FALSE(std::filesystem::exists(ws.At("sub")));
  EXPECT_TRUE(Call(box, "read_file", {{"path", "ok.txt"}}).ok);
}

// ---- read_file ----

TEST(ReadFile, NumbersLinesAndRecordsTheDigest) {
  TempWorkspace ws;
  ws.Write("a.py", "def f():\n    return 1\n");
  auto box = OpenToolbox(ws);
  auto out = Call(box, "read_file", {{"path", "a.py"}});
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_EQ(out.output, "   1\tdef f():\n   2\t    return 1\n");
  EXPECT_EQ(out.message, "");
  EXPECT_EQ(box.ledger().Digest("a.py"), Sha256Hex("def f():\n    return 1\n"));
}

TEST(ReadFile, PagesLargeFilesAndRecordsTheWholeFileDigest) {
  TempWorkspace ws;
  const std::string content = Numbered(1, 5120);
  ws.Write("big.txt", content);
  ToolLimits limits;
  limits.read_max_lines = 2000;
  limits.read_max_bytes = 1 << 20;
  auto box = OpenToolbox(ws, limits);
  auto first = Call(box, "read_file", {{"path", "big.txt"}});
  ASSERT_TRUE(first.ok) << first.Render();
  EXPECT_THAT(first.message,
              HasSubstr("lines 1-2000 of 5120 in `big.txt`; call read_file with offset=2001 to "
                        "continue"));
  EXPECT_THAT(first.output, HasSubstr("2000\tline 2000\n"));
  EXPECT_THAT(first.output, Not(HasSubstr("line 2001")));
  EXPECT_EQ(box.ledger().Digest("big.txt"), Sha256Hex(content));

  auto window = Call(box, "read_file", {{"path", "big.txt"}, {"offset", 5000}, {"limit", 200}});
  ASSERT_TRUE(window.ok);
  EXPECT_THAT(window.message, HasSubstr("lines 5000-5120 of 5120"));
  EXPECT_THAT(window.message, Not(HasSubstr("continue")));
  EXPECT_THAT(window.output, StartsWith("5000\tline 5000\n"));

  auto past = Call(box, "read_file", {{"path", "big.txt"}, {"offset", 6000}});
  EXPECT_EQ(past.code, "bad_arguments");
  EXPECT_THAT(past.message, HasSubstr("past the end"));
}

TEST(ReadFile, TooLargeWithoutRangeAsksForOffsetOrGrep) {
  TempWorkspace ws;
  ws.Write("big.txt", Numbered(1, 2000));
  ToolLimits limits;
  limits.read_max_bytes = 4096;
  auto box = OpenToolbox(ws, limits);
  auto out = PrepareFailure(box, "read_file", {{"path", "big.txt"}});
  EXPECT_EQ(out.code, "too_large");
  EXPECT_THAT(out.hint, AllOf(HasSubstr("offset"), HasSubstr("limit"), HasSubstr("grep")));
  auto windowed = Call(box, "read_file", {{"path", "big.txt"}, {"offset", 10}, {"limit", 5}});
  ASSERT_TRUE(windowed.ok) << windowed.Render();
  EXPECT_THAT(windowed.output, HasSubstr("  10\tline 10\n"));
  // A window whose output exceeds the byte limit stops early and says where to continue.
  auto wide = Call(box, "read_file", {{"path", "big.txt"}, {"offset", 1}, {"limit", 2000}});
  ASSERT_TRUE(wide.ok);
  EXPECT_LE(wide.output.size(), 4096U);
  EXPECT_THAT(wide.message, HasSubstr("to continue"));
}

TEST(ReadFile, BinaryAndDirectoriesAreRefused) {
  TempWorkspace ws;
  ws.Write("blob.bin", std::string("ELF\0\0\1\2", 7));
  ws.Write("latin.bin", std::string(200, '\xE9'));
  ws.Mkdir("dir");
  auto box = OpenToolbox(ws);
  auto bin = PrepareFailure(box, "read_file", {{"path", "blob.bin"}});
  EXPECT_EQ(bin.code, "binary_file");
  auto inval = PrepareFailure(box, "read_file", {{"path", "latin.bin"}});
  EXPECT_EQ(inval.code, "binary_file");
  auto dir = PrepareFailure(box, "read_file", {{"path", "dir"}});
  EXPECT_EQ(dir.code, "is_directory");
  EXPECT_THAT(dir.hint, HasSubstr("list_dir"));
  auto missing = PrepareFailure(box, "read_file", {{"path", "nope.txt"}});
  EXPECT_EQ(missing.code, "not_found");
  EXPECT_FALSE(box.ledger().Digest("blob.bin").has_value());
}

TEST(ReadFile, FifoIsRefusedWithoutBlocking) {
  TempWorkspace ws;
  ASSERT_EQ(::mkfifo(ws.At("pipe").c_str(), 0600), 0);
  auto box = OpenToolbox(ws);
  auto out = PrepareFailure(box, "read_file", {{"path", "pipe"}});
  EXPECT_EQ(out.code, "not_regular_file");
}

TEST(ReadFile, InvalidUtf8IsReplacedSoTheResultStaysValidJson) {
  TempWorkspace ws;
  ws.Write("mostly.txt", "caf\xE9 au lait, a long enough line of plain text\n");
  auto box = OpenToolbox(ws);
  auto out = Call(box, "read_file", {{"path", "mostly.txt"}});
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_THAT(out.output, HasSubstr("caf\xEF\xBF\xBD au lait"));
  EXPECT_NO_THROW((void)nlohmann::json(out.Render()).dump());
}

// ---- write_file ----

TEST(WriteFile, CreatesNewFilesAndMissingDirectories) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws);
  auto call = PrepareOk(box, "write_file", {{"path", "new/deep/a.txt"}, {"content", "one\ntwo\n"}});
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->paths(), std::vector<std::string>{"new/deep/a.txt"});
  // Prepare changed nothing.
  EXPECT_FALSE(std::filesystem::exists(ws.At("new")));
  auto out = call->Execute();
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_EQ(out.message, "created `new/deep/a.txt` (2 lines, 8 bytes)");
  EXPECT_EQ(out.changed_paths, std::vector<std::string>{"new/deep/a.txt"});
  EXPECT_EQ(ws.Read("new/deep/a.txt"), "one\ntwo\n");
  EXPECT_EQ(box.ledger().Check("new/deep/a.txt", Sha256Hex("one\ntwo\n")), Ledger::State::kFresh);
  // No temporary file left behind.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(ws.At("new/deep"))) {
    ++entries;
  }
  EXPECT_EQ(entries, 1U);
}

TEST(WriteFile, ReplacingRequiresAFreshReadAndKeepsTheMode) {
  TempWorkspace ws;
  ws.Write("run.sh", "#!/bin/sh\necho old\n");
  ASSERT_EQ(::chmod(ws.At("run.sh").c_str(), 0750), 0);
  auto box = OpenToolbox(ws);
  auto unread = PrepareFailure(box, "write_file", {{"path", "run.sh"}, {"content", "x"}});
  EXPECT_EQ(unread.code, "not_read");
  ASSERT_TRUE(Call(box, "read_file", {{"path", "run.sh"}}).ok);
  auto out = Call(box, "write_file", {{"path", "run.sh"}, {"content", "#!/bin/sh\necho new\n"}});
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_THAT(out.message, StartsWith("replaced `run.sh`"));
  EXPECT_THAT(out.output, HasSubstr("-echo old\n+echo new\n"));
  struct stat st {};
  ASSERT_EQ(::stat(ws.At("run.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750U);
  // The agent knows what it wrote: a second replacement needs no new read.
  EXPECT_TRUE(Call(box, "write_file", {{"path", "run.sh"}, {"content", "x\n"}}).ok);
}

TEST(WriteFile, ContentAboveTheLimitIsRefused) {
  TempWorkspace ws;
  ToolLimits limits;
  limits.write_max_bytes = 10;
  auto box = OpenToolbox(ws, limits);
  auto out =
      PrepareFailure(box, "write_file", {{"path", "a.txt"}, {"content", std::string(11, 'x')}});
  EXPECT_EQ(out.code, "too_large");
  auto dir = PrepareFailure(box, "write_file", {{"path", "a/"}, {"content", "x"}});
  EXPECT_EQ(dir.code, "bad_arguments");
}

TEST(WriteFile, CreatingDoesNotClobberAFileThatAppearedAfterPrepare) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws);
  auto call = PrepareOk(box, "write_file", {{"path", "a.txt"}, {"content", "mine\n"}});
  ASSERT_NE(call, nullptr);
  ws.Write("a.txt", "someone else's\n");
  auto out = call->Execute();
  EXPECT_EQ(out.code, "exists");
  EXPECT_EQ(ws.Read("a.txt"), "someone else's\n");
}

// ---- edit_file ----

TEST(EditFile, ReplacesAUniqueMatchAndReturnsTheDiff) {
  TempWorkspace ws;
  ws.Write("a.c", "int a;\nint b;\nint c;\nint d;\nint e;\nint f;\nint g;\nint h;\n");
  auto box = OpenToolbox(ws);
  ASSERT_TRUE(Call(box, "read_file", {{"path", "a.c"}}).ok);
  auto out = Call(box, "edit_file",
                  {{"path", "a.c"}, {"old_string", "int e;"}, {"new_string", "long e;"}});
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_EQ(out.output,
            "--- a/a.c\n+++ b/a.c\n@@ -2,7 +2,7 @@\n int b;\n int c;\n int d;\n-int e;\n+long "
            "e;\n int f;\n int g;\n int h;\n");
  EXPECT_EQ(ws.Read("a.c"), "int a;\nint b;\nint c;\nint d;\nlong e;\nint f;\nint g;\nint h;\n");
  EXPECT_EQ(out.changed_paths, std::vector<std::string>{"a.c"});
  // The ledger knows the new content: a second edit needs no re-read.
  EXPECT_TRUE(
      Call(box, "edit_file", {{"path", "a.c"}, {"old_string", "int a;"}, {"new_string", "int z;"}})
          .ok);
}

TEST(EditFile, AmbiguousMatchListsLineNumbers) {
  TempWorkspace ws;
  ws.Write("a.py", "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n");
  auto box = OpenToolbox(ws);
  ASSERT_TRUE(Call(box, "read_file", {{"path", "a.py"}}).ok);
  auto out = PrepareFailure(box, "edit_file",
                            {{"path", "a.py"}, {"old_string", "x = 1"}, {"new_string", "x = 2"}});
  EXPECT_EQ(out.code, "ambiguous_match");
  EXPECT_THAT(out.message, HasSubstr("occurs 3 times"));
  EXPECT_THAT(out.message, HasSubstr("at lines 1, 3, 5"));
  EXPECT_THAT(out.hint, HasSubstr("replace_all"));
  auto all = Call(
      box, "edit_file",
      {{"path", "a.py"}, {"old_string", "x = 1"}, {"new_string", "x = 2"}, {"replace_all", true}});
  ASSERT_TRUE(all.ok) << all.Render();
  EXPECT_EQ(ws.Read("a.py"), "x = 2\ny = 2\nx = 2\nz = 3\nx = 2\n");
}

TEST(EditFile, WhitespaceOnlyDifferenceIsExplained) {
  TempWorkspace ws;
  ws.Write("a.py", "def f():\n    if x:\n        return 1\n");
  auto box = OpenToolbox(ws);
  ASSERT_TRUE(Call(box, "read_file", {{"path", "a.py"}}).ok);
  auto out = PrepareFailure(
      box, "edit_file",
      {{"path", "a.py"}, {"old_string", "if x:\n  return 1"}, {"new_string", "if y:\n  return 2"}});
  EXPECT_EQ(out.code, "no_match");
  EXPECT_THAT(out.message, HasSubstr("differing only in whitespace"));
  EXPECT_THAT(out.message, HasSubstr("at line(s) 2"));
  auto plain = PrepareFailure(box, "edit_file",
                              {{"path", "a.py"}, {"old_string", "nothing"}, {"new_string", "x"}});
  EXPECT_EQ(plain.code, "no_match");
  EXPECT_THAT(plain.message, Not(HasSubstr("whitespace")));
  auto numbered = PrepareFailure(
      box, "edit_file", {{"path", "a.py"}, {"old_string", "   2\t    if x:"}, {"new_string", "x"}});
  EXPECT_THAT(numbered.hint, HasSubstr("line-number prefix"));
}

TEST(EditFile, NeverReadStaleAndCompactedFilesAreRefused) {
  TempWorkspace ws;
  ws.Write("a.txt", "alpha\n");
  auto box = OpenToolbox(ws);
  nlohmann::json edit = {{"path", "a.txt"}, {"old_string", "alpha"}, {"new_string", "beta"}};
  auto never = PrepareFailure(box, "edit_file", edit);
  EXPECT_EQ(never.code, "not_read");
  EXPECT_THAT(never.message, HasSubstr("has not been read"));

  ASSERT_TRUE(Call(box, "read_file", {{"path", "a.txt"}}).ok);
  ws.Write("a.txt", "alpha changed on disk\n");
  auto stale = PrepareFailure(box, "edit_file", edit);
  EXPECT_EQ(stale.code, "stale_read");
  EXPECT_THAT(stale.message, HasSubstr("changed since it was last read"));

  ASSERT_TRUE(Call(box, "read_file", {{"path", "a.txt"}}).ok);
  box.ledger().Invalidate("a.txt");
  auto compacted = PrepareFailure(box, "edit_file", edit);
  EXPECT_EQ(compacted.code, "not_read");
  EXPECT_THAT(compacted.message, HasSubstr("dropped from the context"));
  EXPECT_EQ(ws.Read("a.txt"), "alpha changed on disk\n");
}

TEST(EditFile, ChangeBetweenPrepareAndExecuteIsCaught) {
  TempWorkspace ws;
  ws.Write("a.txt", "alpha\n");
  auto box = OpenToolbox(ws);
  ASSERT_TRUE(Call(box, "read_file", {{"path", "a.txt"}}).ok);
  auto call = PrepareOk(box, "edit_file",
                        {{"path", "a.txt"}, {"old_string", "alpha"}, {"new_string", "beta"}});
  ASSERT_NE(call, nullptr);
  // Same inode, new content.
  {
    std::FILE* f = std::fopen(ws.At("a.txt").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("alpha and more\n", f);
    std::fclose(f);
  }
  auto out = call->Execute();
  EXPECT_EQ(out.code, "stale_read");
  EXPECT_EQ(ws.Read("a.txt"), "alpha and more\n");
}

TEST(EditFile, AfterACommandAnUnchangedFileIsStillEditableAChangedOneIsNot) {
  TempWorkspace ws;
  ws.Write("same.txt", "one\n");
  ws.Write("changed.txt", "two\n");
  auto box = OpenToolbox(ws);
  ASSERT_TRUE(Call(box, "read_file", {{"path", "same.txt"}}).ok);
  ASSERT_TRUE(Call(box, "read_file", {{"path", "changed.txt"}}).ok);
  auto cmd = Call(box, "run_command", {{"command", "echo three > changed.txt"}});
  ASSERT_TRUE(cmd.ok) << cmd.Render();
  EXPECT_TRUE(cmd.workspace_may_have_changed);
  auto same =
      Call(box, "edit_file", {{"path", "same.txt"}, {"old_string", "one"}, {"new_string", "uno"}});
  EXPECT_TRUE(same.ok) << same.Render();
  auto changed = PrepareFailure(
      box, "edit_file", {{"path", "changed.txt"}, {"old_string", "two"}, {"new_string", "dos"}});
  EXPECT_EQ(changed.code, "stale_read");
  EXPECT_THAT(changed.message, HasSubstr("a run_command ran since then"));
}

TEST(EditFile, IdenticalStringsAndMissingFilesAreRefused) {
  TempWorkspace ws;
  ws.Write("a.txt", "alpha\n");
  auto box = OpenToolbox(ws);
  auto same = PrepareFailure(box, "edit_file",
                             {{"path", "a.txt"}, {"old_string", "alpha"}, {"new_string", "alpha"}});
  EXPECT_EQ(same.code, "bad_arguments");
  EXPECT_THAT(same.message, HasSubstr("identical"));
  auto empty = PrepareFailure(box, "edit_file",
                              {{"path", "a.txt"}, {"old_string", ""}, {"new_string", "x"}});
  EXPECT_EQ(empty.code, "bad_arguments");
  auto missing = PrepareFailure(box, "edit_file",
                                {{"path", "b.txt"}, {"old_string", "a"}, {"new_string", "b"}});
  EXPECT_EQ(missing.code, "not_found");
  EXPECT_THAT(missing.hint, HasSubstr("write_file"));
}

}  // namespace
}  // namespace cagent::agent
