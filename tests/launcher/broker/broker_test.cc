// The broker driven by a scripted agent over a real socketpair: every message kind, decisions
// (allow, deny with rule and message, ask with approvals), redaction, and the ways a session ends.
#include "launcher/broker/broker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <regex>

#include "common/json_text.h"
#include "launcher/broker/tool_mapping.h"
#include "tests/launcher/broker/broker_test_util.h"

namespace cagent::launcher::broker::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kSecret = "tok-1234567890-secret";

// The audit entries of `event`.
std::vector<json> Events(const Harness& h, const std::string& event) {
  std::vector<json> out;
  for (const json& e : h.AuditEntries()) {
    if (e.value("event", "") == event) out.push_back(e);
  }
  return out;
}

TEST(Broker, HelloIsAnsweredWithWelcome) {
  Harness h;
  const json w = h.Hello();
  EXPECT_EQ(w["id"], 1);
  EXPECT_EQ(w["run_id"], "run-test");
  EXPECT_EQ(w["workspace"], h.workspace);
  // What "~" means for the agent's own path filter: the run's binding, not the sandbox's HOME.
  EXPECT_EQ(w["home"], kTestHome);
  EXPECT_EQ(w["task"], "fix the failing test");
  EXPECT_EQ(w["policy_name"], "test");
  EXPECT_EQ(w["policy_digest"], "digest-test");
  EXPECT_THAT(w["policy_summary"].get<std::string>(), HasSubstr("network: none"));
  EXPECT_THAT(w["policy_summary"].get<std::string>(), HasSubstr("**/.env"));
  EXPECT_THAT(w["policy_summary"].get<std::string>(), HasSubstr("approvals: on-request"));
  EXPECT_THAT(w["policy_source"].get<std::string>(), HasSubstr("The effective profile 'test'"));
  EXPECT_EQ(w["tools"], json({"read_file", "list_dir", "glob", "grep", "write_file", "edit_file",
                              "run_command", "finish"}));
  EXPECT_EQ(w["model"]["provider"], "fake");
  EXPECT_EQ(w["model"]["name"], "fake-model");
  EXPECT_EQ(w["max_turns"], 60);                       // base: model-turns 60
  EXPECT_EQ(w["command_timeout_ms"], 10 * 60 * 1000);  // base: command-timeout 10m
  EXPECT_EQ(w["command_output_bytes"], 256 * 1024);    // base: command-output 256K
  EXPECT_EQ(Events(h, "hello").size(), 1U);
  EXPECT_EQ(Events(h, "welcome").size(), 1U);
}

TEST(Broker, WelcomeListsOnlyTheToolsTheProfileEnables) {
  HarnessOptions o;
  o.profile = "extends readonly\n";
  Harness h(o);
  const json w = h.Hello();
  const auto tools = w["tools"].get<std::vector<std::string>>();
  EXPECT_THAT(tools, Not(::testing::Contains("write_file")));
  EXPECT_THAT(tools, ::testing::Contains("read_file"));
}

// The agent is told its world up front: the network it has, which commands run, the environment
// the profile sets and the verification its change must pass, so it does not learn them from
// refusals.
TEST(Broker, WelcomeSaysWhatTheProfileMeansForTheAgent) {
  HarnessOptions o;
  o.profile = R"(extends backend
environment { set GOFLAGS -mod=vendor }
verify { run "make test" }
)";
  Harness h(o);
  const std::string summary = h.Hello()["policy_summary"].get<std::string>();
  EXPECT_THAT(summary, HasSubstr("network: loopback only"));
  EXPECT_THAT(summary, HasSubstr("commands: any program may run"));
  EXPECT_THAT(summary, HasSubstr("git push"));  // base's refusals are listed
  EXPECT_THAT(summary, HasSubstr("environment set by the profile: "));
  EXPECT_THAT(summary, HasSubstr("GOFLAGS=-mod=vendor"));
  EXPECT_THAT(summary, HasSubstr("verification: after you finish, cagent runs `make test`"));

  // A strict allow-list says so, and a hosts section names the hosts instead of "loopback".
  HarnessOptions strict;
  strict.profile = "extends readonly\nnetwork loopback\nhosts { allow pypi.org }\n";
  Harness s(strict);
  const std::string strict_summary = s.Hello()["policy_summary"].get<std::string>();
  EXPECT_THAT(strict_summary, HasSubstr("commands: only these may run: "));
  EXPECT_THAT(strict_summary, HasSubstr("network: only through cagent's proxy"));
  EXPECT_THAT(strict_summary, HasSubstr("pypi.org"));
  EXPECT_THAT(strict_summary, Not(HasSubstr("verification:")));
}

