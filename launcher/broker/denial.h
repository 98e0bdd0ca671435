// Denial text: what the model is told when the broker refuses a tool call. Runs in cagent
// (trusted), on the broker's thread; pure (asks the engine, no I/O).
//
// Every message says what was refused, which rule refused it (and where it is written), and what
// to do instead. An alternative is offered only after the same engine that refused the call has
// allowed the alternative (a plain `allow`, not `ask`): the broker never steers the model into a
// second refusal. When no alternative is allowed, the message says so and tells the model not to
// retry.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "launcher/broker/tool_mapping.h"
#include "policy/language/engine.h"

namespace cagent::launcher::broker {

// One alternative offered to the model, as the engine was asked about it.
struct Suggestion {
  policy::Request request;  // a tool call (kind kTool), as the engine was asked
  std::string text;         // the sentence in the message
};

struct Denial {
  std::string message;
  std::vector<Suggestion> suggestions;  // each allowed by the engine
};

// Why the call ended up refused.
enum class DenialCause {
  kPolicy,            // the profile denies it
  kApprovalDeclined,  // the profile asks; the operator said no
  kHeadless,          // the profile asks; nobody can be asked (never-ask, --approve never, no tty)
};

// `location` is the rule's "file:line:col" ("" for built-in rules). For kHeadless, `why` names
// the setting that denied the ask ("approval never-ask", "--approve never", "no terminal to ask
// on"); empty keeps the general wording.
Denial ExplainDenial(const policy::Engine& engine, const MappedTool& call,
                     const policy::Decision& decision, std::string_view location,
                     DenialCause cause = DenialCause::kPolicy, std::string_view why = {});

// For a tool name outside the closed set.
std::string UnknownToolMessage(std::string_view tool, const std::vector<std::string>& enabled);
// For unusable arguments (MappedTool::argument_error).
std::string ArgumentMessage(const MappedTool& call);

}  // namespace cagent::launcher::broker
