// Broker: the policy broker's session with one agent, over the broker's end of a socketpair.
// Runs in cagent (trusted), single-threaded on one boost::asio::io_context (post to it from other
// threads). Everything the agent sends is hostile: a malformed, oversized, out-of-order or unknown
// message gets an error reply and an audit entry; after `max_protocol_errors` the connection is
// closed and the run fails. The broker never blocks on the peer (the socket is non-blocking:
// replies are written at once as far as the socket takes them, the rest queued and written
// asynchronously; reads poll briefly, then wait in epoll) and never throws out of a handler.
// A request is decided, audited and answered on the io thread that read it: no other thread is
// woken on the way.
//
// Per request kind (one handler each, see broker.cc):
//   hello        version check, replies welcome (task, policy, tools, model info, limits)
//   model_call   budget check (turns, tokens), the conversation checked against the model's turns
//                (ModelTurns), its texts redacted, the provider request built by the broker: the
//                policy's tool schemas and max_tokens capped by the tokens left; one neutral turn
//                back, whose calls become the only ones tool requests may name
//   tool_request binding to a call of the model's latest turn (once), loop detection (keyed on the
//   call and cagent's own digest of the workspace
//                state), budget check (tool calls, by kind), policy decision on the tool and every
//                resolved path, approvals for `ask` bound to the call and its resolved paths;
//                denial text for the model
//   tool_result  output budget, redaction, digest into the audit log
//   progress     operator display (callback), audit
//   finish       records the agent's summary, acks, ends the session
//   next_call    a served session only (cagent mcp serve): the MCP client's next calls, from the
//                CallSource, become the turn tool requests may name (no model, no token budget);
//                every call handed out gets exactly one CallAnswer
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "common/protocol.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "launcher/broker/approver.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/budgets.h"
#include "launcher/broker/redactor.h"
#include "launcher/model/model_provider.h"
#include "policy/language/engine.h"
#include "policy/language/ir.h"

