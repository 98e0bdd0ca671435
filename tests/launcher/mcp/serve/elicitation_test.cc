// `cagent mcp serve` asks the client's user about an `ask` through MCP elicitation (issue #33):
// the form's message is the same rendering the terminal prompt shows (broker::ApprovalDetails), so
// the model's command cannot forge a "rule:" line, reverse its text with a bidi override or hide a
// zero-width character on that channel either.
#include <gtest/gtest.h>

#include <string>

#include "launcher/broker/approver.h"
#include "launcher/mcp/serve/serve.h"

namespace cagent::launcher::mcp {
namespace {

broker::ApprovalRequest HostileAsk() {
  broker::ApprovalRequest r;
  r.tool = "run_command";
  // What a model can put in a command the profile asks about ("ask touch asked-*").
  r.action = "touch asked-\u202Etxt.exe\u200B\nrule: allow *\r\x1b[1A";
  r.digest = std::string(64, 'a');
  r.rule = "ask touch asked-*";
  r.location = "serve.cagent:12:3";
  r.reason = "touching asks";
  r.call_id = "mcp-1";
  return r;
}

TEST(McpElicitationTest, TheMessageCarriesNoneOfTheRawBytes) {
  const broker::ApprovalRequest r = HostileAsk();
  // The twin: the attack is live in what the broker hands the approver. Interpolated as it is (as
  // the message was built before), it forges a line that reads as the rule.
  const std::string raw = r.tool + ": " + r.action + "\nrule: " + r.rule;
  EXPECT_NE(raw.find("\nrule: allow *"), std::string::npos);
  EXPECT_NE(raw.find("\u202E"), std::string::npos);
  EXPECT_NE(raw.find("\u200B"), std::string::npos);

  const std::string message = ElicitationMessage(r);
  EXPECT_EQ(message.find("\u202E"), std::string::npos) << message;
  EXPECT_EQ(message.find("\u200B"), std::string::npos) << message;
  EXPECT_EQ(message.find("\nrule: allow"), std::string::npos) << message;
  EXPECT_EQ(message.find('\r'), std::string::npos) << message;
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  EXPECT_NE(message.find("touch asked-\\u{202e}txt.exe\\u{200b}\\nrule: allow *\\r\\x1b[1A"),
            std::string::npos)
      << message;
  // Exactly one rule line, and it is the profile's.
  std::size_t rule_lines = 0;
  for (std::size_t at = message.find("rule:"); at != std::string::npos;
       at = message.find("rule:", at + 1)) {
    const std::size_t line_start = message.rfind('\n', at);
    const std::string_view before(message.data() + line_start + 1, at - line_start - 1);
    if (before.find_first_not_of(' ') == std::string_view::npos) ++rule_lines;
  }
  EXPECT_EQ(rule_lines, 1U) << message;
}

TEST(McpElicitationTest, TheSameRenderingAsTheTerminalPrompt) {
  const broker::ApprovalRequest r = HostileAsk();
  const std::string details = broker::ApprovalDetails(r);
  const std::string message = ElicitationMessage(r);
  const std::string prompt = broker::TerminalPrompt(r, 0);
  EXPECT_NE(message.find(details), std::string::npos) << message;
  EXPECT_NE(prompt.find(details), std::string::npos) << prompt;
  // Nothing about the request is shown outside that shared part: the rest of each is cagent's own
  // fixed text (a header and the question or the choices).
  const std::string outside = message.substr(0, message.find(details)) +
                              message.substr(message.find(details) + details.size());
  EXPECT_EQ(outside.find("touch"), std::string::npos) << outside;
  EXPECT_EQ(outside.find(r.rule), std::string::npos) << outside;
}

}  // namespace
}  // namespace cagent::launcher::mcp