TEST(Broker, ModelCallIsRedactedForwardedAndAnswered) {
  Harness h;
  h.Hello();
  h.model.Script(Turn("hi", {}, protocol::Usage{.input_tokens = 100, .output_tokens = 20}));
  auto reply = h.Request(h.Msg(
      "model_call", {{"system", "be brief"},
                     {"messages", {{{"role", "user"}, {"text", std::string("key ") + kSecret}}}}}));
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["type"], "model_result") << reply->dump();
  EXPECT_EQ((*reply)["text"], "hi");
  EXPECT_EQ((*reply)["tool_calls"], json::array());
  EXPECT_EQ((*reply)["stop_reason"], "end");
  EXPECT_EQ((*reply)["usage"]["input_tokens"], 100);
  EXPECT_EQ((*reply)["usage"]["output_tokens"], 20);
  EXPECT_EQ((*reply)["turn"], 1);
  EXPECT_EQ((*reply)["max_turns"], 60);
  EXPECT_EQ((*reply)["max_tokens"], 4096);
  // The provider never saw the secret; it got the conversation and the broker's choices.
  ASSERT_EQ(h.model.requests.size(), 1U);
  const ModelRequest& sent = h.model.requests[0];
  EXPECT_EQ(sent.system, "be brief");
  ASSERT_EQ(sent.messages.size(), 1U);
  EXPECT_THAT(sent.messages[0].text, Not(HasSubstr(kSecret)));
  EXPECT_THAT(sent.messages[0].text, HasSubstr("[REDACTED"));
  EXPECT_EQ(sent.max_tokens, 4096U);
  // The response is in the audit log, so the run can be replayed.
  auto results = Events(h, "model_result");
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0]["detail"]["body"], json({{"text", "hi"}, {"calls", 0}}));
  EXPECT_EQ(results[0]["detail"]["stop_reason"], "end");
  auto calls = Events(h, "model_call");
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0]["detail"]["redactions"], 1);
  EXPECT_EQ(calls[0]["detail"]["max_tokens"], 4096);
  EXPECT_EQ(h.broker->outcome().used.input_tokens, 100U);
  EXPECT_EQ(h.broker->outcome().used.model_turns, 1U);
}

TEST(Broker, SecondConcurrentModelCallIsOutOfOrder) {
  Harness h;
  h.Hello();
  h.model.set_hold(true);
  ASSERT_TRUE(
      h.peer->SendJson(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}})));
  h.peer->Pump(std::chrono::milliseconds(20));
  ASSERT_TRUE(h.model.held());
  auto second = h.Request(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}}));
  ASSERT_TRUE(second);
  EXPECT_EQ((*second)["type"], "error");
  EXPECT_EQ((*second)["code"], "out_of_order");
  EXPECT_EQ((*second)["id"], 3);
  h.model.Complete();
  auto first = h.peer->Recv();
  ASSERT_TRUE(first);
  EXPECT_EQ((*first)["type"], "model_result");
  EXPECT_EQ((*first)["id"], 2);
}

TEST(Broker, ProviderAuthFailureEndsTheRunNamingTheCredential) {
  Harness h;
  h.Hello();
  h.model.Script(ModelError{protocol::ErrorCode::kProviderAuth,
                            "the provider refused the credential (401): check OPENAI_API_KEY"});
  auto reply = h.Request(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}}));
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["type"], "error");
  EXPECT_EQ((*reply)["code"], "provider_auth");
  EXPECT_THAT((*reply)["message"].get<std::string>(), HasSubstr("OPENAI_API_KEY"));
  auto shutdown = h.peer->Recv();
  ASSERT_TRUE(shutdown);
  EXPECT_EQ((*shutdown)["type"], "shutdown");
  EXPECT_EQ((*shutdown)["status"], "failed");
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kFailed);
  EXPECT_THAT(h.ended->reason, HasSubstr("OPENAI_API_KEY"));
}

TEST(Broker, ProviderErrorEndsTheRun) {
  Harness h;
  h.Hello();
  h.model.Script(ModelError{protocol::ErrorCode::kProviderError, "HTTP 503 after 4 retries"});
  auto reply = h.Request(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}}));
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["code"], "provider_error");
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kFailed);
  EXPECT_THAT(h.ended->reason, HasSubstr("HTTP 503"));
}

