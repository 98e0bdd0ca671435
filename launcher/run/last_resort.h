// The last record of a run: what cagent writes when it is about to die without having written
// result.json (an exception nobody caught, std::terminate from a thread or a noexcept function).
// Runs in cagent (trusted).
//
// ExecuteRun arms it as soon as the run directory exists, with a complete "failed" record built
// in advance, and refreshes it as the run goes; writing it then needs no allocation and no
// JSON library — only open/write/rename on the prebuilt text — so it is safe from a terminate
// handler. A run that records its own result disarms it.
#pragma once

#include <string>

namespace cagent::launcher::run {

// Stores the record to write to `run_dir`/result.json if the process dies before Disarm().
// `json_text` must be a whole JSON document. Thread-safe; replaces what was armed before.
void ArmLastResortRecord(const std::string& run_dir, const std::string& json_text);
// Forgets it (the run wrote its own result.json).
void DisarmLastResortRecord();
// Writes the armed record unless result.json exists already; returns true when it wrote one.
// Async-signal-safe apart from reading the armed buffers, which it does without locking.
bool WriteLastResortRecord() noexcept;

// Installs a std::terminate handler that writes the armed record, says so on stderr, and aborts.
void InstallLastResortHandler();

}  // namespace cagent::launcher::run
