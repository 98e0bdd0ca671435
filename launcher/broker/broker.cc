#include "launcher/broker/broker.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cstdint>
#include <deque>
#include <set>
#include <utility>
#include <vector>

#include "common/json_text.h"
#include "common/sha256.h"
#include "common/tool_schemas.h"
#include "launcher/broker/adaptive_poll.h"
#include "launcher/broker/budgets.h"
#include "launcher/broker/denial.h"
#include "launcher/broker/loop_detector.h"
#include "launcher/broker/model_turns.h"
#include "launcher/broker/tool_mapping.h"
#include "launcher/broker/workspace_state.h"
#include "policy/language/coherence.h"
#include "policy/language/dump.h"
#include "policy/match/shell.h"

// Audit events are written with designated initializers, leaving the fields an event does not
// use at their defaults; GCC 12 warns about exactly that idiom (GCC 13 no longer does).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace cagent::launcher::broker {

namespace asio = boost::asio;
using nlohmann::json;
using protocol::ErrorCode;
using protocol::Kind;

namespace {

// Reads are taken in chunks of this size; the decoder holds at most one partial frame beyond it.
constexpr std::size_t kReadChunk = 64 * 1024;
// A peer whose unread replies exceed this is dropped (only reachable through very large replies,
// since reading pauses far below it).
constexpr std::size_t kMaxQueuedBytes = 64U << 20;
// Allowed tool calls whose tool_result has not arrived yet (a model may call several tools in one
// turn; a peer asking for thousands without reporting any is not an agent).
constexpr std::size_t kMaxOutstandingTools = 256;
// Paths one tool_request may name for the broker to decide on.
constexpr std::size_t kMaxRequestPaths = 4096;
// After the session ends, how long queued replies (the shutdown notice) may take to drain before
// the socket is closed regardless.
constexpr std::chrono::milliseconds kCloseGrace{500};
// Reads handled in one go on the io thread (the first from epoll, the others found by polling)
// before the read goes back through the io_context, so that other work queued on it gets a turn
// however fast the agent sends.
constexpr int kMaxInlineReads = 64;
// Replies gathered into one sendmsg at most.
constexpr std::size_t kMaxGather = 64;

// Whether this process may run on more than one CPU: polling for a peer that can only run when
// the poller stops is pure waste.
bool SeveralCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
  return CPU_COUNT(&set) > 1;
}

std::string ShortText(std::string_view s, std::size_t max = 200) {
  if (s.size() <= max) return std::string(s);
  return std::string(s.substr(0, max)) + "...";
}

// "a, b, c" with at most `max` items, then "and N more".
std::string JoinSome(const std::vector<std::string>& items, std::size_t max = 10) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < max; ++i) {
    if (i > 0) out += ", ";
    out += items[i];
  }
  if (items.size() > max) out += ", and " + std::to_string(items.size() - max) + " more";
  return out;
}

// A few lines the agent's system prompt quotes: what this run may and may not do, and what it
// means for the agent's work (the network it has, the commands it may run, the environment the
// profile sets, how its change is verified), so that it does not learn them by being refused.
std::string PolicySummary(const policy::Policy& p) {
  std::string out;
  if (p.egress.value) {
    std::vector<std::string> hosts;
    for (const policy::HostRule& r : p.hosts) {
      if (r.verdict == policy::Verdict::kAllow) hosts.push_back(r.text);
    }
    out += "network: only through cagent's proxy (HTTP_PROXY/HTTPS_PROXY are set), to: " +
           (hosts.empty() ? std::string("no host") : JoinSome(hosts, 16)) +
           "; every other host is refused at once\n";
  } else if (p.network.value == policy::NetworkMode::kNone) {
    out +=
        "network: none (no network access of any kind; name lookups fail at once): package "
        "installs, downloads and git fetch cannot work, so use what is installed\n";
  } else {
    out +=
        "network: loopback only (servers you start inside the sandbox; no other host, name "
        "lookups of other hosts fail at once): package installs, downloads and git fetch cannot "
        "work, so use what is installed\n";
  }
  out +=
      std::string("workspace: ") + (p.workspace_writable.value ? "read-write" : "read-only") + "\n";
  std::vector<std::string> writable;
  for (const policy::MountRule& m : p.mounts) {
    if (m.mode == policy::MountMode::kReadWrite) writable.push_back(m.path.Text());
  }
  if (!writable.empty()) out += "also writable: " + JoinSome(writable) + "\n";
  std::vector<std::string> denied;
  std::vector<std::string> asks;
  for (const policy::PathRule& r : p.path_rules) {
    std::string text = (r.access == policy::Access::kWrite ? "write " : "") + r.text;
    if (r.verdict == policy::Verdict::kDeny) {
      denied.push_back(std::move(text));
    } else if (r.verdict == policy::Verdict::kAsk) {
      asks.push_back(std::move(text));
    }
  }
  if (!denied.empty()) out += "denied paths: " + JoinSome(denied) + "\n";
  // Commands: under `default allow` the refusals are the news; under an allow-list, the list.
  std::vector<std::string> command_allows;
  std::vector<std::string> command_denies;
  // Each rule as a short pattern (a long list of alternatives is cut): the agent reads the reason
  // when a refusal happens; here it needs to know what kind of command is refused.
  const auto shorter = [](const std::string& text) {
    constexpr std::size_t kMax = 48;
    return text.size() <= kMax ? text : text.substr(0, kMax - 3) + "...";
  };
  for (const policy::CommandRule& r : p.commands) {
    if (r.verdict == policy::Verdict::kAllow) command_allows.push_back(shorter(r.text));
    if (r.verdict == policy::Verdict::kDeny) command_denies.push_back(shorter(r.text));
  }
  switch (p.command_default.value) {
    case policy::Verdict::kAllow:
      out += "commands: any program may run (the sandbox confines it), shell syntax included";
      if (!command_denies.empty()) out += ", except: " + JoinSome(command_denies, 32);
      out += "\n";
      break;
    case policy::Verdict::kAsk:
      out += "commands: programs not named below need a person's approval; allowed: " +
             JoinSome(command_allows, 24) + "\n";
      break;
    case policy::Verdict::kDeny:
      out += "commands: only these may run: " + JoinSome(command_allows, 24) + "\n";
      break;
  }
  if (!p.env_set.empty()) {
    std::vector<std::string> env;
    for (const policy::EnvSetting& e : p.env_set) env.push_back(e.name + "=" + e.value);
    out += "environment set by the profile: " + JoinSome(env, 16) + "\n";
  }
  if (!p.verify.empty()) {
    std::vector<std::string> verify;
    for (const policy::VerifyCommand& v : p.verify) verify.push_back("`" + v.command + "`");
    out += "verification: after you finish, cagent runs " + JoinSome(verify, 8) +
           " on a fresh checkout with your change applied; make them pass (you may run them "
           "yourself)\n";
  }
  for (const policy::ToolRule& r : p.tools) {
    if (r.verdict == policy::Verdict::kAsk) asks.push_back(r.text);
  }
  for (const policy::CommandRule& r : p.commands) {
    if (r.verdict == policy::Verdict::kAsk) asks.push_back(r.text);
  }
  if (!asks.empty()) out += "needs a person's approval: " + JoinSome(asks) + "\n";
  out += "approvals: " + std::string(policy::ApprovalName(p.approval.value));
  return out;
}

std::uint64_t LimitOrZero(const policy::Policy& p, policy::Limit l) {
  const policy::LimitValue& v = p.limit(l);
  return v.bounded() ? v.value : 0;
}

std::uint32_t ReadHeader(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (std::uint32_t{u[0]} << 24) | (std::uint32_t{u[1]} << 16) | (std::uint32_t{u[2]} << 8) |
         std::uint32_t{u[3]};
}

}  // namespace

std::string_view BrokerStatusName(BrokerOutcome::Status status) {
  switch (status) {
    case BrokerOutcome::Status::kRunning:
      return "running";
    case BrokerOutcome::Status::kFinished:
      return "finished";
    case BrokerOutcome::Status::kFailed:
      return "failed";
    case BrokerOutcome::Status::kCancelled:
      return "cancelled";
    case BrokerOutcome::Status::kNeedsApproval:
      return "needs-approval";
  }
  return "failed";
}

ExitCode BrokerExitCode(BrokerOutcome::Status status) {
  switch (status) {
    case BrokerOutcome::Status::kFinished:
      return ExitCode::kOk;
    case BrokerOutcome::Status::kCancelled:
      return ExitCode::kCancelled;
    case BrokerOutcome::Status::kNeedsApproval:
      return ExitCode::kNeedsApproval;
    case BrokerOutcome::Status::kRunning:
    case BrokerOutcome::Status::kFailed:
      break;
  }
  return ExitCode::kRunFailed;
}

class Broker::Impl {
 public:
  Impl(asio::io_context& io, BrokerConfig config, BrokerServices services)
      : io_(io),
        config_(std::move(config)),
        services_(services),
        engine_(*config_.policy, config_.bindings),
        enabled_tools_(EnabledTools(*config_.policy)),
        tool_schemas_(ToolSchemasFor(enabled_tools_)),
        tool_schemas_bytes_(JsonText(tool_schemas_).size()),
        budget_(config_.budgets, config_.model_prices),
        loop_(config_.loop),
        decoder_(config_.max_frame_bytes),
        poll_(SeveralCpus() ? config_.max_poll : std::chrono::microseconds(0)),
        wall_timer_(io),
        close_timer_(io),
        socket_(io) {
    if (services_.model != nullptr) {
      const protocol::ModelInfo info = services_.model->Info();
      outcome_.model_provider = info.provider;
      outcome_.model_name = info.name;
    }
    if (config_.serve) {
      outcome_.model_provider = "mcp";
      outcome_.model_name = config_.client_name;
    }
  }