TEST(Broker, AllowedToolRequestNamesTheRuleAndItsLocation) {
  Harness h;
  h.Hello();
  const json d = h.ToolRequest("read_file", {{"path", "src/main.c"}}, {"src/main.c"});
  EXPECT_EQ(d["type"], "decision");
  EXPECT_EQ(d["verdict"], "allow");
  EXPECT_FALSE(d["pending"].get<bool>());
  EXPECT_FALSE(d["rule"].get<std::string>().empty());
  EXPECT_TRUE(
      std::regex_match(d["location"].get<std::string>(), std::regex(R"(.+\.cagent:\d+:\d+)")))
      << d["location"];
  auto decisions = Events(h, "decision");
  ASSERT_EQ(decisions.size(), 1U);
  EXPECT_EQ(decisions[0]["verdict"], "allow");
  EXPECT_EQ(decisions[0]["actor"], "broker");
  EXPECT_EQ(decisions[0]["tool"], "read_file");
  EXPECT_EQ(decisions[0]["args"], CanonicalDigest(json{{"path", "src/main.c"}}));
  // One entry per decided request: it carries the request (call, turn, paths) and the decision.
  EXPECT_EQ(decisions[0]["detail"]["paths"], json::array({"src/main.c"}));
  EXPECT_EQ(decisions[0]["detail"]["call_id"], "call_1");
  EXPECT_EQ(decisions[0]["detail"]["turn"], 1);
  EXPECT_FALSE(decisions[0]["detail"]["reason"].get<std::string>().empty());
  EXPECT_TRUE(Events(h, "tool_request").empty());
}

TEST(Broker, ARequestAnsweredWithAnErrorInsteadOfADecisionIsRecordedAsItself) {
  HarnessOptions o;
  Budgets budgets;
  budgets.tool_calls = 1;
  o.budgets = budgets;
  Harness h(o);
  h.Hello();
  EXPECT_EQ(h.ToolRequest("read_file", {{"path", "a"}})["verdict"], "allow");
  const json refused = h.ToolRequest("list_dir", json::object(), {"."});
  EXPECT_EQ(refused["code"], "budget_exhausted") << JsonText(refused);
  // The decided request is in its decision; the one the budget refused got no decision, so it
  // has a tool_request entry of its own.
  std::vector<std::string> seen;
  for (const json& e : h.AuditEntries()) {
    const std::string event = e.value("event", "");
    if (event == "decision" || event == "tool_request")
      seen.push_back(event + " " + e.value("tool", ""));
  }
  EXPECT_THAT(seen, ElementsAre("decision read_file", "tool_request list_dir"));
  const auto requests = Events(h, "tool_request");
  ASSERT_EQ(requests.size(), 1U);
  EXPECT_EQ(requests[0]["detail"]["paths"], json::array({"."}));
}

TEST(Broker, DeniedToolRequestNamesRuleLocationAndWhatToDoInstead) {
  Harness h;
  h.Hello();
  const json d = h.ToolRequest("write_file", {{"path", "config/app.yaml"}, {"content", "x"}});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["rule"], "tools: deny write_file edit_file on config/**");
  EXPECT_EQ(d["location"], "test.cagent:6:8");
  const std::string message = d["message"].get<std::string>();
  EXPECT_THAT(message, HasSubstr("Refused: writing config/app.yaml"));
  EXPECT_THAT(message, HasSubstr("tools: deny write_file edit_file on config/**"));
  EXPECT_THAT(message, HasSubstr("under src/"));
  EXPECT_EQ(h.broker->outcome().denials, 1U);
}

TEST(Broker, ResolvedPathsAreDecidedToo) {
  Harness h;
  h.Hello();
  // The model asked for src/settings, which the agent resolved (a symlink) to .env.
  const json d = h.ToolRequest("read_file", {{"path", "src/settings"}}, {".env"});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["rule"], "filesystem: deny **/.env");
  EXPECT_THAT(d["location"].get<std::string>(), HasSubstr("base.cagent:"));
  // Without the resolved path the same request is allowed: the paths list is what catches it.
  const json plain = h.ToolRequest("read_file", {{"path", "src/settings"}});
  EXPECT_EQ(plain["verdict"], "allow");
}

TEST(Broker, UnknownToolIsDeniedListingTheEnabledTools) {
  Harness h;
  h.Hello();
  const json d = h.ToolRequest("delete_everything", json::object());
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["rule"], "unknown tool");
  EXPECT_THAT(d["message"].get<std::string>(), HasSubstr("delete_everything"));
  EXPECT_THAT(d["message"].get<std::string>(),
              HasSubstr("read_file, list_dir, glob, grep, write_file, edit_file, run_command, "
                        "finish"));
}