namespace cagent::launcher::broker {

struct LoopLimits {
  // The same call (canonical tool + arguments) with no workspace change in between: the Nth
  // occurrence is refused.
  std::uint32_t max_repeats = 3;
  // A cycle of period 2 or 3 (A-B-A-B...) repeated this many times in a row is refused.
  std::uint32_t max_cycle_repeats = 3;
  // Entries the workspace state walk looks at (workspace_state.h); beyond them the state is the
  // digest of what was seen plus the count, and the audit log says so once.
  std::size_t state_max_entries = 100000;
  // The behaviour before issue #13, kept only so a test can show the attack it allowed: the
  // workspace counts as changed whenever the agent reports a successful write or command (or any
  // changed path), instead of when cagent's own state digest of the workspace changes. Nothing in
  // cagent sets it.
  bool trust_agent_results = false;
};

enum class ApprovalMode {
  kPolicy,  // the profile's `approval` setting decides (never-ask / on-request / auto)
  kNever,   // headless: every ask is denied unless pre-approved (--approve never)
  kStop,    // an ask nobody approved beforehand ends the session with status kNeedsApproval,
            // recording the action and its digest (--approve stop)
};

struct BrokerConfig {
  std::string run_id;
  std::shared_ptr<const policy::Policy> policy;
  // The run's binding (policy/language/binding.h): where the profile's paths point.
  // `bindings.workspace` is the workspace path inside the sandbox, which is also its path on the
  // host (it is bound at its own path). Loop detection digests the state of this tree on the host
  // (workspace_state.h); an empty or unreadable path gives a constant state, so repeats are counted
  // on the calls alone.
  policy::Binding bindings;
  std::string policy_digest;  // SHA-256 of policy::Dump(*policy)
  std::string task;           // the task text (untrusted; forwarded to the agent)
  Budgets budgets;
  // The model's prices (models.toml), to count what the run spends; nullopt = not known (a
  // model-cost budget then cannot be set: CheckCostBudget).
  std::optional<TokenPrices> model_prices;
  LoopLimits loop;
  ApprovalMode approval = ApprovalMode::kPolicy;
  std::uint32_t max_protocol_errors = 8;
  std::uint32_t max_frame_bytes = protocol::kMaxFrameBytes;
  // Back-pressure: while more reply bytes than this wait to be written, the broker stops reading
  // (a peer that floods requests but never reads its replies stalls itself, not the broker); it
  // resumes once the queue is down to a quarter of it.
  std::size_t pause_reading_above = 1U << 20;
  // Adaptive polling (adaptive_poll.h): after answering, the io thread polls the agent's socket for
  // up to this long before it blocks in epoll, so an agent that answers at once is read without a
  // wake-up of the io thread. The window adapts (it costs CPU only while it catches messages, and
  // stops on a busy CPU); other work on the io_context waits for at most one window. Zero = never
  // poll: the default until a run on an idle machine shows it pays (docs/performance.md,
  // "Broker"); cagent_bench_broker --max-poll 100 measures it.
  std::chrono::microseconds max_poll{0};
  // cagent mcp serve: the welcome says mode "serve" (no task, no model), the agent asks for work
  // with next_call, and model_call is refused. Needs BrokerServices::calls.
  bool serve = false;
  // serve: who the "model" is in the welcome (the MCP client's name).
  std::string client_name;
};

// A served session's calls (cagent mcp serve): an MCP client plays the model's part. The broker
// hands each call to the agent in the sandbox, decides it exactly as in a run (the model-turn
// binding, loop detection, budgets, the policy, approvals) and answers it once.
struct ServedCall {
  std::string call_id;  // unique in the session (the source's choice)
  std::string tool;     // a toolbox tool name
  nlohmann::json arguments = nlohmann::json::object();
};
struct CallAnswer {
  enum class Kind : std::uint8_t {
    kResult,   // the call ran; `ok`, `error_code`, `text` (its output, redacted)
    kDenied,   // the broker refused it (the policy, a declined approval, loop detection, the
               // arguments, a cancelled call...): `text` is the refusal for the client, naming the
               // rule and what to do instead
    kRefused,  // the agent's toolbox refused it before asking (a path outside the workspace, a
               // file that does not exist...): `text` says why, `error_code` its code
    kFailed,   // no answer: the session ended, or the agent never ran it; `text` says why
  };
  Kind kind = Kind::kFailed;
  bool ok = false;
  std::string error_code;
  std::string text;
  std::string rule;      // kDenied
  std::string location;  // kDenied
};
class CallSource {
 public:
  virtual ~CallSource() = default;
  // The agent is ready for work: `ready` runs once, on the io thread, with the next calls (at
  // least one), or with none when the client has ended the session. Not called again before
  // `ready` ran.
  virtual void Next(std::function<void(std::vector<ServedCall>)> ready) = 0;
  // The answer to a call handed out by Next (exactly once per call).
  virtual void Answer(const std::string& call_id, CallAnswer answer) = 0;
  // The session is ending: a pending Next is abandoned (its `ready` may not run).
  virtual void Cancel() = 0;
};

// The parts the broker uses but does not own (all must outlive the Broker). `approver` may be null
// (= headless).
struct BrokerServices {
  AuditLog* audit = nullptr;
  const Redactor* redactor = nullptr;
  Approver* approver = nullptr;
  ApprovalBook* approvals = nullptr;
  model::ModelProvider* model = nullptr;
  // A served session (BrokerConfig::serve): where the calls come from; `model` is then unused.
  CallSource* calls = nullptr;
};

struct BrokerOutcome {
  enum class Status { kRunning, kFinished, kFailed, kCancelled, kNeedsApproval };
  Status status = Status::kRunning;
  std::string reason;  // for kFailed/kCancelled: "model-turn budget (40) reached", ...
  // kFailed because the agent's end of the connection went away (end of file, a read error, a
  // half frame), not by a decision of the broker: the agent died or was killed. The session's
  // owner may learn why later (a cancel signal that reached the agent first).
  bool agent_gone = false;
  std::optional<protocol::Finish> finish;  // what the agent said when it finished
  BudgetUsage used;
  std::uint64_t protocol_errors = 0;
  std::uint64_t denials = 0;
  std::uint64_t approvals_asked = 0;
  std::string model_provider;
  std::string model_name;
  // kNeedsApproval: the action that would have asked (tool, exact action, digest, rule).
  std::optional<ApprovalRequest> needs_approval;
};
std::string_view BrokerStatusName(BrokerOutcome::Status status);  // "running", "finished", ...
// The exit status of a command whose session ended so (cagent(1), EXIT STATUS): finished 0,
// cancelled and needs-approval their own, anything else a failed run.
ExitCode BrokerExitCode(BrokerOutcome::Status status);

// What the operator's display is told (progress line, approvals waiting...).
struct BrokerEvent {
  std::string kind;  // "progress", "model_call", "model_result", "tool_request", "decision",
                     // "tool_result", "approval", "finish", "shutdown"
  std::string text;  // one line
  // The counts as of this event (turns, tokens, tool calls, elapsed): the broker's own, by
  // reference, valid while the callback runs (copy what is kept; a stored event must not read it).
  const BudgetUsage& used;
};

class Broker {
 public:
  Broker(boost::asio::io_context& io, BrokerConfig config, BrokerServices services);
  ~Broker();
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Takes the broker's end of the socketpair (made non-blocking here) and starts reading; starts
  // the wall-time timer.
  void Start(UniqueFd socket);
  // Ends the session from outside (cancel, agent process exited, sandbox torn down): if the peer
  // is connected, sends shutdown{status, reason}; completes pending approvals and model calls;
  // closes the socket. Calls on_end once (also when the session ends by itself).
  void Stop(BrokerOutcome::Status status, std::string reason);

  // A served session: the client cancelled call `call_id`. Running, the agent is told to stop it
  // (cancel: the command's process group is killed); not asked about yet, it will be denied (rule
  // "cancelled"); waiting for an approval, the approval is withdrawn. Its answer still comes
  // through CallSource::Answer. Unknown or answered ids are ignored.
  void CancelCall(const std::string& call_id, const std::string& reason);

  void SetOnEnd(std::function<void(const BrokerOutcome&)> on_end);
  void SetOnEvent(std::function<void(const BrokerEvent&)> on_event);

  [[nodiscard]] const BrokerOutcome& outcome() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cagent::launcher::broker