  ~Impl() {
    // Handlers still queued on the io_context check `alive_` first and do nothing.
    alive_.reset();
    if (model_call_id_ && services_.model != nullptr) services_.model->Cancel();
    if (approval_id_ && services_.approver != nullptr) services_.approver->Cancel();
    if (next_call_id_ && services_.calls != nullptr) services_.calls->Cancel();
    boost::system::error_code ec;
    socket_.close(ec);
  }

  void Start(UniqueFd fd);
  void Stop(BrokerOutcome::Status status, std::string reason) {
    End(status, std::move(reason), /*notify_peer=*/true);
  }

  // serve: see Broker::CancelCall.
  void CancelCall(const std::string& call_id, const std::string& reason);

  std::function<void(const BrokerOutcome&)> on_end_;
  std::function<void(const BrokerEvent&)> on_event_;
  BrokerOutcome outcome_;

  // outcome_ as Broker::outcome() shows it: the counts brought up to date while running (they are
  // copied in when read and when the session ends, not per message); frozen once ended.
  const BrokerOutcome& Outcome() {
    if (!ended_) SyncUsage();
    return outcome_;
  }

 private:
  struct Outstanding {
    std::string tool;
    policy::Tool kind = policy::Tool::kReadFile;
    std::string call_id;     // the model's call this request executes
    std::uint64_t turn = 0;  // the model turn that made it
  };
  struct PendingApproval {
    ApprovalRequest request;
    MappedTool call;
    policy::Decision decision;
    std::string location;
    std::string call_id;
    std::uint64_t turn = 0;
  };

  // ---- transport ----
  void StartRead();
  void OnRead(const boost::system::error_code& ec, std::size_t n);
  void ReadFailed(const boost::system::error_code& ec);
  // Tells poll_ how long the io thread waited for the bytes OnRead got, and whether it was
  // preempted since the previous block.
  void NoteBlocked();
  // Polls the socket for up to poll_.window() with non-blocking reads: the bytes that arrived in
  // read_buf_ (then or an end of file or error in `ec`), or 0 with `ec` clear when none did.
  std::size_t PollSocket(boost::system::error_code& ec);
  // Handles the bytes of one read; the replies to its frames are gathered and written together
  // when all are handled (each request's audit entry is written before its reply is queued).
  void OnBytes(std::size_t n);
  void HandleBytes(std::size_t n);
  void OnEof();
  void Send(Kind kind, std::uint64_t id, protocol::Body body);
  // Writes the queued replies on this thread, as far as the socket takes them (one sendmsg for up
  // to kMaxGather of them); what it does not take is written by DoWrite, asynchronously.
  void Flush();
  void DoWrite();
  void WriteFailed(const boost::system::error_code& ec);
  // `n` bytes from the front of queue_ were written; reading paused for back-pressure resumes once
  // the queue is down to a quarter of BrokerConfig::pause_reading_above.
  void Written(std::size_t n);
  void End(BrokerOutcome::Status status, std::string reason, bool notify_peer);
  // End(kFailed) because the agent's end of the connection went away (BrokerOutcome::agent_gone).
  void AgentGone(std::string reason);
  void Close();

  // ---- requests ----
  void HandlePayload(const std::string& payload);
  void OnHello(std::uint64_t id, const protocol::Hello& hello);
  // `digest`: SHA-256 of the payload as the agent sent it (before redaction), for the audit log.
  void OnModelCall(std::uint64_t id, protocol::ModelCall call, const std::string& digest);
  void OnModelDone(std::uint64_t id, std::uint64_t turn, std::uint64_t max_tokens,
                   model::ModelOutcome outcome);
  void OnToolRequest(std::uint64_t id, const protocol::ToolRequest& request);
  // The refusals of OnToolRequest that come before the policy is asked; each answers the request
  // and returns true when it refused it.
  bool RefuseOverBudget(std::uint64_t id, const protocol::ToolRequest& request,
                        const std::string& args_digest);
  bool RefuseBadArguments(std::uint64_t id, const protocol::ToolRequest& request,
                          const MappedTool& call);
  bool RefuseLoop(std::uint64_t id, const protocol::ToolRequest& request,
                  const std::string& args_text, const std::string& args_digest,
                  const MappedTool& call);
  void OnToolResult(std::uint64_t id, const protocol::ToolResult& result);
  void OnProgress(std::uint64_t id, const protocol::Progress& progress);
  void OnFinish(std::uint64_t id, const protocol::Finish& finish);
  // ---- a served session (cagent mcp serve) ----
  void OnNextCall(std::uint64_t id);
  void OnCalls(std::uint64_t id, std::vector<ServedCall> calls);
  // The agent's own refusal of a served call (tool_result with request 0 and a call_id).
  void OnAgentRefusal(std::uint64_t id, const protocol::ToolResult& result);
  // Answers served call `call_id` once (nothing when it is not one waiting for its answer).
  void AnswerServed(const std::string& call_id, CallAnswer answer);

  // `request`: for the call's digest (CallDigest), which only an ask needs.
  void AskApproval(std::uint64_t id, const protocol::ToolRequest& request,
                   const std::string& args_text, const MappedTool& call,
                   const policy::Decision& decision, const std::string& location);
  void OnApproval(std::uint64_t id, const ApprovalOutcome& outcome);
  void SendDecision(std::uint64_t id, const MappedTool& call, protocol::Decision decision,
                    const std::string& audit_note = {});
  // The call being decided: its request's call id and model turn (set by OnToolRequest once the
  // request is bound, for the decision's audit entry and the outstanding call).
  struct Current {
    std::string call_id;
    std::uint64_t turn = 0;
    // The request's paths as the agent sent them, for its decision's entry; set only while
    // OnToolRequest runs (the decision entry records the request too).
    const std::vector<std::string>* paths = nullptr;
    // Its arguments as the agent sent them, for a transcript (AuditEvent::transcript); same
    // lifetime as `paths`.
    const json* args = nullptr;
  };
  // For kHeadless, `why` names the setting that denied the ask (AskDeniedReason): it becomes the
  // decision's reason, so the audit log says what decided instead of "the profile asks".
  void Deny(std::uint64_t id, const MappedTool& call, const policy::Decision& decision,
            const std::string& location, DenialCause cause, std::string_view why = {});
  // A refusal before the request maps to a policy question (not the model's call, not a known
  // tool): audited as a decision with `rule`, answered with `message` for the model.
  void DenyUnmapped(std::uint64_t id, const protocol::ToolRequest& request,
                    const std::string& args_digest, const std::string& rule,
                    const std::string& reason, std::string message);
  policy::Decision Decide(const MappedTool& call, const std::vector<std::string>& paths) const;
  std::string NarrowerPattern(const MappedTool& call, const policy::Decision& decision) const;
  // The workspace state digest loop detection compares (see LoopDetector): cached until a tool
  // that can write reports its result, recomputed with `fresh` (when a repeat is suspected).
  const std::string& WorkspaceStateDigest(bool fresh);

  // ---- bookkeeping ----
  void ProtocolError(ErrorCode code, const std::string& message, std::uint64_t id);
  void BudgetExhausted(std::uint64_t id, const std::string& reason);
  void Audit(AuditEvent event);
  // Whether entries carry a transcript (AuditEvent::transcript): only when the log is observed.
  [[nodiscard]] bool Transcribing() const;
  void Emit(std::string kind, std::string text);
  // The budget's elapsed time brought up to now; SyncUsage also copies the counts into outcome_
  // (at the end of the session and when outcome() is read, not per message).
  void SyncElapsed();
  void SyncUsage();
  std::string Where(const policy::Location& loc) const {
    return loc.valid() ? config_.policy->Where(loc) : std::string();
  }

  asio::io_context& io_;
  BrokerConfig config_;
  BrokerServices services_;
  policy::Engine engine_;
  std::vector<std::string> enabled_tools_;
  nlohmann::json tool_schemas_;         // what the provider is offered: the enabled tools + finish
  std::size_t tool_schemas_bytes_ = 0;  // their size as JSON text (for the input estimate)
  ModelTurns turns_;
  Current current_;
  BudgetCounter budget_;
  LoopDetector loop_;
  std::optional<std::string> state_;  // the cached workspace state digest; nullopt = stale
  std::uint64_t legacy_changes_ = 0;  // LoopLimits::trust_agent_results only
  bool state_reported_ = false;       // a truncated or failed walk was audited once
  protocol::FrameDecoder decoder_;
  // Stream offsets: bytes fed to the decoder and bytes it has handed out as frames (to locate the
  // header that failed the decoder).
  std::uint64_t fed_ = 0;
  std::uint64_t consumed_ = 0;

  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  std::chrono::steady_clock::time_point started_at_ = std::chrono::steady_clock::now();