TEST(Broker, MissingArgumentIsDeniedNamingIt) {
  Harness h;
  h.Hello();
  const json d = h.ToolRequest("write_file", {{"content", "x"}});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["rule"], "arguments");
  EXPECT_THAT(d["message"].get<std::string>(), HasSubstr("\"path\""));
}

TEST(Broker, AskIsPendingThenApprovedByThePerson) {
  Harness h;
  h.Hello();
  const json d = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  EXPECT_EQ(d["verdict"], "ask");
  EXPECT_TRUE(d["pending"].get<bool>());
  EXPECT_EQ(d["rule"], "tools: ask write_file edit_file on **/Cargo.lock");
  const std::uint64_t id = d["id"];
  auto approval = h.peer->Recv();
  ASSERT_TRUE(approval);
  EXPECT_EQ((*approval)["type"], "approval");
  EXPECT_EQ((*approval)["id"], id);
  EXPECT_EQ((*approval)["verdict"], "allow");
  EXPECT_EQ((*approval)["scope"], ApprovalScopeName(ApprovalScope::kOnce));
  ASSERT_EQ(h.approver.requests.size(), 1U);
  EXPECT_EQ(h.approver.requests[0].action, "write_file Cargo.lock");
  EXPECT_EQ(h.approver.requests[0].tool, "write_file");
  EXPECT_EQ(h.approver.requests[0].location, "test.cagent:5:7");
  EXPECT_EQ(h.approver.requests[0].digest,
            CanonicalDigest(json{{"tool", "write_file"},
                                 {"args", {{"path", "Cargo.lock"}, {"content", "x"}}}}));
  EXPECT_EQ(h.broker->outcome().approvals_asked, 1U);
  // The approved call may now report its result.
  const json ack = h.ToolResult(id, true, "wrote 1 byte", {"Cargo.lock"});
  EXPECT_EQ(ack["type"], "result_ack");
  auto approvals = Events(h, "approval");
  ASSERT_EQ(approvals.size(), 1U);
  EXPECT_EQ(approvals[0]["actor"], "operator");
  EXPECT_EQ(approvals[0]["verdict"], "allow");
}

TEST(Broker, AskDeclinedByThePersonIsDeniedAndHasNoResult) {
  Harness h;
  h.Hello();
  h.approver.Script(ApprovalOutcome{false, ApprovalScope::kDenied, "terminal"});
  const json d = h.ToolRequest("run_command", {{"command", "npm install left-pad"}});
  EXPECT_EQ(d["verdict"], "ask");
  EXPECT_TRUE(d["pending"].get<bool>());
  auto approval = h.peer->Recv();
  ASSERT_TRUE(approval);
  EXPECT_EQ((*approval)["verdict"], "deny");
  EXPECT_EQ((*approval)["scope"], ApprovalScopeName(ApprovalScope::kDenied));
  EXPECT_THAT((*approval)["message"].get<std::string>(), HasSubstr("operator declined"));
  // "ask npm" names one word: the person is offered the narrower "npm install *".
  ASSERT_EQ(h.approver.requests.size(), 1U);
  EXPECT_EQ(h.approver.requests[0].action, "npm install left-pad");
  EXPECT_EQ(h.approver.requests[0].narrower_pattern, "npm install *");
  const json late = h.ToolResult(d["id"], true, "installed");
  EXPECT_EQ(late["type"], "error");
  EXPECT_EQ(late["code"], "out_of_order");
}

TEST(Broker, RunScopeApprovalIsRememberedForTheSameAction) {
  Harness h;
  h.Hello();
  h.approver.Script(ApprovalOutcome{true, ApprovalScope::kRunExact, "terminal"});
  const json first = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  EXPECT_EQ(first["verdict"], "ask");
  ASSERT_TRUE(h.peer->Recv());  // the approval
  const json second = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  EXPECT_EQ(second["verdict"], "allow");
  EXPECT_EQ(h.approver.requests.size(), 1U);
}

