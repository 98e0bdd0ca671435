#include "tests/agent/tool_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cagent::agent::testing {

TempWorkspace::TempWorkspace() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/cagent-tools-XXXXXX";
  char* made = ::mkdtemp(templ.data());
  if (made == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return;
  }
  root_ = made;
  ws_ = root_ + "/ws";
  outside_ = root_ + "/outside";
  std::filesystem::create_directories(ws_);
  std::filesystem::create_directories(outside_);
}

TempWorkspace::~TempWorkspace() {
  std::error_code ec;
  if (!root_.empty()) std::filesystem::remove_all(root_, ec);
}

void WriteAbsolute(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  ASSERT_TRUE(out.good()) << path;
}

std::string ReadAbsolute(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void TempWorkspace::Write(const std::string& relative, const std::string& content) const {
  WriteAbsolute(At(relative), content);
}

std::string TempWorkspace::Read(const std::string& relative) const {
  return ReadAbsolute(At(relative));
}

void TempWorkspace::Symlink(const std::string& target, const std::string& relative) const {
  std::filesystem::create_directories(std::filesystem::path(At(relative)).parent_path());
  ASSERT_EQ(::symlink(target.c_str(), At(relative).c_str()), 0) << relative;
}

void TempWorkspace::Mkdir(const std::string& relative) const {
  std::filesystem::create_directories(At(relative));
}

ToolOutcome Call(Toolbox& box, const std::string& tool, const nlohmann::json& args) {
  auto prepared = box.Prepare(tool, args);
  if (auto* fail = std::get_if<ToolOutcome>(&prepared)) return *fail;
  return std::get<std::unique_ptr<PreparedCall>>(prepared)->Execute();
}

ToolOutcome PrepareFailure(Toolbox& box, const std::string& tool, const nlohmann::json& args) {
  auto prepared = box.Prepare(tool, args);
  if (auto* fail = std::get_if<ToolOutcome>(&prepared)) {
    EXPECT_FALSE(fail->ok);
    return *fail;
  }
  ADD_FAILURE() << tool << " " << args.dump() << " was prepared, expected a refusal";
  return ToolOutcome{};
}

std::unique_ptr<PreparedCall> PrepareOk(Toolbox& box, const std::string& tool,
                                        const nlohmann::json& args) {
  auto prepared = box.Prepare(tool, args);
  if (auto* fail = std::get_if<ToolOutcome>(&prepared)) {
    ADD_FAILURE() << tool << " " << args.dump() << " refused: " << fail->Render();
    return nullptr;
  }
  return std::move(std::get<std::unique_ptr<PreparedCall>>(prepared));
}

Toolbox OpenToolbox(const TempWorkspace& ws, ToolLimits limits, PathFilter filter) {
  auto box = Toolbox::Open(ws.path(), limits, std::move(filter));
  if (!box.ok()) {
    ADD_FAILURE() << box.error().Message();
    std::abort();
  }
  return std::move(box.value());
}

}  // namespace cagent::agent::testing