  bool started_ = false;
  bool hello_done_ = false;
  bool ended_ = false;
  bool closed_ = false;
  bool on_end_posted_ = false;
  bool reading_ = false;
  bool paused_ = false;
  bool writing_ = false;
  std::uint64_t last_id_ = 0;
  std::optional<std::uint64_t> model_call_id_;
  std::optional<std::uint64_t> approval_id_;
  std::optional<PendingApproval> pending_approval_;
  std::map<std::uint64_t, Outstanding> outstanding_;
  // serve: the calls handed to the agent and not answered yet; those the client cancelled before
  // the agent asked about them; the pending next_call.
  std::set<std::string> served_;
  std::set<std::string> cancelled_;
  std::optional<std::uint64_t> next_call_id_;
  std::uint64_t served_turns_ = 0;

  std::deque<std::string> queue_;
  std::size_t queued_bytes_ = 0;            // not yet written, of queue_
  std::size_t front_written_ = 0;           // bytes of queue_.front() already written
  bool corked_ = false;                     // OnBytes is gathering replies: Send does not write
  std::vector<asio::const_buffer> gather_;  // Flush's, kept for its capacity
  std::array<char, kReadChunk> read_buf_{};

  AdaptivePoll poll_;
  // When the io thread last started to poll or to wait for the agent's bytes.
  std::chrono::steady_clock::time_point poll_began_ = std::chrono::steady_clock::now();
  // The io thread's involuntary context switches at the previous block; -1 = not read yet.
  std::int64_t involuntary_switches_ = -1;

  asio::steady_timer wall_timer_;
  asio::steady_timer close_timer_;
  // Declared last so it is destroyed first: closing it cancels reads and writes into the buffers
  // above before those go away.
  asio::local::stream_protocol::socket socket_;
};

// ---------------------------------------------------------------------------------------------
// Transport

void Broker::Impl::Start(UniqueFd fd) {
  if (started_ || ended_) return;
  started_ = true;
  started_at_ = std::chrono::steady_clock::now();
  const int raw = fd.Release();
  boost::system::error_code ec;
  // A socket, not a plain descriptor: Asio sends with MSG_NOSIGNAL, so a peer that went away is
  // an EPIPE error here, never a SIGPIPE that kills cagent.
  socket_.assign(asio::local::stream_protocol(), raw, ec);
  if (ec) {
    ::close(raw);
    End(BrokerOutcome::Status::kFailed, "cannot use the agent's socket: " + ec.message(), false);
    return;
  }
  socket_.non_blocking(true, ec);
  if (ec) {
    End(BrokerOutcome::Status::kFailed,
        "cannot make the agent's socket non-blocking: " + ec.message(), false);
    return;
  }
  if (config_.budgets.wall_time) {
    wall_timer_.expires_after(*config_.budgets.wall_time);
    std::weak_ptr<int> alive = alive_;
    wall_timer_.async_wait([this, alive](const boost::system::error_code& wait_ec) {
      if (alive.expired() || wait_ec || ended_) return;
      const std::string reason = budget_.WallTimeReason();
      Audit(audit::Budget({.budget = "wall-time", .reason = reason}));
      End(BrokerOutcome::Status::kFailed, reason, true);
    });
  }
  StartRead();
}

void Broker::Impl::StartRead() {
  if (reading_ || paused_ || ended_ || closed_) return;
  reading_ = true;
  std::weak_ptr<int> alive = alive_;
  socket_.async_read_some(asio::buffer(read_buf_),
                          [this, alive](const boost::system::error_code& ec, std::size_t n) {
                            if (alive.expired()) return;
                            OnRead(ec, n);
                          });
}

void Broker::Impl::OnRead(const boost::system::error_code& ec, std::size_t n) {
  reading_ = false;
  if (closed_) return;
  if (ec) {
    ReadFailed(ec);
    return;
  }
  if (ended_) return;  // the session is over; what arrives now is not acted on
  NoteBlocked();
  std::size_t got = n;
  for (int reads = 1;; ++reads) {
    OnBytes(got);
    if (queued_bytes_ > config_.pause_reading_above) paused_ = true;
    // reading_: an asynchronous read was started meanwhile (reading resumed after back-pressure);
    // it owns the socket's next bytes, so polling here could handle later bytes before them.
    if (ended_ || closed_ || paused_ || reading_ || reads >= kMaxInlineReads) break;
    // The agent's next message usually follows at once: read it on this thread if it comes
    // within the poll window, instead of going to sleep in epoll and being woken for it.
    boost::system::error_code poll_ec;
    got = PollSocket(poll_ec);
    if (poll_ec) {
      ReadFailed(poll_ec);
      return;
    }
    if (got == 0) break;
  }
  StartRead();
}

void Broker::Impl::ReadFailed(const boost::system::error_code& ec) {
  if (ec == asio::error::eof) {
    OnEof();
  } else if (!ended_) {
    AgentGone("reading from the agent failed: " + ec.message());
  }
}

void Broker::Impl::NoteBlocked() {
  const auto waited = std::chrono::steady_clock::now() - poll_began_;
  bool preempted = false;
  if (poll_.UsesPreemption()) {
    rusage usage{};
    if (getrusage(RUSAGE_THREAD, &usage) == 0) {
      preempted = involuntary_switches_ >= 0 && usage.ru_nivcsw != involuntary_switches_;
      involuntary_switches_ = usage.ru_nivcsw;
    }
  } else {
    involuntary_switches_ = -1;  // not counted meanwhile: the next count starts afresh
  }
  poll_.Blocked(waited, preempted);
}

std::size_t Broker::Impl::PollSocket(boost::system::error_code& ec) {
  const AdaptivePoll::Duration window = poll_.window();
  poll_began_ = std::chrono::steady_clock::now();
  if (window <= AdaptivePoll::Duration{0}) return 0;
  do {
    // The socket is non-blocking: would_block when nothing is there yet.
    const std::size_t n = socket_.receive(asio::buffer(read_buf_), 0, ec);
    if (ec != asio::error::would_block && ec != asio::error::try_again) {
      if (!ec) poll_.Hit();
      return n;
    }
  } while (std::chrono::steady_clock::now() - poll_began_ < window);
  ec.clear();
  return 0;
}

void Broker::Impl::OnBytes(std::size_t n) {
  corked_ = true;
  HandleBytes(n);
  corked_ = false;
  Flush();
}

void Broker::Impl::HandleBytes(std::size_t n) {
  const std::string_view chunk(read_buf_.data(), n);
  const std::uint64_t chunk_start = fed_;
  fed_ += n;
  const Status fed = decoder_.Feed(chunk);
  while (!ended_) {
    std::optional<std::string> payload = decoder_.Next();
    if (!payload) break;
    consumed_ += protocol::kHeaderBytes + payload->size();
    HandlePayload(*payload);
  }
  if (ended_ || !decoder_.failed()) return;

  // The stream cannot be resynchronised after a bad header: reply, then close.
  std::uint32_t announced = 0;
  bool known = false;
  if (!fed.ok()) {
    // The first pending header failed when fed; it starts at `consumed_`, in this chunk or (when
    // it straddles reads) partly in the previous one — the decoder's code says which problem.
    known = fed.error().code == Error::Code::kMalformed;
  } else if (consumed_ >= chunk_start && consumed_ + protocol::kHeaderBytes <= fed_) {
    announced = ReadHeader(chunk.data() + (consumed_ - chunk_start));
    known = announced == 0;
  }
  const bool zero = known && announced == 0;
  const std::string message =
      zero ? std::string("zero-length frame")
           : (!fed.ok() ? fed.error().detail
                        : "frame of " + std::to_string(announced) + " bytes is above the " +
                              std::to_string(config_.max_frame_bytes) + "-byte limit");
  ProtocolError(zero ? ErrorCode::kMalformed : ErrorCode::kTooLarge, message, 0);
  if (!ended_) {
    End(BrokerOutcome::Status::kFailed,
        "agent protocol violation: " + message + " (the stream cannot be read further)", true);
  }
}

void Broker::Impl::OnEof() {
  if (ended_) {
    Close();
    return;
  }
  if (decoder_.Pending() > 0) {
    // A half frame: no reply is possible any more, but it is recorded and counted.
    const std::string message = "the connection ended inside a frame (" +
                                std::to_string(decoder_.Pending()) +
                                " bytes of an incomplete frame)";
    ++outcome_.protocol_errors;
    Audit(audit::ProtocolError({.id = 0, .code = "malformed", .message = message}));
    AgentGone("agent disconnected mid-frame: " + message);
    return;
  }
  AgentGone("the agent closed the connection without finishing");
}

void Broker::Impl::Send(Kind kind, std::uint64_t id, protocol::Body body) {
  if (closed_ || !started_) return;
  Result<std::string> frame = protocol::EncodeMessage(protocol::Make(kind, id, std::move(body)));
  if (!frame.ok()) {
    // Only a reply above the frame limit fails to encode (e.g. a huge model response).
    if (kind == Kind::kError) return;
    Send(Kind::kError, id,
         protocol::ErrorReply{
             kind == Kind::kModelResult ? ErrorCode::kProviderError : ErrorCode::kInternal,
             "the reply to request " + std::to_string(id) +
                 " is too large to send: " + frame.error().detail});
    return;
  }
  if (queued_bytes_ + frame->size() > kMaxQueuedBytes) {
    // The peer does not read its replies; nothing more can be told to it.
    End(BrokerOutcome::Status::kFailed,
        "the agent does not read its replies (more than " + std::to_string(kMaxQueuedBytes >> 20) +
            " MiB queued)",
        false);
    Close();
    return;
  }
  queued_bytes_ += frame->size();
  queue_.push_back(std::move(*frame));
  if (!corked_) Flush();
}