// Issue #13, class 9: an approval bound to the model's arguments alone approved the same
// arguments again after the path had been turned into a symlink to somewhere else.
TEST(Broker, TheSameArgumentsResolvingElsewhereAreADifferentActionToApprove) {
  Harness h;
  h.Hello();
  h.approver.Script(ApprovalOutcome{true, ApprovalScope::kRunExact, "terminal"});
  h.approver.Script(ApprovalOutcome{false, ApprovalScope::kDenied, "terminal"});
  const json args = {{"path", "Cargo.lock"}, {"content", "x"}};
  const json first = h.ToolRequest("write_file", args, {"Cargo.lock"});
  ASSERT_EQ(first["verdict"], "ask");
  ASSERT_TRUE(h.peer->Recv());  // approved for the run
  ASSERT_EQ(h.ToolResult(first["id"], true, "wrote 1 byte")["type"], "result_ack");
  // The same arguments; Cargo.lock is now a link to vendor/Cargo.lock.
  const json second = h.ToolRequest("write_file", args, {"./vendor//Cargo.lock"});
  EXPECT_EQ(second["verdict"], "ask") << "the run-scope approval must not cover it";
  auto declined = h.peer->Recv();
  ASSERT_TRUE(declined);
  EXPECT_EQ((*declined)["verdict"], "deny");
  ASSERT_EQ(h.approver.requests.size(), 2U);
  const ApprovalRequest& a = h.approver.requests[0];
  const ApprovalRequest& b = h.approver.requests[1];
  EXPECT_EQ(a.action, b.action);
  EXPECT_THAT(a.resolved_paths, ElementsAre("Cargo.lock"));
  EXPECT_THAT(b.resolved_paths, ElementsAre("vendor/Cargo.lock")) << "shown normalised";
  EXPECT_NE(a.digest, b.digest);
  EXPECT_EQ(a.digest, CallDigest("write_file", args, {"Cargo.lock"}));

  // Twin: the digest before #13 (tool + arguments) is the same for both, so the book would have
  // let the second through on the first's approval.
  const std::string old_digest = CanonicalDigest(json{{"tool", "write_file"}, {"args", args}});
  ApprovalBook old_book;
  ApprovalRequest old_a = a;
  ApprovalRequest old_b = b;
  old_a.digest = old_b.digest = old_digest;
  old_book.Record(old_a, ApprovalOutcome{true, ApprovalScope::kRunExact, "terminal"});
  EXPECT_TRUE(old_book.Lookup(old_b).has_value()) << "the attack, with the old digest";
  ApprovalBook book;
  book.Record(a, ApprovalOutcome{true, ApprovalScope::kRunExact, "terminal"});
  EXPECT_FALSE(book.Lookup(b).has_value());
}

TEST(Broker, APreApprovedPathDoesNotCoverWhatItResolvesTo) {
  HarnessOptions o;
  o.approval = ApprovalMode::kNever;
  Harness h(o);
  ASSERT_TRUE(h.book.AddPreApproval("write_file: Cargo.lock", "test").ok());
  h.Hello();
  const json args = {{"path", "Cargo.lock"}, {"content", "x"}};
  EXPECT_EQ(h.ToolRequest("write_file", args, {"Cargo.lock"})["verdict"], "allow");
  const json elsewhere = h.ToolRequest("write_file", args, {"crates/core/Cargo.lock"});
  EXPECT_EQ(elsewhere["verdict"], "deny");
  EXPECT_THAT(elsewhere["message"].get<std::string>(), HasSubstr("nobody can approve"));
}

TEST(Broker, ResolvedPathsDoNotChangeTheDigestOfACallWithoutThem) {
  // A pre-approval "sha256:..." printed before #13 for a command stays valid.
  const json args = {{"command", "make deploy"}};
  EXPECT_EQ(CallDigest("run_command", args, {}),
            CanonicalDigest(json{{"tool", "run_command"}, {"args", args}}));
  EXPECT_THAT(ResolvedPaths({"b", "./a", "a", "x//y/.", "", "../up"}),
              ElementsAre(".", "../up", "a", "b", "x/y"));
}

TEST(Broker, TheCallDigestWrittenAsTextIsTheDigestOfTheCallObject) {
  // CallDigest hashes text it writes itself; approvals printed before that bind to the digest of
  // the json object {"tool", "args", "paths"}, so the two must be the same bytes, escapes included.
  const json args = {{"path", "src/\"q\"\u00e9\n.c"}, {"content", "x\ty"}, {"n", 3}};
  for (const std::vector<std::string>& paths : std::vector<std::vector<std::string>>{
           {}, {"a"}, {"b\"c", "d\\e", std::string("bad \xff utf-8"), "\xc3\xa9"}}) {
    const json object = paths.empty()
                            ? json{{"tool", "write_file"}, {"args", args}}
                            : json{{"tool", "write_file"}, {"args", args}, {"paths", paths}};
    EXPECT_EQ(CallDigest("write_file", args, paths), CanonicalDigest(object));
    EXPECT_EQ(CallDigestOfText("write_file", JsonText(args), paths), CanonicalDigest(object));
  }
  EXPECT_EQ(CallDigest("bad \xff tool", args, {}),
            CanonicalDigest(json{{"tool", "bad \xff tool"}, {"args", args}}));
}

