// The no-network view's nsswitch.conf rewrite and the hint lines (issue #32): which ways to allow a
// host each case names, and that a sandbox gets one line per cause however many lookups fail.
#include "launcher/session/network_hint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "launcher/sandbox/egress_view.h"

namespace cagent::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(NsswitchWithoutDnsTest, TakesDnsAndResolveOutOfTheHostsLineOnly) {
  EXPECT_EQ(NsswitchWithoutDns("passwd: files systemd\nhosts:          files dns\n"
                               "networks: files dns\n"),
            "passwd: files systemd\nhosts: files\nnetworks: files dns\n");
  EXPECT_EQ(NsswitchWithoutDns("hosts: files mdns4_minimal [NOTFOUND=return] dns myhostname\n"),
            "hosts: files mdns4_minimal [NOTFOUND=return] myhostname\n");
  // systemd-resolved's line: resolve and its action item go, the rest stays.
  EXPECT_EQ(
      NsswitchWithoutDns("hosts: mymachines resolve [!UNAVAIL=return] files myhostname dns\n"),
      "hosts: mymachines files myhostname\n");
  EXPECT_EQ(NsswitchWithoutDns("hosts: dns\n"), "hosts: files\n");
  EXPECT_EQ(NsswitchWithoutDns("hosts: dns files # a comment\n"), "hosts: files\n");
  EXPECT_EQ(NsswitchWithoutDns("  hosts: files [ NOTFOUND=return ] dns\n"),
            "hosts: files [ NOTFOUND=return ]\n");
  EXPECT_EQ(NsswitchWithoutDns("passwd: files\n"), "passwd: files\nhosts: files\n")
      << "a file without a hosts line gets one (glibc's default would ask DNS)";
  EXPECT_EQ(NsswitchWithoutDns("hosts: files dns\nhosts: dns\n"), "hosts: files\n")
      << "glibc reads the first hosts line; a second one would only confuse a reader";
  EXPECT_EQ(NsswitchWithoutDns(""), "hosts: files\n");
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string EnvValue(const LaunchSpec& spec, const std::string& name) {
  for (const EnvVar& v : spec.env_set) {
    if (v.name == name) return v.value;  // the first of a name wins
  }
  return "(unset)";
}

TEST(NoNetworkViewTest, LoopbackGetsTheStubsListenersAResolvConfAndNoRetries) {
  LaunchSpec spec;
  spec.network = NetworkMode::kLoopback;
  spec.env_set.push_back({"PIP_RETRIES", "2"});  // the profile's own: kept
  std::string file;
  {
    auto view = AddNoNetworkView(spec);
    ASSERT_TRUE(view.ok()) << view.error().Message();
    ASSERT_EQ(spec.net_listeners.size(), 2U);
    EXPECT_EQ(view->proxy_index, kNoListener);
    const NetListener& udp = spec.net_listeners[view->dns_index];
    const NetListener& tcp = spec.net_listeners[view->dns_tcp_index];
    EXPECT_EQ(udp.kind, NetListener::Kind::kUdp);
    EXPECT_EQ(tcp.kind, NetListener::Kind::kTcp);
    EXPECT_EQ(udp.address, "127.0.0.1");
    EXPECT_EQ(tcp.address, "127.0.0.1");
    EXPECT_EQ(udp.port, 53);
    EXPECT_EQ(tcp.port, 53);
    ASSERT_EQ(spec.file_binds.size(), 1U);
    EXPECT_EQ(spec.file_binds[0].target, "/etc/resolv.conf");
    file = spec.file_binds[0].source;
    const std::string text = ReadAll(file);
    EXPECT_THAT(text, HasSubstr("\nnameserver 127.0.0.1\n"));
    EXPECT_THAT(text, HasSubstr("no network beyond loopback"));
    EXPECT_EQ(EnvValue(spec, "npm_config_fetch_retries"), "0");
    EXPECT_EQ(EnvValue(spec, "PIP_RETRIES"), "2");
  }
  EXPECT_NE(::access(file.c_str(), F_OK), 0) << "the view's files are removed with it";
}

TEST(NoNetworkViewTest, NoneGetsNoListenersAndAnNsswitchWithoutDns) {
  LaunchSpec spec;
  spec.network = NetworkMode::kNone;
  spec.env_pass.push_back("NPM_CONFIG_FETCH_RETRIES");  // the caller's, passed: kept
  auto view = AddNoNetworkView(spec);
  ASSERT_TRUE(view.ok()) << view.error().Message();
  EXPECT_TRUE(spec.net_listeners.empty());
  EXPECT_EQ(view->dns_index, kNoListener);
  ASSERT_GE(spec.file_binds.size(), 1U);
  EXPECT_EQ(spec.file_binds[0].target, "/etc/resolv.conf");
  EXPECT_THAT(ReadAll(spec.file_binds[0].source), Not(HasSubstr("nameserver")));
  if (::access("/etc/nsswitch.conf", R_OK) == 0) {
    ASSERT_EQ(spec.file_binds.size(), 2U);
    EXPECT_EQ(spec.file_binds[1].target, "/etc/nsswitch.conf");
    EXPECT_THAT(ReadAll(spec.file_binds[1].source), Not(HasSubstr(" dns")));
  }
  EXPECT_EQ(EnvValue(spec, "npm_config_fetch_retries"), "(unset)");
  EXPECT_EQ(EnvValue(spec, "PIP_RETRIES"), "0");
}

TEST(NoNetworkViewTest, RefusedWhenTheSandboxSharesTheHostsNetwork) {
  LaunchSpec spec;
  spec.disabled.Add(Layer::kNetNamespace);
  auto view = AddNoNetworkView(spec);
  ASSERT_FALSE(view.ok());
  EXPECT_THAT(view.error().Message(), HasSubstr("shares the host's network"));
  EXPECT_TRUE(spec.file_binds.empty());
}

egress::ConnectionRecord Refused(const std::string& host, std::uint16_t port, egress::RefusedBy by,
                                 const std::string& address = "") {
  egress::ConnectionRecord r;
  r.dest.host = host;
  r.dest.port = port;
  r.refused_by = by;
  r.refused_address = address;
  r.reason = "whatever";
  return r;
}

TEST(NetworkHintTest, ALookupWithoutNetworkNamesTheModeAndTheWaysThatApply) {
  session::NetworkHintContext exec_profile{.profile = "frontend", .exec = true};
  const std::string h = session::LookupRefusedHint(exec_profile, "registry.npmjs.org");
  EXPECT_EQ(h,
            "network: profile 'frontend' has no network beyond loopback (network loopback), so "
            "every name lookup (registry.npmjs.org first) answers \"no such name\"; to let the "
            "command reach a host: a hosts section (docs/policy-language.md, \"hosts\") in the "
            "profile, a -registries profile (--profile backend-registries or "
            "frontend-registries), or cagent exec --allow-host HOST without --profile");
  session::NetworkHintContext exec_default{.exec = true};
  EXPECT_THAT(session::LookupRefusedHint(exec_default, "pypi.org"),
              HasSubstr("cagent exec without a profile has no network beyond loopback"));
  EXPECT_THAT(session::LookupRefusedHint(exec_default, "pypi.org"),
              HasSubstr("host: --allow-host HOST, a -registries profile"));
  session::NetworkHintContext in_run{.profile = "backend", .exec = false};
  const std::string r = session::LookupRefusedHint(in_run, "pypi.org");
  EXPECT_THAT(r, Not(HasSubstr("--allow-host"))) << "cagent run has no --allow-host";
  EXPECT_THAT(r, HasSubstr("or in its setup block, for setup commands"));
}

TEST(NetworkHintTest, FilteredEgressNamesTheRuleToAdd) {
  session::NetworkHintContext ctx{.profile = "ci", .filtered = true, .exec = true};
  EXPECT_EQ(session::LookupRefusedHint(ctx, "evil.test"),
            "network: profile 'ci' reaches only the hosts its hosts section allows (network "
            "loopback with a hosts section), and evil.test is not one of them (its lookup answers "
            "\"no such name\"); to allow it: a rule in the profile's hosts section: allow "
            "evil.test");
  EXPECT_THAT(
      session::ConnectionRefusedHint(ctx, Refused("evil.test", 443, egress::RefusedBy::kPolicy)),
      HasSubstr("evil.test:443 is refused; to allow it: a rule in the profile's hosts section: "
                "allow evil.test:443"));
  session::NetworkHintContext flag{.filtered = true, .allow_host_flag = true, .exec = true};
  EXPECT_THAT(
      session::ConnectionRefusedHint(flag, Refused("evil.test", 443, egress::RefusedBy::kPolicy)),
      HasSubstr("this sandbox reaches only the --allow-host hosts, and evil.test:443 is refused; "
                "to allow it: --allow-host evil.test:443"));
  EXPECT_EQ(
      session::ConnectionRefusedHint(ctx, Refused("evil.test", 443, egress::RefusedBy::kProxy)), "")
      << "a malformed request or a TLS name mismatch is not fixed by a host rule";
}

TEST(NetworkHintTest, AReservedAddressNamesResolveAndARuleForTheAddress) {
  session::NetworkHintContext ctx{.profile = "ci", .filtered = true, .exec = true};
  EXPECT_EQ(session::ConnectionRefusedHint(
                ctx, Refused("pkgs.test", 8080, egress::RefusedBy::kAddress, "127.0.0.2")),
            "network: pkgs.test resolves to 127.0.0.2, a loopback address, which cagent refuses "
            "unless the address is named (against DNS rebinding); to reach it: --resolve "
            "pkgs.test:8080:127.0.0.2, or a rule in the profile's hosts section: allow "
            "127.0.0.2:8080");
  EXPECT_THAT(session::ConnectionRefusedHint(
                  ctx, Refused("meta.test", 80, egress::RefusedBy::kAddress, "169.254.169.254")),
              HasSubstr("a cloud metadata address"));
  EXPECT_THAT(session::ConnectionRefusedHint(
                  ctx, Refused("v6.test", 443, egress::RefusedBy::kAddress, "fd00::1")),
              HasSubstr("--resolve v6.test:443:[fd00::1], or a rule in the profile's hosts "
                        "section: allow [fd00::1]:443"));
  // An address literal: --resolve does not apply, the rule does.
  const std::string literal = session::ConnectionRefusedHint(
      ctx, Refused("10.1.2.3", 22, egress::RefusedBy::kAddress, "10.1.2.3"));
  EXPECT_THAT(literal, HasSubstr("10.1.2.3 is a private address"));
  EXPECT_THAT(literal, Not(HasSubstr("--resolve")));
  EXPECT_THAT(literal, HasSubstr("allow 10.1.2.3:22"));
}

TEST(RefusalTallyTest, OneLinePerCauseHoweverManyRefusals) {
  session::RefusalTally tally(session::NetworkHintContext{.profile = "frontend", .exec = true});
  EXPECT_NE(tally.OnLookupRefused("registry.npmjs.org"), "");
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(tally.OnLookupRefused("registry.npmjs.org"), "") << i;
    EXPECT_EQ(tally.OnLookupRefused("n" + std::to_string(i) + ".test"), "") << i;
  }
  EXPECT_EQ(tally.hints().size(), 1U);
  EXPECT_EQ(tally.lookups_refused(), 101U);
  ASSERT_EQ(tally.refused().size(), session::RefusalTally::kMaxListed);
  EXPECT_EQ(tally.refused()[0], "registry.npmjs.org (lookup)");
  EXPECT_EQ(tally.refused()[1], "n0.test (lookup)");
  // A second cause still gets its own line, once.
  EXPECT_NE(tally.OnConnection(Refused("a.test", 80, egress::RefusedBy::kAddress, "10.0.0.1")), "");
  EXPECT_EQ(tally.OnConnection(Refused("b.test", 80, egress::RefusedBy::kAddress, "10.0.0.2")), "");
  EXPECT_EQ(tally.hints().size(), 2U);
}

