// The audit log: a hash chain that shows edits, deletions, reordering, truncation and forged
// appends at the right line; mode 0600; a full disk loses entries without failing the caller or
// breaking the chain.
#include "launcher/broker/audit_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "common/json_text.h"
#include "common/sha256.h"

namespace cagent::launcher::broker {
namespace {

using nlohmann::json;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "cagent_audit_XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    if (!path_.empty()) {
      const std::string cmd = "rm -rf '" + path_ + "'";
      if (std::system(cmd.c_str()) != 0) {
        // best effort
      }
    }
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

std::vector<std::string> Lines(const std::string& content) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < content.size()) {
    std::size_t nl = content.find('\n', pos);
    if (nl == std::string::npos) nl = content.size();
    lines.push_back(content.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// A conforming entry (the schema's decision) whose request id is `i`.
AuditEvent Event(int i) {
  return audit::Decision(
      {.id = static_cast<std::uint64_t>(i),
       .tool = "run_command",
       .args_digest = CanonicalDigest(json{{"command", "make test " + std::to_string(i)}}),
       .verdict = "allow",
       .rule = "allow make",
       .call_id = "call_" + std::to_string(i),
       .turn = 1,
       .reason = "listed"});
}

// Writes a log of `n` entries at dir/audit.jsonl and returns its path.
std::string MakeLog(const TempDir& dir, int n, std::string* head = nullptr) {
  const std::string path = dir.path() + "/audit.jsonl";
  Result<AuditLog> log = AuditLog::Open(path, "run-1", "policy-digest");
  EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().Message());
  if (!log.ok()) return path;
  for (int i = 0; i < n; ++i) EXPECT_TRUE(log->Append(Event(i)));
  if (head != nullptr) *head = log->head();
  return path;
}

AuditVerifyReport Verify(const std::string& path) {
  Result<AuditVerifyReport> r = VerifyAuditLog(path);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().Message());
  return r.ok() ? *r : AuditVerifyReport{};
}

TEST(AuditLogTest, IntactLogVerifies) {
  TempDir dir;
  std::string head;
  const std::string path = MakeLog(dir, 5, &head);
  const AuditVerifyReport r = Verify(path);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.entries, 5u);
  EXPECT_EQ(r.first_bad_line, 0u);
  EXPECT_EQ(r.run_id, "run-1");
  EXPECT_EQ(r.head, head);
  EXPECT_EQ(r.head, Sha256Hex(Lines(ReadFile(path)).back()));
}

TEST(AuditLogTest, EntriesCarryTheDocumentedFields) {
  TempDir dir;
  const std::string path = MakeLog(dir, 2);
  const std::vector<std::string> lines = Lines(ReadFile(path));
  ASSERT_EQ(lines.size(), 2u);
  const json first = json::parse(lines[0]);
  for (const char* key : {"run", "seq", "time", "actor", "event", "policy", "tool", "args",
                          "verdict", "rule", "result", "detail", "prev"}) {
    EXPECT_TRUE(first.contains(key)) << key;
  }
  EXPECT_EQ(first["seq"], 0);
  EXPECT_EQ(first["prev"], std::string(64, '0'));
  EXPECT_EQ(first["policy"], "policy-digest");
  EXPECT_EQ(first["detail"]["id"], 0);
  EXPECT_EQ(first["actor"], "broker");
  EXPECT_EQ(first["event"], "decision");
  // RFC 3339 UTC with milliseconds: 2024-05-01T12:34:56.789Z
  const std::string time = first["time"];
  ASSERT_EQ(time.size(), 24u) << time;
  EXPECT_EQ(time[10], 'T');
  EXPECT_EQ(time[19], '.');
  EXPECT_EQ(time.back(), 'Z');
  const json second = json::parse(lines[1]);
  EXPECT_EQ(second["seq"], 1);
  EXPECT_EQ(second["prev"], Sha256Hex(lines[0]));
}

TEST(AuditLogTest, FileModeIs0600WhateverTheUmask) {
  TempDir dir;
  const mode_t old = umask(0);
  const std::string path = MakeLog(dir, 1);
  umask(old);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST(AuditLogTest, RefusesAnExistingFileAndASymlink) {
  TempDir dir;
  const std::string existing = dir.path() + "/existing";
  WriteFile(existing, "planted\n");
  Result<AuditLog> a = AuditLog::Open(existing, "r", "p");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().err, EEXIST);
  EXPECT_EQ(ReadFile(existing), "planted\n");

  const std::string link = dir.path() + "/link";
  ASSERT_EQ(symlink((dir.path() + "/target").c_str(), link.c_str()), 0);
  Result<AuditLog> b = AuditLog::Open(link, "r", "p");
  ASSERT_FALSE(b.ok());
  struct stat st {};
  EXPECT_NE(lstat((dir.path() + "/target").c_str(), &st), 0) << "wrote through the symlink";
}