TEST(Broker, PreApprovedActionIsAllowedEvenHeadless) {
  HarnessOptions o;
  o.approval = ApprovalMode::kNever;
  Harness h(o);
  ASSERT_TRUE(h.book.AddPreApproval("write_file: **/Cargo.lock", "test").ok());
  h.Hello();
  const json d = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  EXPECT_EQ(d["verdict"], "allow");
  EXPECT_TRUE(h.approver.requests.empty());
}

TEST(Broker, ApproveNeverDeniesWithoutAsking) {
  HarnessOptions o;
  o.approval = ApprovalMode::kNever;
  Harness h(o);
  h.Hello();
  const json d = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_FALSE(d["pending"].get<bool>());
  EXPECT_THAT(d["message"].get<std::string>(), HasSubstr("nobody can approve"));
  EXPECT_TRUE(h.approver.requests.empty());
}

TEST(Broker, ApproveStopEndsTheSessionWithTheActionThatNeedsApproval) {
  HarnessOptions o;
  o.approval = ApprovalMode::kStop;
  Harness h(o);
  h.Hello();
  // What the profile allows outright goes through as usual.
  EXPECT_EQ(h.ToolRequest("read_file", {{"path", "src/main.c"}}, {"src/main.c"})["verdict"],
            "allow");
  // The first ask is refused to the agent, nobody is asked, and the session ends.
  const json d = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_TRUE(h.approver.requests.empty());
  auto shutdown = h.peer->Recv();
  ASSERT_TRUE(shutdown);
  EXPECT_EQ((*shutdown)["type"], "shutdown");
  EXPECT_EQ((*shutdown)["status"], "needs-approval");
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kNeedsApproval);
  ASSERT_TRUE(h.ended->needs_approval);
  EXPECT_EQ(h.ended->needs_approval->tool, "write_file");
  EXPECT_THAT(h.ended->needs_approval->action, HasSubstr("Cargo.lock"));
  EXPECT_EQ(h.ended->needs_approval->digest.size(), 64U);
  EXPECT_THAT(h.ended->reason, HasSubstr("needs approval"));

  // The recorded digest, given as a pre-approval, lets exactly that action through next time.
  Harness again(o);
  ASSERT_TRUE(again.book.AddPreApproval("sha256:" + h.ended->needs_approval->digest, "test").ok());
  again.Hello();
  EXPECT_EQ(again.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}})["verdict"],
            "allow");
  EXPECT_EQ(again.broker->outcome().status, BrokerOutcome::Status::kRunning);
}

TEST(Broker, NoApproverMeansHeadlessDeny) {
  HarnessOptions o;
  o.with_approver = false;
  Harness h(o);
  h.Hello();
  const json d = h.ToolRequest("run_command", {{"command", "npm install left-pad"}});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_THAT(d["message"].get<std::string>(), HasSubstr("nobody can approve"));
  EXPECT_THAT(d["reason"].get<std::string>(), HasSubstr("denied: no terminal to ask on (rule `"));
}

TEST(Broker, NeverAskProfileDeniesAsks) {
  HarnessOptions o;
  o.profile = std::string(kTestProfile) + "approval never-ask\n";
  o.profile.replace(o.profile.find("approval on-request\n"), 20, "");
  Harness h(o);
  h.Hello();
  const json d = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_TRUE(h.approver.requests.empty());
  // The reason names what decided (the approval mode, and the ask rule), not "the profile asks a
  // person", which the deny would contradict; the audit log records the same.
  const std::string reason = d["reason"].get<std::string>();
  EXPECT_THAT(reason, HasSubstr("denied: approval never-ask (rule `tools: ask"));
  EXPECT_THAT(reason, ::testing::Not(HasSubstr("asks a person")));
  EXPECT_THAT(d["message"].get<std::string>(), HasSubstr("(approval never-ask)"));
  bool audited = false;
  for (const json& e : h.AuditEntries()) {
    if (e.value("event", "") == "decision" && e.value("verdict", "") == "deny") {
      EXPECT_EQ(e["detail"].value("reason", ""), reason);
      audited = true;
    }
  }
  EXPECT_TRUE(audited);
}