void Broker::Impl::Flush() {
  if (closed_ || writing_ || queue_.empty()) return;
  gather_.clear();
  for (const std::string& frame : queue_) {
    if (gather_.size() == kMaxGather) break;
    gather_.push_back(asio::buffer(frame) + (gather_.empty() ? front_written_ : 0));
  }
  boost::system::error_code ec;
  // Non-blocking: would_block (nothing written) when the agent's receive buffer is full.
  const std::size_t n = socket_.send(gather_, 0, ec);
  if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
    WriteFailed(ec);
    return;
  }
  Written(n);
  if (!queue_.empty()) DoWrite();
}

void Broker::Impl::Written(std::size_t n) {
  queued_bytes_ -= n;
  while (n > 0) {
    const std::size_t left = queue_.front().size() - front_written_;
    if (n < left) {
      front_written_ += n;
      break;
    }
    n -= left;
    queue_.pop_front();
    front_written_ = 0;
  }
  if (paused_ && queued_bytes_ <= config_.pause_reading_above / 4) {
    paused_ = false;
    StartRead();
  }
}

void Broker::Impl::WriteFailed(const boost::system::error_code& ec) {
  End(BrokerOutcome::Status::kFailed, "writing to the agent failed: " + ec.message(), false);
  Close();
}

void Broker::Impl::DoWrite() {
  if (closed_ || queue_.empty()) return;
  writing_ = true;
  std::weak_ptr<int> alive = alive_;
  asio::async_write(socket_, asio::buffer(queue_.front()) + front_written_,
                    [this, alive](const boost::system::error_code& ec, std::size_t n) {
                      if (alive.expired()) return;
                      writing_ = false;
                      if (closed_) return;
                      if (ec) {
                        WriteFailed(ec);
                        return;
                      }
                      Written(n);
                      if (!queue_.empty()) {
                        Flush();
                      } else if (ended_) {
                        Close();
                      }
                    });
}

void Broker::Impl::AgentGone(std::string reason) {
  if (ended_) return;
  outcome_.agent_gone = true;
  End(BrokerOutcome::Status::kFailed, std::move(reason), false);
}

void Broker::Impl::End(BrokerOutcome::Status status, std::string reason, bool notify_peer) {
  if (ended_) return;
  ended_ = true;
  outcome_.status = status;
  outcome_.reason = std::move(reason);
  SyncUsage();
  wall_timer_.cancel();
  // Pending work completes as cancelled; their callbacks see ended_ and do nothing.
  if (model_call_id_) {
    model_call_id_.reset();
    if (services_.model != nullptr) services_.model->Cancel();
  }
  if (approval_id_) {
    approval_id_.reset();
    pending_approval_.reset();
    if (services_.approver != nullptr) services_.approver->Cancel();
  }
  if (next_call_id_) {
    next_call_id_.reset();
    if (services_.calls != nullptr) services_.calls->Cancel();
  }
  while (!served_.empty()) {
    AnswerServed(*served_.begin(),
                 CallAnswer{.kind = CallAnswer::Kind::kFailed,
                            .text = "the session ended before this call was answered: " +
                                    (outcome_.reason.empty() ? std::string(BrokerStatusName(status))
                                                             : outcome_.reason)});
  }
  Audit(audit::Shutdown(
      {.status = std::string(BrokerStatusName(status)), .reason = outcome_.reason}));
  Emit("shutdown", std::string(BrokerStatusName(status)) +
                       (outcome_.reason.empty() ? "" : ": " + outcome_.reason));
  // A served agent has no finish of its own to send: it is told the session is over.
  if (notify_peer && (status != BrokerOutcome::Status::kFinished || config_.serve)) {
    Send(Kind::kShutdown, 0,
         protocol::Shutdown{std::string(BrokerStatusName(status)), outcome_.reason});
  }
  // Replies gathered while this read's frames were handled go out now, the notice last.
  Flush();
  if (!writing_ || !started_) {
    Close();
    return;
  }
  // Let the queued replies (the shutdown notice) drain, but not wait on a peer that never reads.
  close_timer_.expires_after(kCloseGrace);
  std::weak_ptr<int> alive = alive_;
  close_timer_.async_wait([this, alive](const boost::system::error_code&) {
    if (alive.expired()) return;
    Close();
  });
}

void Broker::Impl::Close() {
  if (closed_) return;
  closed_ = true;
  close_timer_.cancel();
  wall_timer_.cancel();
  boost::system::error_code ec;
  socket_.shutdown(asio::socket_base::shutdown_both, ec);
  socket_.close(ec);
  queue_.clear();
  queued_bytes_ = 0;
  front_written_ = 0;
  if (!ended_) AgentGone("the connection to the agent was closed");
  if (on_end_posted_) return;
  on_end_posted_ = true;
  // Posted, so the owner may destroy the Broker from on_end without pulling it out from under
  // the handler that ended the session.
  std::weak_ptr<int> alive = alive_;
  asio::post(io_, [this, alive] {
    if (alive.expired()) return;
    if (on_end_) on_end_(outcome_);
  });
}

// ---------------------------------------------------------------------------------------------
// Requests

void Broker::Impl::HandlePayload(const std::string& payload) {
  auto decoded = protocol::Decode(payload, /*from_agent=*/true);
  if (auto* error = std::get_if<protocol::DecodeError>(&decoded)) {
    ProtocolError(error->code, error->message, error->id.value_or(0));
    return;
  }
  protocol::Message& m = std::get<protocol::Message>(decoded);
  const std::uint64_t id = m.header.id;
  const Kind kind = m.header.kind;
  if (!hello_done_ && kind != Kind::kHello) {
    ProtocolError(ErrorCode::kOutOfOrder,
                  "hello must come first; got " + std::string(protocol::KindName(kind)), id);
    return;
  }
  if (id <= last_id_) {
    ProtocolError(ErrorCode::kDuplicateId,
                  "request id " + std::to_string(id) + " is not above the previous id " +
                      std::to_string(last_id_) + " (ids must strictly increase)",
                  id);
    return;
  }
  last_id_ = id;
  switch (kind) {
    case Kind::kHello:
      if (hello_done_) {
        ProtocolError(ErrorCode::kOutOfOrder, "hello was already received; send it only once", id);
        return;
      }
      OnHello(id, std::get<protocol::Hello>(m.body));
      return;
    case Kind::kModelCall:
      OnModelCall(id, std::move(std::get<protocol::ModelCall>(m.body)), Sha256Hex(payload));
      return;
    case Kind::kToolRequest:
      OnToolRequest(id, std::get<protocol::ToolRequest>(m.body));
      return;
    case Kind::kToolResult:
      OnToolResult(id, std::get<protocol::ToolResult>(m.body));
      return;
    case Kind::kProgress:
      OnProgress(id, std::get<protocol::Progress>(m.body));
      return;
    case Kind::kFinish:
      OnFinish(id, std::get<protocol::Finish>(m.body));
      return;
    case Kind::kNextCall:
      OnNextCall(id);
      return;
    default:
      // Decode(from_agent=true) admits only the agent's kinds.
      ProtocolError(ErrorCode::kUnknownType, "not a request the agent may send", id);
      return;
  }
}

void Broker::Impl::OnHello(std::uint64_t id, const protocol::Hello& hello) {
  Audit(audit::Hello({.id = id, .agent = ShortText(hello.agent), .protocols = hello.protocols}));
  if (std::find(hello.protocols.begin(), hello.protocols.end(), protocol::kVersion) ==
      hello.protocols.end()) {
    ProtocolError(ErrorCode::kBadVersion,
                  "the agent speaks none of the protocol versions this broker speaks (" +
                      std::to_string(protocol::kVersion) + ")",
                  id);
    return;
  }
  hello_done_ = true;
  const policy::Policy& p = *config_.policy;
  protocol::Welcome w;
  w.run_id = config_.run_id;
  w.workspace = config_.bindings.workspace;
  w.home = config_.bindings.home;
  w.task = config_.serve ? std::string() : config_.task;
  w.mode = config_.serve ? "serve" : "task";
  w.policy_name = p.name;
  w.policy_digest = config_.policy_digest;
  w.policy_summary = PolicySummary(p);
  w.policy_source = policy::Dump(p);
  w.tools = enabled_tools_;
  if (services_.model != nullptr) w.model = services_.model->Info();
  if (config_.serve) {
    w.model = protocol::ModelInfo{"mcp", ShortText(config_.client_name, 128), 0, 0};
  }
  w.max_turns = config_.budgets.model_turns.value_or(0);
  w.command_timeout_ms = LimitOrZero(p, policy::Limit::kCommandTimeout);
  w.command_output_bytes = LimitOrZero(p, policy::Limit::kCommandOutput);
  Audit(audit::Welcome({.id = id, .tools = w.tools, .max_turns = w.max_turns}));
  Send(Kind::kWelcome, id, std::move(w));
  Emit("progress", "agent connected: " + ShortText(hello.agent, 80));
}

