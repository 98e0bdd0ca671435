// Whether a profile's `ask` rules can do what they say: ask a person, about something that could
// work once the person says yes.
//
// Two ways an ask is incoherent, both warned about by `cagent policy check`:
//   - the approval mode cannot ask: under `never-ask` every ask is a denial nobody sees asked
//     (`cagent policy audit` reports the same rules as CAGENT006);
//   - the request cannot work whatever the answer: a package install (`ask pip install`, `ask npm
//     install *` ...) under `network none`, or `loopback` without a hosts rule that reaches the
//     tool's registry, fails for lack of a network after a person approved it.
// Pure, like the rest of policy/: it reads the compiled Policy only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/language/ir.h"

namespace cagent::policy {

// An `ask` rule of the compiled policy, as its decisions name it: "commands: ask pip install",
// "tools: ask write_file on **/Cargo.lock", "hosts: ask *.example.com", "filesystem: ask write
// db/**". `length` is the length of the pattern text at `loc`, for a caret.
struct AskRule {
  std::string rule;
  Location loc;
  std::uint32_t length = 1;
};

// Every ask rule: commands, tools, hosts, filesystem, in that order.
[[nodiscard]] std::vector<AskRule> AskRules(const Policy& policy);

struct IncoherentAsk {
  std::string rule;  // as in AskRule
  Location loc;
  std::uint32_t length = 1;
  std::string message;  // what is wrong, naming the rule
  std::string hint;     // what to write instead
};

// The ask rules of `policy` that cannot ask, or that ask for an install no registry is reachable
// for (above). One entry per rule and problem; an ask rule under never-ask that is also an
// unreachable install gets both.
[[nodiscard]] std::vector<IncoherentAsk> IncoherentAsks(const Policy& policy);

// The reason recorded when an ask is denied because nobody may be asked: names the setting that
// decided and the ask rule, e.g. "denied: approval never-ask (rule `commands: ask pip install` at
// backend.cagent:40:7)". `setting` is what decided ("approval never-ask", "--approve never",
// "no terminal to ask on"); `where` is the rule's location as shown to people, or empty.
[[nodiscard]] std::string AskDeniedReason(std::string_view setting, std::string_view rule,
                                          std::string_view where);

}  // namespace cagent::policy
