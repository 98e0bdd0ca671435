#include "agent/broker_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace cagent::agent {
namespace {

using protocol::Kind;

BrokerFailure Failure(BrokerFailure::Kind kind, std::string message) {
  BrokerFailure f;
  f.kind = kind;
  f.message = std::move(message);
  return f;
}

std::string KindText(Kind kind) { return std::string(protocol::KindName(kind)); }

}  // namespace

std::string BrokerFailure::Describe() const {
  switch (kind) {
    case Kind::kShutdown:
      return "the broker ended the run (" + (status.empty() ? std::string("failed") : status) +
             "): " + (message.empty() ? std::string("no reason given") : message);
    case Kind::kErrorReply:
      return "the broker refused the request (" + std::string(protocol::ErrorCodeName(code)) +
             "): " + message;
    case Kind::kProtocol:
      return "protocol failure talking to the broker: " + message;
    case Kind::kClosed:
      return "lost the connection to the broker: " + message;
  }
  return message;
}

bool ToolDecision::allowed() const {
  if (decision.verdict == protocol::Verdict::kAllow) return true;
  if (decision.verdict == protocol::Verdict::kAsk && approval) {
    return approval->verdict == protocol::Verdict::kAllow;
  }
  return false;
}

std::string ToolDecision::RefusalMessage() const {
  if (approval && approval->verdict != protocol::Verdict::kAllow) {
    if (!approval->message.empty()) return approval->message;
    return "The call was not approved (" + approval->scope + "). Do something else or finish.";
  }
  if (!decision.message.empty()) return decision.message;
  std::string out = "The policy refused this call";
  if (!decision.rule.empty()) out += " (rule: " + decision.rule + ")";
  if (!decision.reason.empty()) out += ": " + decision.reason;
  if (decision.verdict == protocol::Verdict::kAsk) out += ": approval was required but not given";
  return out + ".";
}

BrokerClient::BrokerClient(UniqueFd socket, std::uint32_t max_frame_bytes)
    : socket_(std::move(socket)), decoder_(max_frame_bytes) {}

BrokerFailure BrokerClient::Fail(BrokerFailure failure) {
  if (!failure_) failure_ = failure;
  return failure;
}