void Broker::Impl::OnModelCall(std::uint64_t id, protocol::ModelCall call,
                               const std::string& digest) {
  if (config_.serve) {
    ProtocolError(ErrorCode::kOutOfOrder,
                  "this is a served session (cagent mcp serve): there is no model; ask for work "
                  "with next_call",
                  id);
    return;
  }
  if (model_call_id_) {
    ProtocolError(ErrorCode::kOutOfOrder,
                  "a model call (request " + std::to_string(*model_call_id_) +
                      ") is still in progress; wait for its result",
                  id);
    return;
  }
  if (auto exhausted = budget_.CheckModelCall()) {
    BudgetExhausted(id, *exhausted);
    return;
  }
  if (services_.model == nullptr) {
    Send(Kind::kError, id,
         protocol::ErrorReply{ErrorCode::kInternal, "this broker has no model provider"});
    return;
  }
  // The conversation may say anything, but its tool calls must be the model's own and its tool
  // results must answer them: the agent cannot put words in the model's mouth as calls.
  if (const Refusal wrong = turns_.CheckConversation(call)) {
    ProtocolError(ErrorCode::kMalformed, "model_call: " + *wrong, id);
    return;
  }
  // The output cap: the model's per-response limit, lowered to what the token budget has left
  // after this call's (estimated) input. A call whose input alone would overrun it is not made.
  const std::uint64_t estimate = EstimateInputTokens(call, tool_schemas_bytes_);
  std::string short_why;
  const std::optional<std::uint64_t> max_tokens =
      budget_.OutputCap(services_.model->Info().max_output_tokens, estimate, &short_why);
  if (!max_tokens) {
    BudgetExhausted(id, short_why);
    return;
  }
  const std::uint64_t turn = budget_.CountModelTurn();

  // What goes to the provider is redacted: secrets the agent read must not leave the machine.
  // Only message content is the agent's, so only message content is redacted (and sent).
  model::ModelRequest request;
  request.tools = tool_schemas_;
  request.max_tokens = *max_tokens;
  std::size_t redacted = 0;
  if (services_.redactor != nullptr) {
    const Redactor& r = *services_.redactor;
    auto text = [&](std::string& t) {
      std::string clean = r.Redact(t);
      if (clean != t) {
        ++redacted;
        t = std::move(clean);
      }
    };
    text(call.system);
    for (protocol::ChatMessage& m : call.messages) {
      text(m.text);
      for (protocol::ToolCall& c : m.tool_calls) redacted += r.RedactJson(c.arguments);
    }
  }
  request.system = std::move(call.system);
  request.messages = std::move(call.messages);
  std::vector<std::string> tool_names;
  for (const json& t : tool_schemas_) tool_names.push_back(t.value("name", ""));
  Audit(audit::ModelCall({.id = id,
                          .conversation_digest = digest,
                          .turn = turn,
                          .messages = request.messages.size(),
                          .redactions = redacted,
                          .input_estimate = estimate,
                          .max_tokens = request.max_tokens,
                          .tools = std::move(tool_names)}));
  Emit("model_call",
       "model turn " + std::to_string(turn) +
           (config_.budgets.model_turns ? " of " + std::to_string(*config_.budgets.model_turns)
                                        : std::string()));
  model_call_id_ = id;
  std::weak_ptr<int> alive = alive_;
  const std::uint64_t cap = request.max_tokens;
  services_.model->Call(std::move(request),
                        [this, alive, id, turn, cap](model::ModelOutcome outcome) {
                          if (alive.expired()) return;
                          OnModelDone(id, turn, cap, std::move(outcome));
                        });
}

void Broker::Impl::OnModelDone(std::uint64_t id, std::uint64_t turn, std::uint64_t max_tokens,
                               model::ModelOutcome outcome) {
  if (ended_ || model_call_id_ != id) return;
  model_call_id_.reset();
  if (auto* error = std::get_if<model::ModelError>(&outcome)) {
    Audit(audit::ModelError({.id = id,
                             .turn = turn,
                             .code = std::string(protocol::ErrorCodeName(error->code)),
                             .message = error->message}));
    Send(Kind::kError, id, protocol::ErrorReply{error->code, error->message});
    End(BrokerOutcome::Status::kFailed, "model provider failed: " + error->message, true);
    SyncUsage();
    return;
  }
  auto& response = std::get<model::ModelResponse>(outcome);
  const std::uint64_t spent_before = budget_.used().cost_micros;
  const std::optional<std::string> exhausted = budget_.AddTokens(response.usage);
  const std::string& currency = budget_.used().currency;
  std::string cost = currency.empty()
                         ? std::string()
                         : FormatMoney(budget_.used().cost_micros - spent_before, currency);
  std::vector<audit::LoggedToolCall> calls;
  for (const protocol::ToolCall& c : response.turn.tool_calls) {
    calls.push_back({.id = c.id,
                     .name = c.name,
                     .args_digest = CanonicalDigest(c.arguments),
                     .arguments_error = c.arguments_error});
  }
  // The turn as the agent gets it and the provider's own body (redacted by Audit), so the run
  // can be replayed and the provider's answer inspected later.
  AuditEvent result_event = audit::ModelResult(
      {.id = id,
       .raw_digest = CanonicalDigest(response.raw),
       .turn = turn,
       .usage = response.usage,
       .cost = std::move(cost),
       .stop_reason = std::string(protocol::StopReasonName(response.turn.stop_reason)),
       .provider_stop_reason = response.provider_stop_reason,
       .text_bytes = response.turn.text.size(),
       .tool_calls = std::move(calls),
       .body = response.raw});
  if (Transcribing()) {
    // The turn as the agent gets it, whatever the provider's wire format (the body is that).
    json tool_calls = json::array();
    for (const protocol::ToolCall& c : response.turn.tool_calls) {
      tool_calls.push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
    }
    result_event.transcript = {{"text", response.turn.text}, {"tool_calls", std::move(tool_calls)}};
  }
  Audit(std::move(result_event));
  if (exhausted) {
    BudgetExhausted(id, *exhausted);
    SyncUsage();
    return;
  }
  // From now on the agent may ask about these calls, and only these, each once.
  turns_.Record(turn, response.turn.tool_calls);
  Emit("model_result", "model turn " + std::to_string(turn) + " answered");
  protocol::ModelResult result;
  result.answer = std::move(response.turn);
  result.usage = response.usage;
  result.turn = turn;
  result.max_turns = config_.budgets.model_turns.value_or(0);
  result.max_tokens = max_tokens;
  Send(Kind::kModelResult, id, std::move(result));
  SyncUsage();
}

policy::Decision Broker::Impl::Decide(const MappedTool& call,
                                      const std::vector<std::string>& paths) const {
  // The paths the agent resolved (symlinks followed) are judged too (Engine::Decide).
  return engine_.Decide(call.request, paths);
}

const std::string& Broker::Impl::WorkspaceStateDigest(bool fresh) {
  if (config_.loop.trust_agent_results) {
    // The pre-#13 behaviour (for the twin test): a "change" is whatever the agent reported.
    state_ = "agent-reported changes: " + std::to_string(legacy_changes_);
    return *state_;
  }
  if (state_ && !fresh) return *state_;
  if (config_.bindings.workspace.empty()) {
    state_ = "no workspace";
    return *state_;
  }
  const WorkspaceState ws =
      DigestWorkspaceState(config_.bindings.workspace,
                           WorkspaceStateLimits{.max_entries = config_.loop.state_max_entries});
  if ((ws.truncated || ws.not_walked > 0 || !ws.error.empty()) && !state_reported_) {
    // Said once per session: loop detection then sees only part of the workspace (a change in
    // the unseen part is not noticed, so a repeat there is refused sooner, never later).
    state_reported_ = true;
    Audit(audit::LoopState({.entries = ws.entries,
                            .max_entries = config_.loop.state_max_entries,
                            .truncated = ws.truncated,
                            .not_walked = ws.not_walked,
                            .error = ws.error}));
  }
  state_ = ws.digest;
  return *state_;
}

std::string Broker::Impl::NarrowerPattern(const MappedTool& call,
                                          const policy::Decision& decision) const {
  if (call.request.tool != policy::Tool::kRunCommand || !decision.loc.valid()) return {};
  const policy::ShellParse parsed = policy::ParseShell(call.request.script);
  if (parsed.opaque || parsed.commands.size() != 1) return {};
  const std::vector<std::string>& argv = parsed.commands[0].argv;
  if (argv.size() < 3) return {};
  // Offered only when the asking rule names fewer than two words ("ask npm"): then "npm install *"
  // is narrower than what the rule covers.
  for (const policy::CommandRule& rule : config_.policy->commands) {
    if (rule.loc == decision.loc && rule.verdict == policy::Verdict::kAsk) {
      if (rule.pattern.size() >= 2) return {};
      return policy::QuoteWord(argv[0]) + " " + policy::QuoteWord(argv[1]) + " *";
    }
  }
  return {};
}