TEST(AuditLogTest, EditedLineIsCaughtAtTheNextLine) {
  TempDir dir;
  const std::string path = MakeLog(dir, 5);
  std::vector<std::string> lines = Lines(ReadFile(path));
  // Line 3: the verdict was "allow"; make it look like something else was decided.
  const std::size_t at = lines[2].find("\"allow\"");
  ASSERT_NE(at, std::string::npos);
  lines[2].replace(at, 7, "\"deny!\"");
  WriteFile(path, Join(lines));
  const AuditVerifyReport r = Verify(path);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 4u);
  EXPECT_NE(r.message.find("line 4: prev does not match the SHA-256 of line 3"), std::string::npos)
      << r.message;
}

TEST(AuditLogTest, EditingTheLastLineChangesTheHead) {
  // The chain alone cannot show an edit of the last line (nothing after it records its hash);
  // the head digest the run record keeps does.
  TempDir dir;
  std::string head;
  const std::string path = MakeLog(dir, 3, &head);
  std::vector<std::string> lines = Lines(ReadFile(path));
  const std::size_t at = lines[2].find("\"allow\"");
  ASSERT_NE(at, std::string::npos);
  lines[2].replace(at, 7, "\"deny!\"");
  WriteFile(path, Join(lines));
  const AuditVerifyReport r = Verify(path);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_NE(r.head, head);
}

TEST(AuditLogTest, DeletedLineIsCaughtWhereItWas) {
  TempDir dir;
  const std::string path = MakeLog(dir, 5);
  std::vector<std::string> lines = Lines(ReadFile(path));
  lines.erase(lines.begin() + 2);  // line 3
  WriteFile(path, Join(lines));
  const AuditVerifyReport r = Verify(path);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 3u);
  EXPECT_NE(r.message.find("line 3: seq is 3, expected 2"), std::string::npos) << r.message;
}

TEST(AuditLogTest, DeletedFirstLineIsCaught) {
  TempDir dir;
  const std::string path = MakeLog(dir, 3);
  std::vector<std::string> lines = Lines(ReadFile(path));
  lines.erase(lines.begin());
  WriteFile(path, Join(lines));
  const AuditVerifyReport r = Verify(path);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 1u);
  EXPECT_NE(r.message.find("seq is 1, expected 0"), std::string::npos) << r.message;
}

TEST(AuditLogTest, ReorderedPairIsCaughtAtTheFirstOfThem) {
  TempDir dir;
  const std::string path = MakeLog(dir, 5);
  std::vector<std::string> lines = Lines(ReadFile(path));
  std::swap(lines[1], lines[2]);  // lines 2 and 3
  WriteFile(path, Join(lines));
  const AuditVerifyReport r = Verify(path);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 2u);
  EXPECT_NE(r.message.find("line 2: seq is 2, expected 1"), std::string::npos) << r.message;
}

TEST(AuditLogTest, TruncatedLastLineIsReportedAsSuch) {
  TempDir dir;
  const std::string path = MakeLog(dir, 5);
  std::string content = ReadFile(path);
  content.resize(content.size() - 40);  // cut in the middle of line 5
  WriteFile(path, content);
  const AuditVerifyReport r = Verify(path);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 5u);
  EXPECT_NE(r.message.find("line 5: truncated final line"), std::string::npos) << r.message;
}

TEST(AuditLogTest, MissingFinalNewlineAloneIsATruncation) {
  TempDir dir;
  const std::string path = MakeLog(dir, 2);
  std::string content = ReadFile(path);
  content.pop_back();
  WriteFile(path, content);
  const AuditVerifyReport r = Verify(path);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 2u);
  EXPECT_NE(r.message.find("truncated"), std::string::npos) << r.message;
}

TEST(AuditLogTest, ForgedAppendWithWrongPrevIsCaught) {
  TempDir dir;
  const std::string path = MakeLog(dir, 5);
  std::vector<std::string> lines = Lines(ReadFile(path));
  json forged = json::parse(lines.back());
  forged["seq"] = 5;
  forged["verdict"] = "allow";
  forged["event"] = "approval";
  forged["prev"] = std::string(64, 'a');
  lines.push_back(forged.dump());
  WriteFile(path, Join(lines));
  const AuditVerifyReport r = Verify(path);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 6u);
  EXPECT_NE(r.message.find("line 6: prev does not match the SHA-256 of line 5"), std::string::npos)
      << r.message;
}

