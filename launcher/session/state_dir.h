// Where runs and agent sessions keep their records, and how they are named. Runs in cagent
// (trusted). `cagent run`, `cagent agent` and the commands that look at runs afterwards (runs,
// show, diff, apply, rm) all find their state here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"

namespace cagent::launcher::session {

// A fresh run id: UTC time plus 24 random bits, "20261130T101500Z-3f9a1c". Ids sort by creation
// time (second resolution); the random part keeps two runs started in one second apart.
[[nodiscard]] std::string NewRunId();

// The next number of runs_dir's run counter (runs_dir/sequence, made 0600 on first use): 1, 2, ...
// Taken under an exclusive flock, so two runs started at once get different numbers and the later
// a larger one; `cagent runs` orders by it (ids have second resolution and a random tail, so two
// runs of one second sorted at random). Fails when the counter cannot be read or written.
[[nodiscard]] Result<std::uint64_t> NextRunSequence(const std::string& runs_dir);

// A run directory's number (its file "sequence"), or nullopt for a run made before the counter.
[[nodiscard]] std::optional<std::uint64_t> RunSequence(const std::string& run_dir);

// $XDG_STATE_HOME/cagent when XDG_STATE_HOME is an absolute path, else ~/.local/state/cagent
// (~ the caller's home), or /tmp/cagent when there is no home; or, once UseStateDirectory was
// called, the directory it named. Not created here: the callers make the subdirectory they write
// (runs/, sessions/) with mode 0700.
[[nodiscard]] std::string StateDirectory();

// From now on StateDirectory() is `dir` (absolute), for the rest of this process: the commands
// that look at runs (runs, show, diff, apply, rm) with --state-dir DIR, which is where
// `cagent run --state-dir DIR` (a batch task: RESULTS/<id>/state) put its run.
void UseStateDirectory(std::string dir);

// Writes `text` to `path` whole or not at all: into path.tmp (made 0600, no link followed), synced,
// closed, then renamed over `path`. For the records a reader must never see half written
// (result.json, a session record, a batch result).
[[nodiscard]] Status WriteFileAtomic(const std::string& path, const std::string& text);

}  // namespace cagent::launcher::session
