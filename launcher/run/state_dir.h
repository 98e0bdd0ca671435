// Where runs and agent sessions keep their records, and how they are named. Runs in cagent
// (trusted). `cagent run`, `cagent agent` and the commands that look at runs afterwards (runs,
// show, diff, apply, rm) all find their state here.
#pragma once

#include <string>

namespace cagent::launcher::run {

// A fresh run id: UTC time plus 24 random bits, "20261130T101500Z-3f9a1c". Ids sort by creation
// time (second resolution); the random part keeps two runs started in one second apart.
[[nodiscard]] std::string NewRunId();

// $XDG_STATE_HOME/cagent when XDG_STATE_HOME is an absolute path, else ~/.local/state/cagent
// (~ the caller's home), or /tmp/cagent when there is no home. Not created here: the callers make
// the subdirectory they write (runs/, sessions/) with mode 0700.
[[nodiscard]] std::string StateDirectory();

}  // namespace cagent::launcher::run
