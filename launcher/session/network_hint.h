// Why a sandbox could not reach a host, said once (issue #32, "no network looks like a broken
// network"). A sandbox without network beyond loopback answers every name lookup "no such name"
// (launcher/sandbox/egress_view.h), and filtered egress refuses what its hosts rules do not allow;
// either way the command inside prints its own error (npm's ENOTFOUND or E403, pip's "Name or
// service not known"), which does not say that the profile chose this, nor how to allow a host. The
// first refusal of each cause in a sandbox gets one line from cagent naming the network mode and
// only the ways to allow a host that apply there:
//   no network (loopback, no hosts section): a hosts section in the profile, a -registries
//     built-in profile, `cagent exec --allow-host HOST` (exec without a profile);
//   filtered egress: a rule in the hosts section (or one more --allow-host);
//   a name resolving to a loopback, private or metadata address (refused unless named, against
//     DNS rebinding): `--resolve HOST:PORT:ADDR`, or a hosts rule naming the address.
// Pure text (NetworkHint*), plus a small thread-safe tally (RefusalTally) kept by EgressSession.
// Runs in cagent.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/egress/proxy.h"

namespace cagent::launcher::session {

// Where the sandbox is, for the wording and for which ways to allow a host apply.
struct NetworkHintContext {
  // The profile as the user named it ("frontend", "./ci.cagent"); "" = cagent exec without one.
  std::string profile{};
  // The sandbox has filtered egress: a hosts section, or --allow-host (then allow_host_flag).
  bool filtered = false;
  bool allow_host_flag = false;
  // The command is `cagent exec`: --allow-host HOST is a way to allow a host when no profile is
  // given.
  bool exec = false;
  // The command takes --resolve HOST:PORT:ADDR (exec and run do).
  bool resolve_flag = true;
};

// The line for a lookup of `name` that the DNS stub answered NXDOMAIN.
[[nodiscard]] std::string LookupRefusedHint(const NetworkHintContext& ctx, std::string_view name);

// The line for a refused connection, or "" when a host rule would not change the outcome (a
// malformed request, a TLS name that does not match, a used-up budget: the connection record's
// reason says those).
[[nodiscard]] std::string ConnectionRefusedHint(const NetworkHintContext& ctx,
                                                const egress::ConnectionRecord& record);

// The refusals of one sandbox: which hosts and names were refused, and the hint lines, each
// cause's once. Thread-safe (the proxy's thread adds, cagent's main thread reads).
class RefusalTally {
 public:
  explicit RefusalTally(NetworkHintContext ctx) : ctx_(std::move(ctx)) {}

  // Notes a refused lookup / a finished connection; returns the hint line when this refusal is
  // the first of its cause (no route to the host, or a non-public address), else "". A lookup of
  // a name without a dot, or below .localhost, is not noted (no host beyond the sandbox).
  std::string OnLookupRefused(const std::string& name);
  std::string OnConnection(const egress::ConnectionRecord& record);

  // The hint lines given so far, in order (at most two: one per cause).
  [[nodiscard]] std::vector<std::string> hints() const;
  // The refused destinations, distinct, in order, at most kMaxListed: "example.com (lookup)" for a
  // name lookup, "evil.test:443" for a connection.
  [[nodiscard]] std::vector<std::string> refused() const;
  // Every refused lookup (A and AAAA queries of a name count apart).
  [[nodiscard]] std::uint64_t lookups_refused() const;

  static constexpr std::size_t kMaxListed = 16;

 private:
  std::string Note(const std::string& what, int cause, const std::string& hint);

  const NetworkHintContext ctx_;
  mutable std::mutex mu_;
  std::vector<std::string> hints_;
  std::vector<std::string> refused_;
  std::uint64_t lookups_ = 0;
  std::array<bool, 2> given_{false, false};
};

// `detail` of a failed setup or verification command with what its sandbox refused and the hint:
// "exit status 1; refused: example.com (lookup); network: ..." (unchanged when nothing was).
[[nodiscard]] std::string WithRefusals(std::string detail, const RefusalTally& tally);

}  // namespace cagent::launcher::session
