// BrokerClient: the agent's blocking client for the broker socket (cagent-agent, inside the
// sandbox; single-threaded).
//
// Owns the agent's end of the socketpair. Each request gets a strictly increasing id (1, 2, ...)
// and the client blocks until the reply with that id arrives. Everything received is decoded with
// protocol::Decode(payload, /*from_agent=*/false) and treated as hostile: a malformed frame, a
// reply with another id or of the wrong kind ends the session with a kProtocol failure naming what
// was wrong. An unsolicited `shutdown` may arrive at any point (also while waiting for an
// approval); it ends the session with a kShutdown failure carrying the broker's status and reason.
// After any failure the client is dead: every later call returns the same failure without
// touching the socket. Writes use MSG_NOSIGNAL (no SIGPIPE); a write that fails because the
// broker closed still reads what the broker sent last, so a shutdown's reason is not lost.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "common/protocol.h"
#include "common/unique_fd.h"

namespace cagent::agent {

// Why a request got no ordinary reply.
struct BrokerFailure {
  enum class Kind : std::uint8_t {
    kShutdown,    // the broker sent shutdown (status + reason)
    kErrorReply,  // the broker answered the request with `error` (code + message)
    kProtocol,    // the broker sent something this client cannot accept
    kClosed,      // the connection ended (EOF or an I/O error) without a shutdown
  };
  Kind kind = Kind::kProtocol;
  protocol::ErrorCode code = protocol::ErrorCode::kInternal;  // kErrorReply
  std::string status;   // kShutdown: "failed" | "cancelled" | ...
  std::string message;  // what happened, in words

  // One line for stderr: "broker shut the run down (failed): tool-call budget (200) reached".
  [[nodiscard]] std::string Describe() const;
};

// A reply or the reason there is none.
template <typename T>
class [[nodiscard]] BrokerReply {
 public:
  BrokerReply(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  // NOLINTNEXTLINE(google-explicit-constructor)
  BrokerReply(BrokerFailure failure) : v_(std::move(failure)) {}
  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  [[nodiscard]] const BrokerFailure& failure() const { return std::get<1>(v_); }

 private:
  std::variant<T, BrokerFailure> v_;
};

// The broker's answer to a tool_request: the decision and, for a pending ask, the approval.
struct ToolDecision {
  std::uint64_t request_id = 0;  // the tool_request's id (tool_result refers to it)
  protocol::Decision decision;
  std::optional<protocol::Approval> approval;  // set when the decision was pending

  // allow, or ask followed by an approval that allows.
  [[nodiscard]] bool allowed() const;
  // For a refusal: the text for the model (the broker's message, else one built from the rule
  // and reason).
  [[nodiscard]] std::string RefusalMessage() const;
};

class BrokerClient {
 public:
  // Takes ownership of `socket` (blocking mode expected).
  explicit BrokerClient(UniqueFd socket, std::uint32_t max_frame_bytes = protocol::kMaxFrameBytes);

  // hello (announcing protocols [protocol::kVersion]) -> welcome; a welcome choosing any other
  // version is a kProtocol failure.
  BrokerReply<protocol::Welcome> Hello(const std::string& agent_name);
  // model_call{system, messages} -> model_result (a neutral turn whose call ids the broker
  // filled). The call carries message content only: no model, tools or token limit, which are the
  // broker's to choose.
  BrokerReply<protocol::ModelResult> ModelCall(protocol::ModelCall call);
  // tool_request -> decision [-> approval when pending].
  BrokerReply<ToolDecision> RequestTool(protocol::ToolRequest request);
  // tool_result -> result_ack.
  BrokerReply<protocol::ResultAck> ReportResult(protocol::ToolResult result);
  // progress -> ack.
  BrokerReply<protocol::Ack> Progress(std::string state, std::string text);
  // next_call -> model_result: a served session's next calls (the MCP client's), as a turn.
  BrokerReply<protocol::ModelResult> NextCall();
  // Whether the broker has told this client to stop tool request `request_id` (a `cancel`), reading
  // without blocking only what has arrived. A shutdown, a closed connection or anything else
  // arriving also counts (the session is then dead: failure() says why). A cancel for another
  // request is ignored (a late one), here and while waiting for a reply.
  bool CancelArrived(std::uint64_t request_id);
  // The socket, for poll(2) (CommandSpec::interrupt_fd). Not to be read or written directly.
  [[nodiscard]] int fd() const { return socket_.get(); }
  // finish -> ack (the broker then closes the connection).
  BrokerReply<protocol::Ack> Finish(std::string outcome, std::string summary);

  // The failure that ended the session, if any.
  [[nodiscard]] const std::optional<BrokerFailure>& failure() const { return failure_; }
  // The id the last request carried (0 before the first).
  [[nodiscard]] std::uint64_t last_id() const { return next_id_ - 1; }

 private:
  // Sends a request with the next id; returns the id or the failure.
  std::variant<std::uint64_t, BrokerFailure> Send(protocol::Kind kind, protocol::Body body);
  // Waits for the next message for request `id` of kind `expected` (an `error` with that id is a
  // kErrorReply failure, a shutdown a kShutdown failure).
  std::variant<protocol::Message, BrokerFailure> Await(std::uint64_t id, protocol::Kind expected);
  // The next decoded message from the broker, reading as needed.
  std::variant<protocol::Message, BrokerFailure> Receive();
  // Records `failure` as the session's end and returns it.
  BrokerFailure Fail(BrokerFailure failure);
  template <typename T>
  BrokerReply<T> Exchange(protocol::Kind kind, protocol::Body body, protocol::Kind expected);

  UniqueFd socket_;
  protocol::FrameDecoder decoder_;
  std::uint64_t next_id_ = 1;
  std::optional<BrokerFailure> failure_;
};

}  // namespace cagent::agent