TEST(Broker, ApproveNeverNamesTheFlagInTheReason) {
  HarnessOptions o;
  o.approval = ApprovalMode::kNever;
  Harness h(o);
  h.Hello();
  const json d = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_THAT(d["reason"].get<std::string>(),
              HasSubstr("denied: --approve never (rule `tools: ask"));
}

TEST(Broker, ApproveStopStopsUnderNeverAskToo) {
  // With approval never-ask the ask would be denied and the run would go on; --approve stop
  // narrows that: the session ends needs-approval with the action's digest, which a re-run can
  // pre-approve (pre-approvals apply under every approval mode).
  HarnessOptions o;
  o.profile = std::string(kTestProfile) + "approval never-ask\n";
  o.profile.replace(o.profile.find("approval on-request\n"), 20, "");
  o.approval = ApprovalMode::kStop;
  Harness h(o);
  h.Hello();
  const json d = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_THAT(d["reason"].get<std::string>(), HasSubstr("denied: --approve stop"));
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kNeedsApproval);
  ASSERT_TRUE(h.ended->needs_approval);
  Harness again(o);
  ASSERT_TRUE(again.book.AddPreApproval("sha256:" + h.ended->needs_approval->digest, "test").ok());
  again.Hello();
  EXPECT_EQ(again.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}})["verdict"],
            "allow");
}

TEST(Broker, AutoApprovalProfileAllowsAsksUnasked) {
  HarnessOptions o;
  o.profile = kTestProfile;
  o.profile.replace(o.profile.find("on-request"), 10, "auto");
  Harness h(o);
  h.Hello();
  const json d = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  EXPECT_EQ(d["verdict"], "allow");
  EXPECT_THAT(d["reason"].get<std::string>(), HasSubstr("auto"));
  EXPECT_TRUE(h.approver.requests.empty());
}

TEST(Broker, SecondPendingApprovalIsOutOfOrder) {
  Harness h;
  h.Hello();
  h.approver.set_hold(true);
  const json first = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  EXPECT_TRUE(first["pending"].get<bool>());
  const json second = h.ToolRequest("write_file", {{"path", "a/Cargo.lock"}, {"content", "x"}});
  EXPECT_EQ(second["type"], "error");
  EXPECT_EQ(second["code"], "out_of_order");
  h.approver.Complete();
  auto approval = h.peer->Recv();
  ASSERT_TRUE(approval);
  EXPECT_EQ((*approval)["id"], first["id"]);
}

TEST(Broker, ToolResultIsRedactedAndAcked) {
  Harness h;
  h.Hello();
  const json d = h.ToolRequest("read_file", {{"path", "notes.txt"}});
  ASSERT_EQ(d["verdict"], "allow");
  const json ack = h.ToolResult(d["id"], true, std::string("token=") + kSecret + "\n");
  EXPECT_EQ(ack["type"], "result_ack");
  EXPECT_THAT(ack["output"].get<std::string>(), Not(HasSubstr(kSecret)));
  EXPECT_THAT(ack["output"].get<std::string>(), HasSubstr("[REDACTED"));
  // The secret is nowhere in the audit log either.
  std::ifstream in(h.audit_path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(all, Not(HasSubstr(kSecret)));
  EXPECT_EQ(h.broker->outcome().used.output_bytes, 6U + std::string(kSecret).size() + 1U);
}

TEST(Broker, ToolResultForADeniedRequestIsOutOfOrder) {
  Harness h;
  h.Hello();
  const json d = h.ToolRequest("read_file", {{"path", ".env"}});
  ASSERT_EQ(d["verdict"], "deny");
  const json reply = h.ToolResult(d["id"], true, "SECRET=1");
  EXPECT_EQ(reply["type"], "error");
  EXPECT_EQ(reply["code"], "out_of_order");
}

TEST(Broker, ProgressIsAckedAndShown) {
  Harness h;
  h.Hello();
  auto reply = h.Request(h.Msg("progress", {{"state", "tool"}, {"text", "run_command: make"}}));
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["type"], "ack");
  EXPECT_EQ((*reply)["id"], 2);
  bool shown = false;
  for (const auto& e : h.events)
    shown = shown || (e.kind == "progress" && e.text == "tool: run_command: make");
  EXPECT_TRUE(shown);
}

