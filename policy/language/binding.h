// What a profile's symbolic paths name: one binding, made once per run and handed to every
// consumer of the profile, so that a path in it means the same file everywhere.
//
// A profile writes paths three ways (PathRef): "/abs", "~/rel" and "rel". For a run, the launcher
// makes one Binding (launcher/profile/spec.h, RunBinding) and passes that same value to
//   - the sandbox's view (SpecFromPolicy: which host trees are bound, hidden, made read-only),
//   - the broker's engine (which tool requests are allowed) and the agent's own path filter,
//   - the run's patch check (which changed paths the patch may touch),
//   - `cagent policy explain` (what a request would get in a run started here).
// "~" is the caller's home in all of them: the view binds host trees at the same path inside, so
// `hide ~/.cargo/credentials.toml` hides /home/alice/.cargo/credentials.toml and the engine judges
// a request for that same path. The sandbox's own HOME (a private tmpfs, `sandbox_home`) is a
// different directory, holds nothing of the host's, and is never what "~" means.
//
// Where there is no run (a profile's `examples`, a `policy test` cases file, `policy audit`), the
// profile is judged under PortableBinding(), so such a file means the same on every machine.
#pragma once

#include <string>

namespace cagent::policy {

struct Binding {
  std::string workspace;  // canonical absolute path; bound at the same path inside the sandbox
  std::string home;       // what "~" means: the caller's home; "" when the caller has none
  std::string sandbox_home = "/home/cagent";  // HOME inside the sandbox (a private tmpfs)

  friend bool operator==(const Binding&, const Binding&) = default;
};

// The binding used where no run exists: workspace "/workspace", home "/home/user", sandbox home
// "/home/cagent".
[[nodiscard]] Binding PortableBinding();

}  // namespace cagent::policy
