// libFuzzer target for MCP's JSON-RPC framing (launcher/mcp/protocol/jsonrpc.h): ParseRpcMessage on
// a frame an MCP peer sent, and RpcIdScanner, which reads the id of a frame too large to keep.
//
// Input: one byte choosing the limits and the chunk sizes, then the frame. Invariants: a refusal
// is a parse error or an invalid request, with a null or a valid id; a message has the members
// its kind needs, and the message cagent would build from it (RpcRequest, RpcNotification,
// RpcResult, RpcError) serializes and parses again as the same kind, id and method; a frame over
// the byte limit is refused; the scanner finds the same id however the frame is cut into chunks.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "launcher/mcp/protocol/jsonrpc.h"
#include "launcher/mcp/protocol/session.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
namespace mcp = cagent::launcher::mcp;

nlohmann::json Rebuilt(const mcp::RpcMessage& m) {
  switch (m.kind) {
    case mcp::RpcMessage::Kind::kRequest:
      return mcp::RpcRequest(m.id, m.method, m.params);
    case mcp::RpcMessage::Kind::kNotification:
      return mcp::RpcNotification(m.method, m.params);
    case mcp::RpcMessage::Kind::kResponse:
      break;
  }
  if (m.is_error) {
    return mcp::RpcError(m.id, m.error["code"].get<int>(), m.error["message"].get<std::string>());
  }
  return mcp::RpcResult(m.id, m.result);
}

std::optional<nlohmann::json> Scan(std::string_view text, std::size_t piece) {
  mcp::RpcIdScanner scanner;
  while (!text.empty()) {
    scanner.Feed(text.substr(0, piece));
    text.remove_prefix(std::min(piece, text.size()));
  }
  return scanner.id();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cagent::fuzz::InputReader in(data, size);
  const std::uint8_t knobs = in.Byte();
  const std::string_view frame = in.Rest();
  mcp::RpcLimits limits;
  limits.max_bytes = (knobs & 1U) != 0 ? 256 : 1U << 20;
  limits.max_depth = 1 + (knobs >> 1U) % 16;

  auto parsed = mcp::ParseRpcMessage(frame, limits);
  if (auto* r = std::get_if<mcp::RpcRefusal>(&parsed)) {
    Check(r->code == mcp::kParseError || r->code == mcp::kInvalidRequest);
    Check(!r->message.empty());
    Check(r->id.is_null() || mcp::IsValidRpcId(r->id));
    (void)mcp::RpcError(r->id, r->code, r->message)
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    Check(frame.size() <= limits.max_bytes);
    const mcp::RpcMessage& m = std::get<mcp::RpcMessage>(parsed);
    if (m.kind != mcp::RpcMessage::Kind::kNotification) {
      Check(mcp::IsValidRpcId(m.id) || (m.kind == mcp::RpcMessage::Kind::kResponse && m.is_error));
    }
    if (m.kind != mcp::RpcMessage::Kind::kResponse) {
      Check(m.params.is_null() || m.params.is_object() || m.params.is_array());
    } else if (m.is_error) {
      Check(m.error.is_object() && m.error["code"].is_number_integer() &&
            m.error["message"].is_string());
    }
    const std::string text = Rebuilt(m).dump();  // a parsed value holds only valid UTF-8
    auto again = mcp::ParseRpcMessage(text, mcp::RpcLimits{});
    Check(std::holds_alternative<mcp::RpcMessage>(again));
    const mcp::RpcMessage& m2 = std::get<mcp::RpcMessage>(again);
    Check(m2.kind == m.kind && m2.id == m.id && m2.method == m.method &&
          m2.is_error == m.is_error && m2.params == m.params);
  }

  const auto whole = Scan(frame, frame.size() + 1);
  if (whole) Check(mcp::IsValidRpcId(*whole));
  Check(Scan(frame, 1) == whole);
  Check(Scan(frame, 1 + (knobs % 13)) == whole);
  return 0;
}
