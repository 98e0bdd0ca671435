// The agent's loop in a served session (cagent mcp serve; cagent-agent inside the sandbox,
// single-threaded, blocking). There is no model and no conversation: the calls come from an MCP
// client through the broker, and each is run exactly as the task loop runs a model's call.
//
//   next_call                  the broker answers with a turn of calls (a model_result); it blocks
//                              until the client sends some
//   per call, in order:
//     unusable arguments, a tool the session does not enable, or Toolbox::Prepare refusing it (a
//     path outside the workspace, a file that does not exist, a denied path...): reported to the
//     broker as the agent's own refusal, tool_result{request 0, call_id, ok false, code, text},
//     since the client is waiting for an answer and only the broker can give it
//     otherwise tool_request{call id, name and arguments as given, the prepared paths}; a refusal
//     (deny, a declined approval) is the broker's to answer, nothing runs; allowed: Execute, with
//     the broker socket watched for a `cancel` of this request while run_command runs (the
//     command's process group is then killed and the outcome is "cancelled"), and tool_result
// A shutdown ends the loop: status "finished" (the client ended the session) is done, anything
// else ended by the broker. Nothing is sent to the broker when it ends (no finish: a served
// session has no summary).
#pragma once

#include "agent/broker_client.h"
#include "agent/loop.h"
#include "agent/toolbox.h"
#include "common/protocol.h"

namespace cagent::agent {

// Runs a served session to its end; `welcome.mode` is "serve". Never throws. LoopResult::turns
// counts the next_call answers.
LoopResult RunServeLoop(BrokerClient& client, Toolbox& toolbox, const protocol::Welcome& welcome);

}  // namespace cagent::agent
