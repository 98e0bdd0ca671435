// libFuzzer target for batch task files (launcher/batch/tasks.h, LoadTasks): `cagent batch` may
// be handed a task file someone else wrote, and its local paths must stay beneath the task file's
// directory (issue #33). The input is written as the task file into a scratch task root that
// holds a repository directory, a task and a profile file, and a file outside the root.
//
// Invariants: LoadTasks never throws or crashes; on success every task has a valid id unique in
// the file (case-insensitively), exactly one of task_text and task_file, and every local path it
// names (repo, task_file, a profile file, a replay model file) resolved beneath the root; on
// failure the error names the task file.
#include <unistd.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>

#include "launcher/batch/tasks.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
namespace batch = cagent::launcher::batch;
namespace fs = std::filesystem;

struct Root {
  std::string dir;    // the scratch directory; the root is dir/root
  std::string root;   // its canonical path
  std::string tasks;  // root/tasks.jsonl
};

const Root& Scratch() {
  static const Root r = [] {
    std::string tmpl = (fs::temp_directory_path() / "cagent-task-fuzz-XXXXXX").string();
    Check(::mkdtemp(tmpl.data()) != nullptr);
    Root out;
    out.dir = tmpl;
    fs::create_directories(out.dir + "/root/repos/calc/.git");
    fs::create_directories(out.dir + "/root/sub");
    std::ofstream(out.dir + "/root/task.md") << "Fix add().\n";
    std::ofstream(out.dir + "/root/p.cagent") << "profile p\nextends backend\n";
    std::ofstream(out.dir + "/root/turns.jsonl") << "{}\n";
    std::ofstream(out.dir + "/outside.md") << "the caller's private file\n";
    fs::create_symlink("../outside.md", out.dir + "/root/sub/leak.md");
    out.root = fs::canonical(out.dir + "/root").string();
    out.tasks = out.root + "/tasks.jsonl";
    return out;
  }();
  static const bool cleanup = [] {
    return std::atexit([] {
             std::error_code ignored;
             fs::remove_all(Scratch().dir, ignored);
           }) == 0;
  }();
  (void)cleanup;
  return r;
}

bool Beneath(const std::string& path, const std::string& root) {
  return path.rfind(root + "/", 0) == 0;
}

bool ValidId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Root& r = Scratch();
  {
    std::ofstream out(r.tasks, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const auto loaded = batch::LoadTasks(r.tasks);
  if (!loaded.ok()) {
    Check(loaded.error().Message().find("tasks.jsonl") != std::string::npos);
    return 0;
  }
  std::set<std::string> ids;
  for (const batch::BatchTask& t : *loaded) {
    Check(ValidId(t.id));
    std::string lower = t.id;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    Check(ids.insert(lower).second);
    Check(t.task_text.empty() != t.task_file.empty());
    Check(t.paths_confined);
    if (!t.repo_is_url) Check(Beneath(t.repo, r.root) || t.repo == r.root);
    if (!t.task_file.empty()) Check(Beneath(t.task_file, r.root));
    if (t.profile.find('/') != std::string::npos || t.profile.ends_with(".cagent")) {
      Check(Beneath(t.profile, r.root));
    }
    if (t.model.rfind("replay:", 0) == 0) Check(Beneath(t.model.substr(7), r.root));
  }
  return 0;
}