void Broker::Impl::SendDecision(std::uint64_t id, const MappedTool& call,
                                protocol::Decision decision, const std::string& audit_note) {
  AuditEvent decided = audit::Decision(
      {.id = id,
       .tool = std::string(policy::ToolName(call.request.tool)),
       .args_digest = call.args_digest,
       .verdict = std::string(protocol::VerdictName(decision.verdict)),
       .rule = decision.rule,
       .call_id = ShortText(current_.call_id, 128),
       .turn = current_.turn,
       .paths = current_.paths != nullptr ? *current_.paths : std::vector<std::string>{},
       .reason = decision.reason,
       .location = decision.location,
       .pending = decision.pending,
       .note = audit_note.empty() ? std::nullopt : std::optional<std::string>(audit_note)});
  if (Transcribing() && current_.args != nullptr) {
    decided.transcript = {{"arguments", *current_.args}};
  }
  Audit(std::move(decided));
  if (on_event_) {
    Emit("decision", std::string(protocol::VerdictName(decision.verdict)) + ": " +
                         ShortText(call.action, 120) +
                         (decision.rule.empty() ? "" : " (" + decision.rule + ")"));
  }
  if (decision.verdict == protocol::Verdict::kAllow) {
    outstanding_[id] = Outstanding{std::string(policy::ToolName(call.request.tool)),
                                   call.request.tool, current_.call_id, current_.turn};
  } else if (decision.verdict == protocol::Verdict::kDeny) {
    AnswerServed(current_.call_id, CallAnswer{.kind = CallAnswer::Kind::kDenied,
                                              .text = decision.message,
                                              .rule = decision.rule,
                                              .location = decision.location});
  }
  Send(Kind::kDecision, id, std::move(decision));
}

void Broker::Impl::Deny(std::uint64_t id, const MappedTool& call, const policy::Decision& decision,
                        const std::string& location, DenialCause cause, std::string_view why) {
  ++outcome_.denials;
  Denial denial = ExplainDenial(engine_, call, decision, location, cause, why);
  protocol::Decision reply;
  reply.verdict = protocol::Verdict::kDeny;
  reply.rule = decision.rule;
  reply.location = location;
  reply.reason =
      why.empty() ? decision.reason : policy::AskDeniedReason(why, decision.rule, location);
  reply.message = std::move(denial.message);
  SendDecision(id, call, std::move(reply),
               cause == DenialCause::kHeadless ? "ask denied: nobody can approve" : "");
}

void Broker::Impl::DenyUnmapped(std::uint64_t id, const protocol::ToolRequest& request,
                                const std::string& args_digest, const std::string& rule,
                                const std::string& reason, std::string message) {
  ++outcome_.denials;
  protocol::Decision reply;
  reply.verdict = protocol::Verdict::kDeny;
  reply.rule = rule;
  reply.reason = reason;
  reply.message = std::move(message);
  AuditEvent decided = audit::Decision({.id = id,
                                        .tool = ShortText(request.tool, 64),
                                        .args_digest = args_digest,
                                        .verdict = "deny",
                                        .rule = reply.rule,
                                        .call_id = ShortText(current_.call_id, 128),
                                        .turn = current_.turn,
                                        .paths = request.paths,
                                        .reason = reply.reason});
  if (Transcribing()) decided.transcript = {{"arguments", request.args}};
  Audit(std::move(decided));
  Emit("decision", "deny: " + ShortText(request.tool, 64) + " (" + reply.reason + ")");
  // A second request for a call that is running or waiting for a person must not answer that
  // call in its place: its own answer is still to come.
  const bool in_progress =
      std::any_of(outstanding_.begin(), outstanding_.end(),
                  [this](const auto& entry) { return entry.second.call_id == current_.call_id; }) ||
      (pending_approval_ && pending_approval_->call_id == current_.call_id);
  if (!in_progress) {
    AnswerServed(
        current_.call_id,
        CallAnswer{.kind = CallAnswer::Kind::kDenied, .text = reply.message, .rule = reply.rule});
  }
  Send(Kind::kDecision, id, std::move(reply));
}

bool Broker::Impl::RefuseOverBudget(std::uint64_t id, const protocol::ToolRequest& request,
                                    const std::string& args_digest) {
  // A request refused before it is decided (an error reply, no decision) is recorded as itself;
  // every other request is recorded in its decision's entry, which carries the request too.
  const auto record_undecided = [&] {
    Audit(audit::ToolRequest({.id = id,
                              .tool = ShortText(request.tool, 64),
                              .args_digest = args_digest,
                              .call_id = ShortText(request.call_id, 128),
                              .turn = turns_.latest_turn(),
                              .paths = request.paths}));
  };
  if (outstanding_.size() >= kMaxOutstandingTools) {
    record_undecided();
    ProtocolError(ErrorCode::kOutOfOrder,
                  std::to_string(outstanding_.size()) +
                      " allowed tool calls are still waiting for their tool_result; report those "
                      "first",
                  id);
    return true;
  }
  // Every request counts against the tool-call budgets, whatever the decision: a refused call
  // costs the run as much attention as an allowed one.
  if (auto exhausted = budget_.CheckToolCall(request.tool)) {
    record_undecided();
    BudgetExhausted(id, *exhausted);
    return true;
  }
  budget_.CountToolCall(request.tool);
  return false;
}

bool Broker::Impl::RefuseBadArguments(std::uint64_t id, const protocol::ToolRequest& request,
                                      const MappedTool& call) {
  if (!call.argument_error.empty() || request.paths.size() > kMaxRequestPaths) {
    ++outcome_.denials;
    protocol::Decision reply;
    reply.verdict = protocol::Verdict::kDeny;
    reply.rule = "arguments";
    reply.reason = call.argument_error.empty()
                       ? "more than " + std::to_string(kMaxRequestPaths) + " paths in one call"
                       : call.argument_error;
    MappedTool shown = call;
    if (shown.argument_error.empty()) shown.argument_error = reply.reason;
    reply.message = ArgumentMessage(shown);
    SendDecision(id, call, std::move(reply));
    return true;
  }
  return false;
}

bool Broker::Impl::RefuseLoop(std::uint64_t id, const protocol::ToolRequest& request,
                              const std::string& args_text, const std::string& args_digest,
                              const MappedTool& call) {
  // Loop detection before the policy: a repeated call is refused however it would be decided.
  // The state is cagent's own digest of the workspace on the host, never anything the agent says;
  // a fresh one is taken whenever this call was last seen in the state cached now.
  // The key is the call without its resolved paths: those are the agent's to choose, and a
  // different list each time would make the same command look new forever (a re-pointed symlink
  // changes the workspace state anyway).
  const std::string loop_key = CallDigestOfText(request.tool, args_text, {});
  std::string state = WorkspaceStateDigest(false);
  if (loop_.SuspectsRepeat(loop_key, state)) state = WorkspaceStateDigest(true);
  if (auto loop = loop_.Check(loop_key, state)) {
    ++outcome_.denials;
    protocol::Decision reply;
    reply.verdict = protocol::Verdict::kDeny;
    reply.rule = "loop detection";
    reply.reason =
        loop->kind == LoopFinding::Kind::kRepeat
            ? "the same call " + std::to_string(loop->count) + " times with no workspace change"
            : "a cycle of " + std::to_string(loop->period) + " calls repeated " +
                  std::to_string(loop->count) + " times";
    reply.message = LoopMessage(*loop, ShortText(call.action, 200));
    Audit(audit::Loop({.id = id,
                       .tool = std::string(policy::ToolName(call.request.tool)),
                       .args_digest = args_digest,
                       .reason = reply.reason}));
    SendDecision(id, call, std::move(reply));
    return true;
  }
  return false;
}

void Broker::Impl::OnToolRequest(std::uint64_t id, const protocol::ToolRequest& request) {
  // The canonical text of the arguments, made once: their digest (the log's `args`), loop
  // detection's key and, for an ask, the approval digest are all hashes over it.
  const std::string args_text = JsonText(request.args);
  const std::string args_digest = Sha256Hex(args_text);
  if (RefuseOverBudget(id, request, args_digest)) return;

  // The request must be one the model made: a call of its latest turn, named once, with the
  // model's tool and arguments. The agent cannot run a tool the model did not ask for.
  const ModelTurns::Binding binding = turns_.Bind(request.call_id, request.tool, args_digest);
  current_ = Current{request.call_id, binding.turn, &request.paths, &request.args};
  // No decision outlives this call: the paths and args pointers must not either.
  struct ClearPaths {
    Current& current;
    ~ClearPaths() {
      current.paths = nullptr;
      current.args = nullptr;
    }
  } clear_paths{current_};
  if (!binding.ok) {
    DenyUnmapped(id, request, args_digest, "model turn", binding.reason,
                 "Refused: " + binding.reason +
                     ". Only the tool calls of the model's latest answer can be run, each once, "
                     "with the arguments the model gave.");
    return;
  }

  if (cancelled_.erase(request.call_id) > 0) {
    DenyUnmapped(id, request, args_digest, "cancelled", "the client cancelled this call",
                 "Not run: the client cancelled this call before it started.");
    return;
  }

  // The call's identity (tool + canonical arguments + the paths the agent resolved them to) binds
  // approvals; the audit log's `args` is the digest of the arguments alone. With the resolved paths
  // in it, an approval of `edit_file a.py` does not approve an `edit_file a.py` whose a.py has
  // become a symlink to somewhere else (issue #13).
  std::vector<std::string> resolved = ResolvedPaths(request.paths);
  std::optional<MappedTool> mapped = MapTool(request.tool, request.args);
  if (mapped) {
    mapped->args_digest = args_digest;
    mapped->resolved_paths = std::move(resolved);
  }
  if (!mapped) {
    DenyUnmapped(id, request, args_digest, "unknown tool",
                 "\"" + ShortText(request.tool, 64) + "\" is not one of the agent's tools",
                 UnknownToolMessage(request.tool, enabled_tools_));
    return;
  }
  const MappedTool& call = *mapped;
  if (RefuseBadArguments(id, request, call)) return;

  if (RefuseLoop(id, request, args_text, args_digest, call)) return;

  const policy::Decision decision = Decide(call, request.paths);
  const std::string location = Where(decision.loc);
  switch (decision.verdict) {
    case policy::Verdict::kAllow: {
      protocol::Decision reply;
      reply.verdict = protocol::Verdict::kAllow;
      reply.rule = decision.rule;
      reply.location = location;
      reply.reason = decision.reason;
      SendDecision(id, call, std::move(reply));
      return;
    }
    case policy::Verdict::kDeny:
      Deny(id, call, decision, location, DenialCause::kPolicy);
      return;
    case policy::Verdict::kAsk:
      AskApproval(id, request, args_text, call, decision, location);
      return;
  }
}