TEST(Broker, FinishIsAckedThenTheConnectionCloses) {
  Harness h;
  h.Hello();
  auto reply = h.Request(h.Msg("finish", {{"outcome", "done"}, {"summary", "fixed it"}}));
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["type"], "ack");
  EXPECT_TRUE(h.peer->WaitClosed());
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.on_end_calls, 1);
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kFinished);
  ASSERT_TRUE(h.ended->finish.has_value());
  EXPECT_EQ(h.ended->finish->summary, "fixed it");
  EXPECT_EQ(h.ended->model_provider, "fake");
  // Nothing after finish is answered: the connection is closed.
  EXPECT_FALSE(h.peer->Recv(std::chrono::milliseconds(50)));
  h.peer->Pump(std::chrono::milliseconds(20));
  EXPECT_EQ(h.on_end_calls, 1);
}

TEST(Broker, StopFromOutsideSendsShutdownAndEndsOnce) {
  Harness h;
  h.Hello();
  h.broker->Stop(BrokerOutcome::Status::kCancelled, "operator pressed Ctrl-C");
  auto shutdown = h.peer->Recv();
  ASSERT_TRUE(shutdown);
  EXPECT_EQ((*shutdown)["type"], "shutdown");
  EXPECT_EQ((*shutdown)["id"], 0);
  EXPECT_EQ((*shutdown)["status"], "cancelled");
  EXPECT_EQ((*shutdown)["reason"], "operator pressed Ctrl-C");
  EXPECT_TRUE(h.peer->WaitClosed());
  ASSERT_TRUE(h.WaitEnded());
  h.broker->Stop(BrokerOutcome::Status::kFailed, "again");
  h.peer->Pump(std::chrono::milliseconds(20));
  EXPECT_EQ(h.on_end_calls, 1);
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kCancelled);
  EXPECT_EQ(h.broker->outcome().reason, "operator pressed Ctrl-C");
}

TEST(Broker, StopCancelsAHeldModelCall) {
  Harness h;
  h.Hello();
  h.model.set_hold(true);
  ASSERT_TRUE(
      h.peer->SendJson(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}})));
  h.peer->Pump(std::chrono::milliseconds(20));
  ASSERT_TRUE(h.model.held());
  h.broker->Stop(BrokerOutcome::Status::kCancelled, "stop");
  EXPECT_EQ(h.model.cancels, 1);
  ASSERT_TRUE(h.WaitEnded());
}

TEST(Broker, StopCancelsAPendingApproval) {
  Harness h;
  h.Hello();
  h.approver.set_hold(true);
  const json d = h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}});
  ASSERT_TRUE(d["pending"].get<bool>());
  h.broker->Stop(BrokerOutcome::Status::kCancelled, "stop");
  EXPECT_EQ(h.approver.cancels, 1);
  auto next = h.peer->Recv();
  ASSERT_TRUE(next);
  EXPECT_EQ((*next)["type"], "shutdown");  // no approval message after the end
  ASSERT_TRUE(h.WaitEnded());
}

TEST(Broker, PeerEofEndsTheRunAsFailed) {
  Harness h;
  h.Hello();
  h.peer->ShutdownWrite();
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kFailed);
  EXPECT_THAT(h.ended->reason, HasSubstr("without finishing"));
}

TEST(Broker, DestroyingTheBrokerWithWorkPendingIsSafe) {
  Harness h;
  h.Hello();
  h.model.set_hold(true);
  ASSERT_TRUE(
      h.peer->SendJson(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}})));
  h.peer->Pump(std::chrono::milliseconds(20));
  h.broker.reset();
  EXPECT_EQ(h.model.cancels, 1);
  // Handlers queued for the destroyed broker run and do nothing.
  h.peer->Pump(std::chrono::milliseconds(20));
  EXPECT_TRUE(h.peer->WaitClosed());
}

TEST(Broker, EveryMessageInAndDecisionOutIsAudited) {
  Harness h;
  h.Hello();
  const json d = h.ToolRequest("read_file", {{"path", "a.txt"}});
  h.ToolResult(d["id"], true, "text");
  h.Request(h.Msg("progress", {{"state", "thinking"}}));
  h.Request(h.Msg("finish", {{"outcome", "done"}}));
  ASSERT_TRUE(h.WaitEnded());
  std::vector<std::string> seen;
  for (const json& e : h.AuditEntries()) {
    seen.push_back(e["actor"].get<std::string>() + ":" + e["event"].get<std::string>());
  }
  EXPECT_THAT(seen, ElementsAre("agent:hello", "broker:welcome", "agent:model_call",
                                "broker:model_result", "broker:decision", "agent:tool_result",
                                "agent:progress", "agent:finish", "broker:shutdown"));
  auto verified = VerifyAuditLog(h.audit_path);
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok) << verified->message;
}

}  // namespace
}  // namespace cagent::launcher::broker::testing