TEST(RefusalTallyTest, LocalNamesAreNotRefusalsToExplain) {
  session::RefusalTally tally(session::NetworkHintContext{.profile = "frontend", .exec = true});
  EXPECT_EQ(tally.OnLookupRefused("localhost"), "") << "its AAAA when /etc/hosts has only its A";
  EXPECT_EQ(tally.OnLookupRefused("cagent"), "") << "the sandbox's own hostname";
  EXPECT_EQ(tally.OnLookupRefused("app.localhost"), "");
  EXPECT_TRUE(tally.refused().empty());
  EXPECT_TRUE(tally.hints().empty());
  EXPECT_NE(tally.OnLookupRefused("registry.npmjs.org"), "");
}

TEST(RefusalTallyTest, WithRefusalsAppendsWhatWasRefusedAndTheHint) {
  session::RefusalTally none(session::NetworkHintContext{.profile = "backend"});
  EXPECT_EQ(session::WithRefusals("exit status 1", none), "exit status 1");
  session::RefusalTally tally(session::NetworkHintContext{.profile = "backend"});
  (void)tally.OnLookupRefused("pypi.org");
  (void)tally.OnLookupRefused("files.pythonhosted.org");
  const std::string d = session::WithRefusals("exit status 1", tally);
  EXPECT_THAT(d, ::testing::StartsWith(
                     "exit status 1; refused: pypi.org (lookup), files.pythonhosted.org (lookup); "
                     "network: profile 'backend' has no network beyond loopback"));
}

}  // namespace
}  // namespace cagent::launcher