TEST(AuditLogTest, LinesOfAnotherRunAndNonObjectsAreCaught) {
  TempDir dir;
  const std::string path = MakeLog(dir, 3);
  std::vector<std::string> lines = Lines(ReadFile(path));
  json other = json::parse(lines[1]);
  other["run"] = "run-2";
  std::vector<std::string> mixed = lines;
  mixed[1] = other.dump();
  WriteFile(path, Join(mixed));
  AuditVerifyReport r = Verify(path);
  EXPECT_EQ(r.first_bad_line, 2u);
  EXPECT_NE(r.message.find("run is \"run-2\""), std::string::npos) << r.message;

  mixed = lines;
  mixed[2] = "[1,2,3]";
  WriteFile(path, Join(mixed));
  r = Verify(path);
  EXPECT_EQ(r.first_bad_line, 3u);
  EXPECT_NE(r.message.find("not a JSON object"), std::string::npos) << r.message;

  mixed = lines;
  mixed[0] = "{\"run\": ";
  WriteFile(path, Join(mixed));
  r = Verify(path);
  EXPECT_EQ(r.first_bad_line, 1u);
  EXPECT_NE(r.message.find("not valid JSON"), std::string::npos) << r.message;

  // A tampered line nested 300 000 deep (600 KB) is refused before it is parsed: the checks walk
  // entries recursively, and a stack overflow would end `cagent log check` instead of reporting.
  mixed = lines;
  mixed[1] = "{\"detail\":" + std::string(300000, '[') + std::string(300000, ']') + "}";
  WriteFile(path, Join(mixed));
  r = Verify(path);
  EXPECT_EQ(r.first_bad_line, 2u);
  EXPECT_NE(r.message.find("nested deeper than 256 levels"), std::string::npos) << r.message;
}

TEST(AuditLogTest, EmptyLogVerifiesWithZeroEntries) {
  TempDir dir;
  const std::string path = MakeLog(dir, 0);
  const AuditVerifyReport r = Verify(path);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.entries, 0u);
  EXPECT_EQ(r.head, std::string(64, '0'));
}

TEST(AuditLogTest, UnreadableFileIsAnError) {
  Result<AuditVerifyReport> r = VerifyAuditLog("/nonexistent/cagent/audit.jsonl");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().err, ENOENT);
}

