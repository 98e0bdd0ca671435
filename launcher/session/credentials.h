// A profile's credentials (issue 36), read when a sandbox starts: each value from cagent's own
// environment or a file, checked, and given a per-sandbox placeholder — the only form of it the
// sandbox will see. Runs in cagent (trusted). The values are never logged and never in an error
// text: errors name the credential and where its value was looked for.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/egress/credential_swap.h"
#include "policy/language/ir.h"

namespace cagent::launcher::session {

struct LoadedCredentials {
  // One per credential whose value was found, in the profile's (name) order.
  std::vector<egress::SandboxCredential> credentials;
  // For each, the hosts it is bound to, as the profile wrote them.
  std::map<std::string, std::vector<policy::HostPattern>> hosts;
  // The variables to set inside (name -> placeholder) and the files to show at their path
  // (host path -> placeholder), for env and file credentials.
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;
  // Optional credentials without a value: "npm: NPM_TOKEN is not set (optional: skipped)".
  std::vector<std::string> skipped;
};

// The most bytes a credential file may hold.
inline constexpr std::size_t kMaxCredentialBytes = 64 * 1024;

// Reads every credential of `policy`. `env` is cagent's environment; `home` the caller's home (for
// `~/`). A value is the variable's text, or the file's without one trailing newline (LF or CRLF).
// Errors (kInvalidInput): a credential that is not optional and has no value (unset or empty
// variable, missing or empty file), a file that is not a regular file or is larger than
// kMaxCredentialBytes, a value with a control character (it would be written into HTTP headers).
Result<LoadedCredentials> LoadCredentials(const policy::Policy& policy,
                                          const std::map<std::string, std::string>& env,
                                          const std::string& home);

}  // namespace cagent::launcher::session