void Broker::Impl::AskApproval(std::uint64_t id, const protocol::ToolRequest& request,
                               const std::string& args_text, const MappedTool& call,
                               const policy::Decision& decision, const std::string& location) {
  ApprovalRequest req;
  req.tool = std::string(policy::ToolName(call.request.tool));
  req.action = call.action;
  req.resolved_paths = call.resolved_paths;
  req.digest = CallDigestOfText(request.tool, args_text, call.resolved_paths);
  req.rule = decision.rule;
  req.location = location;
  req.reason = decision.reason;
  req.narrower_pattern = NarrowerPattern(call, decision);
  req.call_id = current_.call_id;

  auto allow = [&](const std::string& why, const std::string& note) {
    protocol::Decision reply;
    reply.verdict = protocol::Verdict::kAllow;
    reply.rule = decision.rule;
    reply.location = location;
    reply.reason = why;
    SendDecision(id, call, std::move(reply), note);
  };

  // A standing approval (pre-approved, or approved earlier for the run) applies in every mode:
  // headless runs deny what would ask unless it was pre-approved.
  if (services_.approvals != nullptr) {
    if (auto standing = services_.approvals->Lookup(req); standing && standing->approved) {
      allow(decision.reason + "; approved beforehand (" + standing->by + ")",
            "standing approval: " + std::string(ApprovalScopeName(standing->scope)));
      return;
    }
  }
  if (config_.approval == ApprovalMode::kStop) {
    // Nobody is asked now: the agent is refused, and the session ends so that a person can look
    // at the exact action and allow it on a re-run (--pre-approve sha256:DIGEST). Whatever the
    // profile's approval mode: the command line only narrows (never-ask would deny the ask and
    // go on, auto would allow it), and a pre-approval applies under every mode, as above.
    Deny(id, call, decision, location, DenialCause::kHeadless, "--approve stop");
    outcome_.needs_approval = req;
    End(BrokerOutcome::Status::kNeedsApproval, NeedsApprovalReason(req), true);
    return;
  }
  const policy::Verdict effective = config_.approval == ApprovalMode::kNever
                                        ? policy::Verdict::kDeny
                                        : engine_.Effective(policy::Verdict::kAsk);
  if (effective == policy::Verdict::kAllow) {
    allow(decision.reason + "; the profile's approval mode is auto, so it is allowed unasked",
          "auto-approved by the profile");
    return;
  }
  if (effective == policy::Verdict::kDeny || services_.approver == nullptr) {
    Deny(id, call, decision, location, DenialCause::kHeadless,
         config_.approval == ApprovalMode::kNever ? "--approve never"
         : effective == policy::Verdict::kDeny    ? "approval never-ask"
                                                  : "no terminal to ask on");
    return;
  }
  if (approval_id_) {
    ProtocolError(ErrorCode::kOutOfOrder,
                  "request " + std::to_string(*approval_id_) +
                      " is still waiting for a person's approval; one approval at a time",
                  id);
    return;
  }
  ++outcome_.approvals_asked;
  approval_id_ = id;
  pending_approval_ =
      PendingApproval{req, call, decision, location, current_.call_id, current_.turn};
  protocol::Decision reply;
  reply.verdict = protocol::Verdict::kAsk;
  reply.pending = true;
  reply.rule = decision.rule;
  reply.location = location;
  reply.reason = decision.reason;
  reply.message = "Waiting for a person to approve " + ShortText(call.action, 200) + " (rule " +
                  decision.rule +
                  "). An approval message with this id follows; do not run it "
                  "before then.";
  SendDecision(id, call, std::move(reply));
  Emit("approval", "waiting for approval: " + ShortText(call.action, 120));
  std::weak_ptr<int> alive = alive_;
  services_.approver->Ask(req, [this, alive, id](const ApprovalOutcome& outcome) {
    if (alive.expired()) return;
    OnApproval(id, outcome);
  });
}

void Broker::Impl::OnApproval(std::uint64_t id, const ApprovalOutcome& outcome) {
  if (ended_ || approval_id_ != id || !pending_approval_) return;
  PendingApproval pending = std::move(*pending_approval_);
  pending_approval_.reset();
  approval_id_.reset();
  if (outcome.approved && services_.approvals != nullptr &&
      (outcome.scope == ApprovalScope::kRunExact || outcome.scope == ApprovalScope::kRunPattern)) {
    services_.approvals->Record(pending.request, outcome);
  }
  Audit(audit::Approval({.id = id,
                         .tool = pending.request.tool,
                         .args_digest = pending.call.args_digest,
                         .approved = outcome.approved,
                         .rule = pending.request.rule,
                         .call_id = ShortText(pending.call_id, 128),
                         .turn = pending.turn,
                         .scope = std::string(ApprovalScopeName(outcome.scope)),
                         .by = outcome.by}));
  Emit("approval", std::string(outcome.approved ? "approved" : "denied") + ": " +
                       ShortText(pending.call.action, 120));
  protocol::Approval reply;
  reply.scope = std::string(ApprovalScopeName(outcome.scope));
  if (outcome.approved) {
    reply.verdict = protocol::Verdict::kAllow;
    outstanding_[id] =
        Outstanding{pending.request.tool, pending.call.request.tool, pending.call_id, pending.turn};
  } else {
    ++outcome_.denials;
    reply.verdict = protocol::Verdict::kDeny;
    reply.message =
        ExplainDenial(engine_, pending.call, pending.decision, pending.location,
                      outcome.scope == ApprovalScope::kHeadless ? DenialCause::kHeadless
                                                                : DenialCause::kApprovalDeclined)
            .message;
    AnswerServed(pending.call_id, CallAnswer{.kind = CallAnswer::Kind::kDenied,
                                             .text = reply.message,
                                             .rule = pending.request.rule,
                                             .location = pending.request.location});
  }
  Send(Kind::kApproval, id, std::move(reply));
}

void Broker::Impl::OnToolResult(std::uint64_t id, const protocol::ToolResult& result) {
  if (result.request == 0 && config_.serve) {
    OnAgentRefusal(id, result);
    return;
  }
  auto it = outstanding_.find(result.request);
  if (it == outstanding_.end()) {
    Audit(audit::UnmatchedToolResult(id, result.request));
    ProtocolError(ErrorCode::kOutOfOrder,
                  "tool_result for request " + std::to_string(result.request) +
                      ", which is not an allowed tool_request awaiting its result",
                  id);
    return;
  }
  const Outstanding call = std::move(it->second);
  outstanding_.erase(it);
  std::string output =
      services_.redactor != nullptr ? services_.redactor->Redact(result.output) : result.output;
  AuditEvent result_event = audit::ToolResult({.id = id,
                                               .tool = call.tool,
                                               .output_digest = StringDigest(output),
                                               .request = result.request,
                                               .call_id = ShortText(call.call_id, 128),
                                               .turn = call.turn,
                                               .ok = result.ok,
                                               .error_code = ShortText(result.error_code, 64),
                                               .bytes = result.output.size(),
                                               .redacted = output != result.output,
                                               .changed_paths = result.changed_paths});
  // The output as the model gets it (already redacted).
  if (Transcribing()) result_event.transcript = {{"output", output}};
  Audit(std::move(result_event));
  if (auto exhausted = budget_.AddOutput(result.output.size())) {
    BudgetExhausted(id, *exhausted);
    return;
  }
  if (config_.serve) {
    AnswerServed(call.call_id, CallAnswer{.kind = CallAnswer::Kind::kResult,
                                          .ok = result.ok,
                                          .error_code = ShortText(result.error_code, 64),
                                          .text = output});
  }
  const bool writes = call.kind == policy::Tool::kWriteFile ||
                      call.kind == policy::Tool::kEditFile ||
                      call.kind == policy::Tool::kRunCommand;
  // Whatever the result says: a tool that can write may have changed the workspace (a failed
  // command can write as much as a successful one), so the next call looks at it afresh.
  if (writes) state_.reset();
  if (config_.loop.trust_agent_results &&
      (!result.changed_paths.empty() || (result.ok && writes))) {
    ++legacy_changes_;
  }
  if (on_event_) {
    Emit("tool_result",
         call.tool + (result.ok ? " done" : " failed: " + ShortText(result.error_code, 64)));
  }
  Send(Kind::kResultAck, id, protocol::ResultAck{std::move(output), false});
}