TEST(AuditLogTest, InvalidUtf8IsReplacedNotThrown) {
  TempDir dir;
  const std::string path = dir.path() + "/audit.jsonl";
  Result<AuditLog> log = AuditLog::Open(path, "run-1", "p");
  ASSERT_TRUE(log.ok());
  AuditEvent e = Event(0);
  e.fields.clear();  // the json detail, not the decision's typed one
  e.detail = {{"output", std::string("bad \xff\xfe bytes")}};
  e.tool = std::string("\xc3");
  EXPECT_TRUE(log->Append(e));
  EXPECT_TRUE(Verify(path).ok);
  EXPECT_NE(ReadFile(path).find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD
  EXPECT_EQ(CanonicalDigest(json(std::string("\xff"))).size(), 64u);
}

TEST(AuditLogTest, TypedDetailIsWrittenAsTheJsonObjectItStandsFor) {
  // decision and tool_result carry typed fields (no json value per field); the line must hold
  // exactly the bytes the json object of those fields dumps to, escapes and caps included.
  TempDir dir;
  const std::string path = dir.path() + "/audit.jsonl";
  Result<AuditLog> log = AuditLog::Open(path, "run \"1\"", "p");
  ASSERT_TRUE(log.ok());
  std::vector<std::string> many(40, "p");
  const std::vector<AuditEvent> events = {
      audit::Decision({.id = 3,
                       .tool = "edit_file",
                       .args_digest = std::string(64, 'a'),
                       .verdict = "ask",
                       .rule = "ask edit",
                       .call_id = "c\"1\"\n",
                       .turn = 2,
                       .paths = {"a.c", "\xc3\xa9", std::string("bad \xff")},
                       .reason = "tab\there \x01",
                       .location = "p.cagent:1:2",
                       .pending = true,
                       .note = "n"}),
      audit::Decision({.id = 4,
                       .tool = "read_file",
                       .args_digest = std::string(64, 'c'),
                       .verdict = "deny",
                       .rule = "r",
                       .paths = many,
                       .reason = ""}),
      audit::Decision({.id = 5,
                       .tool = "read_file",
                       .args_digest = std::string(64, 'c'),
                       .verdict = "deny",
                       .rule = "r",
                       .reason = "none"}),
      audit::ToolResult({.id = 6,
                         .tool = "run_command",
                         .output_digest = std::string(64, 'b'),
                         .request = 3,
                         .call_id = "c1",
                         .turn = 2,
                         .ok = false,
                         .error_code = "exit_1",
                         .bytes = 12,
                         .redacted = true,
                         .changed_paths = {"x", "y"}}),
  };
  for (const AuditEvent& e : events) {
    ASSERT_FALSE(e.fields.empty());
    ASSERT_TRUE(log->Append(e));
  }
  const std::string content = ReadFile(path);
  std::size_t pos = 0;
  for (const AuditEvent& e : events) {
    const std::size_t nl = content.find('\n', pos);
    ASSERT_NE(nl, std::string::npos);
    const std::string line = content.substr(pos, nl - pos);
    pos = nl + 1;
    const std::string want = "\"detail\":" + JsonText(e.DetailJson()) + ",\"prev\":";
    EXPECT_NE(line.find(want), std::string::npos) << line << "\nwant " << want;
    const json parsed = json::parse(line);
    EXPECT_EQ(parsed["detail"], json::parse(JsonText(e.DetailJson())));
    EXPECT_TRUE(ValidateAuditEntry(parsed).empty()) << line;
  }
  EXPECT_EQ(json::parse(content.substr(0, content.find('\n')))["run"], "run \"1\"");
  EXPECT_TRUE(Verify(path).ok);
}

TEST(AuditLogTest, StringDigestIsTheCanonicalDigestOfTheString) {
  for (const std::string& s : {std::string(), std::string("out\"put\n\\"),
                               std::string("\xe2\x82\xac"), std::string("bad \xff\xfe")}) {
    EXPECT_EQ(StringDigest(s), CanonicalDigest(json(s))) << s;
  }
}

TEST(AuditLogTest, CanonicalDigestIgnoresKeyOrderAndWhitespace) {
  const json a = json::parse(R"({"b": 1, "a": {"y": [1, 2], "x": "s"}})");
  const json b = json::parse(R"({"a":{"x":"s","y":[1,2]},"b":1})");
  EXPECT_EQ(CanonicalDigest(a), CanonicalDigest(b));
  EXPECT_EQ(CanonicalDigest(a), Sha256Hex(R"({"a":{"x":"s","y":[1,2]},"b":1})"));
  EXPECT_NE(CanonicalDigest(a), CanonicalDigest(json::parse(R"({"a":{"x":"s","y":[2,1]},"b":1})")));
}

TEST(AuditLogTest, ResumeContinuesTheChain) {
  TempDir dir;
  std::string head;
  const std::string path = MakeLog(dir, 3, &head);
  Result<AuditLog> log = AuditLog::Open(path, "run-1", "policy-digest", /*resume=*/true);
  ASSERT_TRUE(log.ok()) << log.error().Message();
  EXPECT_EQ(log->entries(), 3u);
  EXPECT_EQ(log->head(), head);
  EXPECT_TRUE(log->Append(Event(3)));
  EXPECT_TRUE(log->Append(Event(4)));
  const AuditVerifyReport r = Verify(path);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.entries, 5u);
}

TEST(AuditLogTest, ResumeRefusesABrokenChainOrAnotherRun) {
  TempDir dir;
  const std::string path = MakeLog(dir, 3);
  Result<AuditLog> other = AuditLog::Open(path, "run-2", "p", /*resume=*/true);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().Message().find("belongs to run \"run-1\""), std::string::npos)
      << other.error().Message();

  std::vector<std::string> lines = Lines(ReadFile(path));
  lines.erase(lines.begin() + 1);
  WriteFile(path, Join(lines));
  Result<AuditLog> broken = AuditLog::Open(path, "run-1", "p", /*resume=*/true);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().Message().find("does not verify: line 2"), std::string::npos)
      << broken.error().Message();
}

// ---- failing writes, in forked children (the limits and mounts stay there) ----

// Runs `body` in a child; returns its exit status and what it wrote to the pipe.
struct ChildResult {
  int status = -1;
  std::string output;
};
ChildResult RunInChild(const std::function<int(int out_fd)>& body) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipefd[0]);
    _exit(body(pipefd[1]));
  }
  close(pipefd[1]);
  ChildResult r;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) r.output.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

void Say(int fd, const std::string& text) {
  if (write(fd, text.data(), text.size()) < 0) {
    // the parent will see the exit code
  }
}

constexpr int kSkip = 77;

