// libFuzzer target for an MCP server session (launcher/mcp/protocol/session.h): the frames an MCP
// client sends to `cagent mcp serve` (initialize, tools/list, tools/call, cancellations, answers to
// the server's elicitation requests, anything else), in order, to one Session whose tools answer at
// once, fail, throw, report progress, ask the client (elicitation) or stay in progress.
//
// Input: one byte of knobs (the limits; whether a frame counts as cut by the transport), then
// frames separated by '\n'. Invariants, over everything the session sends: each message is a
// JSON-RPC 2.0 object that serializes and parses back; a response answers a request the client
// sent (its id) or is a refusal with id null, and is related to that same id; an id gets no more
// final responses than requests that used it; a notification is never answered; the calls in
// progress never exceed the limit; after End every call in progress is answered (or was cancelled)
// and nothing is left in progress.
#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_text.h"
#include "launcher/mcp/protocol/jsonrpc.h"
#include "launcher/mcp/protocol/session.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
using nlohmann::json;
namespace mcp = cagent::launcher::mcp;

// Tools named for what they do with the call.
class Handler : public mcp::ToolHandler {
 public:
  std::vector<mcp::ToolDefinition> ListTools() override {
    std::vector<mcp::ToolDefinition> tools;
    for (const char* name : {"finish", "fail", "throw", "progress", "elicit", "hold"}) {
      mcp::ToolDefinition t;
      t.name = name;
      t.description = "a tool of the fuzz target";
      t.input_schema = {{"type", "object"}};
      tools.push_back(std::move(t));
    }
    return tools;
  }

  void Call(std::shared_ptr<mcp::ToolCall> call) override {
    const std::string& name = call->name();
    call->OnCancel([](const std::string&) {});
    if (name == "finish") {
      auto r = mcp::ToolResult::Text(JsonTextOf(call->arguments()));
      if (call->arguments().contains("structured")) r.structured = call->arguments()["structured"];
      call->Finish(std::move(r));
    } else if (name == "fail") {
      call->Fail(mcp::kInvalidParams, "refused: " + JsonTextOf(call->arguments()));
    } else if (name == "throw") {
      throw std::runtime_error("the tool threw");
    } else if (name == "progress") {
      call->Progress(1, 3, "one");
      call->Progress(1, 3, "again (not sent)");
      call->Progress(2, std::nullopt, "two");
      held_.push_back(std::move(call));
    } else if (name == "elicit") {
      std::weak_ptr<mcp::ToolCall> weak = call;
      call->Elicit("may I?", {{"type", "object"}}, [weak](mcp::ElicitReply reply) {
        if (auto c = weak.lock()) {
          c->Finish(mcp::ToolResult::Text(reply.action == mcp::ElicitReply::Action::kAccept
                                              ? JsonTextOf(reply.content)
                                              : "not accepted"));
        }
      });
      held_.push_back(std::move(call));
    } else {
      held_.push_back(std::move(call));
    }
  }

  // Finishes the oldest call held, if any.
  void FinishOne() {
    while (!held_.empty()) {
      auto c = std::move(held_.front());
      held_.erase(held_.begin());
      if (!c->done()) {
        c->Finish(mcp::ToolResult::Text("late"));
        return;
      }
    }
  }

  [[nodiscard]] const std::vector<std::shared_ptr<mcp::ToolCall>>& held() const { return held_; }

 private:
  static std::string JsonTextOf(const json& j) { return cagent::JsonText(j).substr(0, 200); }
  std::vector<std::shared_ptr<mcp::ToolCall>> held_;
};

// What the client sent, for checking the answers: how many requests used each id (as JSON
// text), and how many final responses each id got.
struct ClientSide {
  std::map<std::string, std::size_t> requests;
  std::map<std::string, std::size_t> finals;
};

void NoteClientFrame(std::string_view frame, ClientSide& client) {
  const json j = cagent::ParseJsonText(frame);
  if (j.is_object() && j.contains("method") && j.contains("id")) {
    ++client.requests[cagent::JsonText(j["id"])];
    return;
  }
  // A frame refused unparsed (too deep, too large) is answered to the id a scan finds when the
  // scan also finds a "method" (jsonrpc.h, RpcRefusal): a request by its shape, even when its
  // JSON is broken further on. A response (no "method") never is.
  if (!j.is_discarded() && !j.is_object()) return;
  mcp::RpcIdScanner scanner;
  scanner.Feed(frame);
  if (scanner.saw_method() && scanner.id()) ++client.requests[cagent::JsonText(*scanner.id())];
}

void CheckOutgoing(const mcp::Outgoing& out, ClientSide& client) {
  const json& m = out.message;
  if (std::getenv("CAGENT_FUZZ_VERBOSE") != nullptr) {  // what the session sent, to read a finding
    std::fprintf(stderr, "sent %s (related %s%s)\n", cagent::JsonText(m).c_str(),
                 cagent::JsonText(out.related).c_str(), out.final ? ", final" : "");
  }
  Check(m.is_object());
  Check(m.contains("jsonrpc") && m["jsonrpc"] == "2.0");
  const json again = cagent::ParseJsonText(cagent::JsonText(m));
  Check(again.is_object());
  if (m.contains("method")) {  // the server's own request or notification
    Check(m["method"].is_string());
    Check(!out.final);
    return;
  }
  Check(m.contains("id"));
  Check(m.contains("result") != m.contains("error"));
  if (m.contains("error")) {
    Check(m["error"].is_object() && m["error"]["code"].is_number_integer() &&
          m["error"]["message"].is_string());
  }
  if (m["id"].is_null()) {  // a refusal of a frame whose id could not be read
    Check(out.related.is_null());
    return;
  }
  const std::string id = cagent::JsonText(m["id"]);
  // Never an answer to a notification or to an id the client did not send.
  Check(client.requests.count(id) == 1);
  Check(out.related == m["id"]);
  // No more final responses for an id than requests that used it (an id in use is refused, and
  // the refusal is that request's answer).
  if (out.final) Check(++client.finals[id] <= client.requests[id]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cagent::fuzz::InputReader in(data, size);
  const std::uint8_t knobs = in.Byte();
  mcp::SessionOptions options;
  options.server_version = "0";
  options.max_frame_bytes = (knobs & 1U) != 0 ? 128 : 1U << 16;
  options.max_depth = 1 + (knobs >> 1U) % 8;
  options.max_calls_in_progress = 1 + (knobs >> 4U) % 4;

  boost::asio::io_context io;
  Handler handler;
  ClientSide client;
  std::size_t messages = 0;
  mcp::Session session(io, handler, options, [&](mcp::Outgoing out) {
    CheckOutgoing(out, client);
    ++messages;
  });
  std::string_view rest = in.Rest();
  std::size_t frame_no = 0;
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    const std::string_view frame = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    NoteClientFrame(frame, client);
    const bool cut = frame.size() > options.max_frame_bytes;
    session.Receive(cut ? frame.substr(0, options.max_frame_bytes) : frame, cut);
    io.poll();
    io.restart();
    Check(session.calls_in_progress() <= options.max_calls_in_progress);
    if ((++frame_no & 3U) == 0) handler.FinishOne();  // now and then a held call finishes
  }
  session.End(mcp::kInternalError, "the fuzz input ended");
  io.poll();
  Check(session.ended());
  Check(session.calls_in_progress() == 0);
  for (const auto& c : handler.held()) Check(c->done());
  Check(messages < 1000000);
  return 0;
}