std::variant<std::uint64_t, BrokerFailure> BrokerClient::Send(Kind kind, protocol::Body body) {
  if (failure_) return *failure_;
  const std::uint64_t id = next_id_++;
  auto frame = protocol::EncodeMessage(protocol::Make(kind, id, std::move(body)));
  if (!frame.ok()) {
    // Too large to send: the session can continue, but this request cannot be made.
    return Failure(BrokerFailure::Kind::kProtocol,
                   KindText(kind) + " could not be sent: " + frame.error().Message());
  }
  std::string_view rest = *frame;
  while (!rest.empty()) {
    ssize_t n = ::send(socket_.get(), rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::write(socket_.get(), rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EPIPE;
      // The broker may have said why before it closed: a shutdown is the better explanation.
      for (;;) {
        auto next = Receive();
        if (std::holds_alternative<BrokerFailure>(next)) break;
        auto& message = std::get<protocol::Message>(next);
        if (message.header.kind == Kind::kShutdown) {
          const auto& s = std::get<protocol::Shutdown>(message.body);
          BrokerFailure f = Failure(BrokerFailure::Kind::kShutdown, s.reason);
          f.status = s.status;
          return Fail(f);
        }
      }
      failure_.reset();
      return Fail(Failure(BrokerFailure::Kind::kClosed,
                          "sending " + KindText(kind) + " failed: " + std::strerror(err)));
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  return id;
}

std::variant<protocol::Message, BrokerFailure> BrokerClient::Receive() {
  if (failure_) return *failure_;
  std::array<char, 65536> buffer{};
  for (;;) {
    if (auto payload = decoder_.Next()) {
      auto decoded = protocol::Decode(*payload, /*from_agent=*/false);
      if (auto* error = std::get_if<protocol::DecodeError>(&decoded)) {
        return Fail(Failure(BrokerFailure::Kind::kProtocol,
                            "the broker sent a malformed message (" +
                                std::string(protocol::ErrorCodeName(error->code)) +
                                "): " + error->message));
      }
      return std::get<protocol::Message>(std::move(decoded));
    }
    if (decoder_.failed()) {
      return Fail(Failure(BrokerFailure::Kind::kProtocol, "the broker's stream is corrupt"));
    }
    const ssize_t n = ::read(socket_.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Fail(Failure(BrokerFailure::Kind::kClosed,
                          std::string("reading from the broker failed: ") + std::strerror(errno)));
    }
    if (n == 0) {
      if (decoder_.Pending() > 0) {
        return Fail(Failure(BrokerFailure::Kind::kProtocol,
                            "the broker closed the connection in the middle of a frame"));
      }
      return Fail(Failure(BrokerFailure::Kind::kClosed, "the broker closed the connection"));
    }
    if (Status fed = decoder_.Feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
        !fed.ok()) {
      return Fail(Failure(BrokerFailure::Kind::kProtocol,
                          "the broker sent a bad frame: " + fed.error().Message()));
    }
  }
}

std::variant<protocol::Message, BrokerFailure> BrokerClient::Await(std::uint64_t id,
                                                                   Kind expected) {
  auto received = Receive();
  if (auto* failure = std::get_if<BrokerFailure>(&received)) return *failure;
  // A cancel that crossed the result of the call it named is late: nothing is left to stop.
  while (std::get<protocol::Message>(received).header.kind == Kind::kCancel) {
    received = Receive();
    if (auto* failure = std::get_if<BrokerFailure>(&received)) return *failure;
  }
  auto& message = std::get<protocol::Message>(received);
  const Kind kind = message.header.kind;
  if (kind == Kind::kShutdown) {
    const auto& s = std::get<protocol::Shutdown>(message.body);
    BrokerFailure f = Failure(BrokerFailure::Kind::kShutdown, s.reason);
    f.status = s.status;
    return Fail(f);
  }
  if (message.header.id != id) {
    std::string text = "the broker sent " + KindText(kind) + " for request " +
                       std::to_string(message.header.id) + " while request " + std::to_string(id) +
                       " was outstanding";
    if (kind == Kind::kError) {
      text += " (" + std::get<protocol::ErrorReply>(message.body).message + ")";
    }
    return Fail(Failure(BrokerFailure::Kind::kProtocol, text));
  }
  if (kind == Kind::kError) {
    const auto& e = std::get<protocol::ErrorReply>(message.body);
    BrokerFailure f = Failure(BrokerFailure::Kind::kErrorReply, e.message);
    f.code = e.code;
    return f;  // the session goes on; the caller decides
  }
  if (kind != expected) {
    return Fail(Failure(BrokerFailure::Kind::kProtocol,
                        "the broker answered request " + std::to_string(id) + " with " +
                            KindText(kind) + " instead of " + KindText(expected)));
  }
  return std::move(message);
}

template <typename T>
BrokerReply<T> BrokerClient::Exchange(Kind kind, protocol::Body body, Kind expected) {
  auto sent = Send(kind, std::move(body));
  if (auto* failure = std::get_if<BrokerFailure>(&sent)) return *failure;
  auto reply = Await(std::get<std::uint64_t>(sent), expected);
  if (auto* failure = std::get_if<BrokerFailure>(&reply)) return *failure;
  return std::get<T>(std::move(std::get<protocol::Message>(reply).body));
}

BrokerReply<protocol::ModelResult> BrokerClient::NextCall() {
  return Exchange<protocol::ModelResult>(Kind::kNextCall, protocol::NextCall{}, Kind::kModelResult);
}

bool BrokerClient::CancelArrived(std::uint64_t request_id) {
  if (failure_) return true;
  std::array<char, 65536> buffer{};
  for (;;) {
    const ssize_t n = ::recv(socket_.get(), buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0) {
      Fail(Failure(BrokerFailure::Kind::kClosed,
                   std::string("reading from the broker failed: ") + std::strerror(errno)));
      return true;
    }
    if (n == 0) {
      Fail(Failure(BrokerFailure::Kind::kClosed, "the broker closed the connection"));
      return true;
    }
    if (Status fed = decoder_.Feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
        !fed.ok()) {
      Fail(Failure(BrokerFailure::Kind::kProtocol,
                   "the broker sent a bad frame: " + fed.error().Message()));
      return true;
    }
    if (static_cast<std::size_t>(n) < buffer.size()) break;
  }
  bool cancelled = false;
  while (auto payload = decoder_.Next()) {
    auto decoded = protocol::Decode(*payload, /*from_agent=*/false);
    if (auto* error = std::get_if<protocol::DecodeError>(&decoded)) {
      Fail(Failure(BrokerFailure::Kind::kProtocol,
                   "the broker sent a malformed message (" +
                       std::string(protocol::ErrorCodeName(error->code)) + "): " + error->message));
      return true;
    }
    const auto& message = std::get<protocol::Message>(decoded);
    if (message.header.kind == Kind::kCancel) {
      cancelled = cancelled || message.header.id == request_id;
      continue;
    }
    if (message.header.kind == Kind::kShutdown) {
      const auto& sd = std::get<protocol::Shutdown>(message.body);
      BrokerFailure f = Failure(BrokerFailure::Kind::kShutdown, sd.reason);
      f.status = sd.status;
      Fail(f);
      return true;
    }
    Fail(Failure(BrokerFailure::Kind::kProtocol,
                 "the broker sent " + KindText(message.header.kind) + " while a tool was running"));
    return true;
  }
  if (decoder_.failed()) {
    Fail(Failure(BrokerFailure::Kind::kProtocol, "the broker's stream is corrupt"));
    return true;
  }
  return cancelled;
}

BrokerReply<protocol::Welcome> BrokerClient::Hello(const std::string& agent_name) {
  auto reply = Exchange<protocol::Welcome>(
      Kind::kHello, protocol::Hello{agent_name, {protocol::kVersion}}, Kind::kWelcome);
  if (reply.ok() && reply.value().protocol != protocol::kVersion) {
    return Fail(Failure(BrokerFailure::Kind::kProtocol, "the broker chose protocol version " +
                                                            std::to_string(reply.value().protocol) +
                                                            "; this agent speaks " +
                                                            std::to_string(protocol::kVersion)));
  }
  return reply;
}

BrokerReply<protocol::ModelResult> BrokerClient::ModelCall(protocol::ModelCall call) {
  return Exchange<protocol::ModelResult>(Kind::kModelCall, std::move(call), Kind::kModelResult);
}

BrokerReply<ToolDecision> BrokerClient::RequestTool(protocol::ToolRequest request) {
  auto sent = Send(Kind::kToolRequest, std::move(request));
  if (auto* failure = std::get_if<BrokerFailure>(&sent)) return *failure;
  ToolDecision out;
  out.request_id = std::get<std::uint64_t>(sent);
  auto reply = Await(out.request_id, Kind::kDecision);
  if (auto* failure = std::get_if<BrokerFailure>(&reply)) return *failure;
  out.decision = std::get<protocol::Decision>(std::get<protocol::Message>(std::move(reply)).body);
  if (out.decision.pending) {
    if (out.decision.verdict != protocol::Verdict::kAsk) {
      return Fail(Failure(BrokerFailure::Kind::kProtocol,
                          "the broker marked a decision pending whose verdict is " +
                              std::string(protocol::VerdictName(out.decision.verdict))));
    }
    // Blocks until the human (or the headless rule) answers; a shutdown may come instead.
    auto approval = Await(out.request_id, Kind::kApproval);
    if (auto* failure = std::get_if<BrokerFailure>(&approval)) return *failure;
    out.approval =
        std::get<protocol::Approval>(std::get<protocol::Message>(std::move(approval)).body);
  }
  return out;
}

BrokerReply<protocol::ResultAck> BrokerClient::ReportResult(protocol::ToolResult result) {
  return Exchange<protocol::ResultAck>(Kind::kToolResult, std::move(result), Kind::kResultAck);
}

BrokerReply<protocol::Ack> BrokerClient::Progress(std::string state, std::string text) {
  return Exchange<protocol::Ack>(Kind::kProgress,
                                 protocol::Progress{std::move(state), std::move(text)}, Kind::kAck);
}

BrokerReply<protocol::Ack> BrokerClient::Finish(std::string outcome, std::string summary) {
  return Exchange<protocol::Ack>(
      Kind::kFinish, protocol::Finish{std::move(outcome), std::move(summary)}, Kind::kAck);
}

}  // namespace cagent::agent