// Appends until the file system refuses, then some more; checks the promises and reports what
// went wrong on `out`. Returns the child's exit code.
int FillAndCheck(const std::string& path, int out, const std::function<void()>& make_room) {
  std::ostringstream oplog;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(oplog);
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));

  Result<AuditLog> log = AuditLog::Open(path, "run-full", "p");
  if (!log.ok()) {
    Say(out, "open: " + log.error().Message());
    return 1;
  }
  int appended = 0;
  while (appended < 10000 && log->Append(Event(appended))) ++appended;
  if (appended == 10000) {
    Say(out, "the file system never filled up");
    return 1;
  }
  const std::uint64_t written = log->entries();
  for (int i = 0; i < 5; ++i) {
    if (log->Append(Event(1000 + i))) {
      Say(out, "an append succeeded on a full file system");
      return 1;
    }
  }
  std::string problems;
  if (log->lost() != 6) problems += "lost() = " + std::to_string(log->lost()) + ", want 6; ";
  if (log->entries() != written) problems += "entries() changed by failed appends; ";
  const std::string text = oplog.str();
  std::size_t reports = 0;
  for (std::size_t at = text.find("write failed"); at != std::string::npos;
       at = text.find("write failed", at + 1)) {
    ++reports;
  }
  if (reports != 1) problems += "reported " + std::to_string(reports) + " times: " + text + "; ";
  Result<AuditVerifyReport> r = VerifyAuditLog(path);
  if (!r.ok() || !r->ok || r->entries != written) {
    problems +=
        "earlier entries do not verify: " + (r.ok() ? r->message : r.error().Message()) + "; ";
  }
  if (make_room) {
    make_room();
    if (!log->Append(Event(2000))) {
      problems += "append after making room failed; ";
    } else {
      Result<AuditVerifyReport> again = VerifyAuditLog(path);
      if (!again.ok() || !again->ok || again->entries != written + 1) {
        problems += "chain broken after recovery: " +
                    (again.ok() ? again->message : again.error().Message()) + "; ";
      }
      std::string content;
      std::ifstream in(path);
      std::string line;
      while (std::getline(in, line)) content = line;
      if (content.find("\"lost\":6") == std::string::npos) {
        problems += "the entry after the gap does not say \"lost\":6: " + content + "; ";
      }
    }
  }
  if (!problems.empty()) {
    Say(out, problems);
    return 1;
  }
  Say(out, "filled after " + std::to_string(written) + " entries");
  return 0;
}

TEST(AuditLogTest, FullTmpfsLosesEntriesButNotTheChain) {
  TempDir dir;
  const std::string mnt = dir.path() + "/tiny";
  ASSERT_EQ(mkdir(mnt.c_str(), 0700), 0);
  const uid_t uid = getuid();
  const gid_t gid = getgid();
  const ChildResult r = RunInChild([&](int out) -> int {
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      Say(out, std::string("unshare(CLONE_NEWUSER|CLONE_NEWNS): ") + std::strerror(errno));
      return kSkip;
    }
    const auto write_file = [](const char* file, const std::string& text) {
      const int fd = open(file, O_WRONLY | O_CLOEXEC);
      if (fd < 0) return false;
      const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      close(fd);
      return ok;
    };
    if (!write_file("/proc/self/setgroups", "deny") ||
        !write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n") ||
        !write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n")) {
      Say(out, std::string("writing the id maps: ") + std::strerror(errno));
      return kSkip;
    }
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=8k,mode=0700") != 0) {
      Say(out, std::string("mounting a tmpfs: ") + std::strerror(errno));
      return kSkip;
    }
    return FillAndCheck(mnt + "/audit.jsonl", out, nullptr);
  });
  if (r.status == kSkip) GTEST_SKIP() << "user namespaces unavailable: " << r.output;
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(AuditLogTest, FileSizeLimitLosesEntriesAndTheChainResumesWhenThereIsRoom) {
  // RLIMIT_FSIZE makes write(2) fail with EFBIG (after a short write at the limit): the same
  // code path as a full disk, without privileges. Raising the limit again is "making room".
  TempDir dir;
  const std::string path = dir.path() + "/audit.jsonl";
  const ChildResult r = RunInChild([&](int out) -> int {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{};
    getrlimit(RLIMIT_FSIZE, &lim);
    const rlimit saved = lim;
    lim.rlim_cur = 3000;
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) {
      Say(out, std::string("setrlimit: ") + std::strerror(errno));
      return 1;
    }
    return FillAndCheck(path, out, [saved] { setrlimit(RLIMIT_FSIZE, &saved); });
  });
  EXPECT_EQ(r.status, 0) << r.output;
}

}  // namespace
}  // namespace cagent::launcher::broker