void Broker::Impl::OnProgress(std::uint64_t id, const protocol::Progress& progress) {
  Audit(audit::Progress(
      {.id = id, .state = ShortText(progress.state, 64), .text = ShortText(progress.text, 500)}));
  Emit("progress", ShortText(progress.state, 64) +
                       (progress.text.empty() ? "" : ": " + ShortText(progress.text, 200)));
  Send(Kind::kAck, id, protocol::Ack{});
}

void Broker::Impl::OnFinish(std::uint64_t id, const protocol::Finish& finish) {
  Audit(audit::Finish({.id = id,
                       .outcome = ShortText(finish.outcome, 64),
                       .summary = ShortText(finish.summary, 4000)}));
  outcome_.finish = finish;
  if (services_.redactor != nullptr) {
    outcome_.finish->summary = services_.redactor->Redact(finish.summary);
  }
  Emit("finish", ShortText(finish.outcome, 64));
  Send(Kind::kAck, id, protocol::Ack{});
  // Only "done" is a finished session; giving up (e.g. the agent's own turn limit) or an error is
  // a failed one, never a silent partial success. The run's real outcome is verification's.
  if (finish.outcome == "done") {
    End(BrokerOutcome::Status::kFinished, "", false);
    return;
  }
  const std::string why = ShortText(finish.summary, 300);
  End(BrokerOutcome::Status::kFailed,
      (finish.outcome == "gave_up" ? "the agent gave up" : "the agent failed") +
          (why.empty() ? std::string() : ": " + why),
      false);
}

// ---------------------------------------------------------------------------------------------
// Bookkeeping

void Broker::Impl::ProtocolError(ErrorCode code, const std::string& message, std::uint64_t id) {
  ++outcome_.protocol_errors;
  Audit(audit::ProtocolError({.id = id,
                              .code = std::string(protocol::ErrorCodeName(code)),
                              .message = ShortText(message, 500)}));
  Send(Kind::kError, id, protocol::ErrorReply{code, message});
  if (outcome_.protocol_errors >= config_.max_protocol_errors && !ended_) {
    End(BrokerOutcome::Status::kFailed, "agent protocol violations", true);
  }
}

// ---------------------------------------------------------------------------------------------
// A served session

void Broker::Impl::OnNextCall(std::uint64_t id) {
  if (!config_.serve || services_.calls == nullptr) {
    ProtocolError(ErrorCode::kOutOfOrder,
                  "next_call is only for a served session (cagent mcp serve); this session has a "
                  "model: send model_call",
                  id);
    return;
  }
  if (next_call_id_) {
    ProtocolError(
        ErrorCode::kOutOfOrder,
        "a next_call (request " + std::to_string(*next_call_id_) + ") is still waiting for calls",
        id);
    return;
  }
  // Asking for more work answers whatever the agent left unanswered of the last calls: the
  // client must not wait forever on a call a (compromised) agent chose to ignore.
  while (!served_.empty()) {
    AnswerServed(*served_.begin(),
                 CallAnswer{.kind = CallAnswer::Kind::kFailed,
                            .text = "the sandboxed toolbox did not run this call"});
  }
  outstanding_.clear();
  next_call_id_ = id;
  std::weak_ptr<int> alive = alive_;
  services_.calls->Next([this, alive, id](std::vector<ServedCall> calls) {
    if (alive.expired()) return;
    OnCalls(id, std::move(calls));
  });
}

void Broker::Impl::OnCalls(std::uint64_t id, std::vector<ServedCall> calls) {
  if (ended_ || next_call_id_ != id) return;
  next_call_id_.reset();
  if (calls.empty()) {
    End(BrokerOutcome::Status::kFinished, "the client ended the session", true);
    return;
  }
  if (calls.size() > protocol::kMaxToolCallsPerTurn) calls.resize(protocol::kMaxToolCallsPerTurn);
  const std::uint64_t turn = ++served_turns_;
  protocol::ModelResult result;
  result.turn = turn;
  result.answer.stop_reason = protocol::StopReason::kToolCalls;
  for (ServedCall& c : calls) {
    served_.insert(c.call_id);
    result.answer.tool_calls.push_back(
        protocol::ToolCall{c.call_id, c.tool, std::move(c.arguments), ""});
  }
  // From now on the agent may ask about these calls, and only these, each once.
  turns_.Record(turn, result.answer.tool_calls);
  Emit("model_result", "client call" + std::string(calls.size() > 1 ? "s" : "") + ": " +
                           ShortText(result.answer.tool_calls.front().name, 64));
  Send(Kind::kModelResult, id, std::move(result));
}

void Broker::Impl::OnAgentRefusal(std::uint64_t id, const protocol::ToolResult& result) {
  if (served_.count(result.call_id) == 0 || result.ok) {
    Audit(audit::UnmatchedToolResult(id, 0));
    ProtocolError(ErrorCode::kOutOfOrder,
                  "tool_result with request 0 must be a refusal (ok false) of a call handed out "
                  "by the latest next_call and not asked about",
                  id);
    return;
  }
  // The id is used up, as if the agent had asked about it.
  (void)turns_.Bind(result.call_id, "", "");
  const std::string output =
      services_.redactor != nullptr ? services_.redactor->Redact(result.output) : result.output;
  Audit(audit::Progress(
      {.id = id,
       .state = "refused",
       .text = ShortText(result.call_id, 128) + ": " + ShortText(result.error_code, 64)}));
  Emit("tool_result", "refused by the toolbox: " + ShortText(result.error_code, 64));
  AnswerServed(result.call_id, CallAnswer{.kind = CallAnswer::Kind::kRefused,
                                          .error_code = ShortText(result.error_code, 64),
                                          .text = output});
  Send(Kind::kResultAck, id, protocol::ResultAck{output, false});
}

void Broker::Impl::AnswerServed(const std::string& call_id, CallAnswer answer) {
  // A copy: `call_id` may be the very element erased here (End answers *served_.begin()).
  const std::string id = call_id;  // NOLINT(performance-unnecessary-copy-initialization)
  if (!config_.serve || services_.calls == nullptr || served_.erase(id) == 0) return;
  services_.calls->Answer(id, std::move(answer));
}

void Broker::Impl::CancelCall(const std::string& call_id, const std::string& reason) {
  if (ended_ || served_.count(call_id) == 0) return;
  for (const auto& [request, call] : outstanding_) {
    if (call.call_id == call_id) {
      Audit(audit::Progress({.id = request,
                             .state = "cancel",
                             .text = ShortText(call_id, 128) + ": " + ShortText(reason, 200)}));
      Send(Kind::kCancel, request, protocol::Cancel{reason});
      return;
    }
  }
  if (pending_approval_ && pending_approval_->call_id == call_id) {
    if (services_.approver != nullptr) services_.approver->Cancel();
    return;
  }
  cancelled_.insert(call_id);
}

void Broker::Impl::BudgetExhausted(std::uint64_t id, const std::string& reason) {
  Audit(audit::Budget({.id = id, .reason = reason}));
  Send(Kind::kError, id, protocol::ErrorReply{ErrorCode::kBudgetExhausted, reason});
  End(BrokerOutcome::Status::kFailed, reason, true);
}

bool Broker::Impl::Transcribing() const {
  return services_.audit != nullptr && services_.audit->observed();
}

void Broker::Impl::Audit(AuditEvent event) {
  if (services_.audit == nullptr) return;
  if (services_.redactor != nullptr) {
    services_.redactor->RedactJson(event.detail);
    // What a transcript shows is redacted as the log is (the output is already).
    if (!event.transcript.is_null()) services_.redactor->RedactJson(event.transcript);
    for (AuditDetailField& f : event.fields) {
      if (f.type == AuditDetailField::Type::kString) {
        services_.redactor->RedactMember(f.name, f.text);
      } else if (f.type == AuditDetailField::Type::kStringList) {
        for (std::string& item : f.list) services_.redactor->RedactMember({}, item);
      }
    }
  }
  services_.audit->Append(event);
}

void Broker::Impl::Emit(std::string kind, std::string text) {
  if (!on_event_) return;
  SyncElapsed();
  // The counts by reference: an event per message must not copy them (and their map) each time.
  on_event_(BrokerEvent{std::move(kind), std::move(text), budget_.used()});
}

void Broker::Impl::SyncElapsed() {
  if (started_) {
    budget_.SetElapsed(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started_at_));
  }
}

void Broker::Impl::SyncUsage() {
  SyncElapsed();
  outcome_.used = budget_.used();
}

// ---------------------------------------------------------------------------------------------
// Broker

Broker::Broker(asio::io_context& io, BrokerConfig config, BrokerServices services)
    : impl_(std::make_unique<Impl>(io, std::move(config), services)) {}

Broker::~Broker() = default;

void Broker::Start(UniqueFd socket) { impl_->Start(std::move(socket)); }

void Broker::Stop(BrokerOutcome::Status status, std::string reason) {
  impl_->Stop(status, std::move(reason));
}

void Broker::CancelCall(const std::string& call_id, const std::string& reason) {
  impl_->CancelCall(call_id, reason);
}

void Broker::SetOnEnd(std::function<void(const BrokerOutcome&)> on_end) {
  impl_->on_end_ = std::move(on_end);
}

void Broker::SetOnEvent(std::function<void(const BrokerEvent&)> on_event) {
  impl_->on_event_ = std::move(on_event);
}

const BrokerOutcome& Broker::outcome() const { return impl_->Outcome(); }

}  // namespace cagent::launcher::broker
