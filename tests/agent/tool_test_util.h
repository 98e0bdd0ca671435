// Helpers for the toolbox tests: a fresh temporary workspace per test and one-line tool calls.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "agent/toolbox.h"

namespace cagent::agent::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
// `root` holds two siblings: `ws` (the workspace) and `outside` (a place outside it).
class TempWorkspace {
 public:
  TempWorkspace();
  ~TempWorkspace();
  TempWorkspace(const TempWorkspace&) = delete;
  TempWorkspace& operator=(const TempWorkspace&) = delete;

  [[nodiscard]] const std::string& path() const { return ws_; }
  [[nodiscard]] const std::string& outside() const { return outside_; }
  // Absolute path of a workspace-relative name.
  [[nodiscard]] std::string At(const std::string& relative) const { return ws_ + "/" + relative; }

  // Creates parents as needed.
  void Write(const std::string& relative, const std::string& content) const;
  [[nodiscard]] std::string Read(const std::string& relative) const;
  void Symlink(const std::string& target, const std::string& relative) const;
  void Mkdir(const std::string& relative) const;

 private:
  std::string root_;
  std::string ws_;
  std::string outside_;
};

// Writes `content` to an absolute path (parents created).
void WriteAbsolute(const std::string& path, const std::string& content);
std::string ReadAbsolute(const std::string& path);

// Prepare, then Execute if Prepare succeeded.
ToolOutcome Call(Toolbox& box, const std::string& tool, const nlohmann::json& args);
// The refusal of Prepare (fails the test if Prepare succeeded).
ToolOutcome PrepareFailure(Toolbox& box, const std::string& tool, const nlohmann::json& args);
// The prepared call (fails the test and returns nullptr if Prepare refused).
std::unique_ptr<PreparedCall> PrepareOk(Toolbox& box, const std::string& tool,
                                        const nlohmann::json& args);

// A toolbox on `ws` with small limits suited to tests.
Toolbox OpenToolbox(const TempWorkspace& ws, ToolLimits limits = {}, PathFilter filter = {});

}  // namespace cagent::agent::testing
