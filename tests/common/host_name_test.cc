// common/host_name.h: the one grammar of hosts that the policy and the egress proxy share. Unit
// cases for each rule, and a differential test against the two normalisers it replaced (the
// policy's, policy/match/hosts.cc, and the proxy's, launcher/egress/http_head.cc, as they were
// before issue #33), kept here verbatim in behaviour: over a large generated set of inputs, the new
// normaliser agrees with each old one except in the classes where the old ones disagreed with
// each other or were wrong, and every such difference is one of those classes.
#include "common/host_name.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tests/common/old_host_names.h"

namespace cagent {
namespace {

using namespace std::string_literals;

TEST(HostNameTest, NamesAreLowercasedWithOneTrailingDotStripped) {
  EXPECT_EQ(NormalizeHost("PyPI.Org."), "pypi.org");
  EXPECT_EQ(NormalizeHost("localhost"), "localhost");
  EXPECT_EQ(NormalizeHost("a-b.x1.test"), "a-b.x1.test");
  EXPECT_EQ(NormalizeHost("1password.com"), "1password.com");  // digits first are fine
  EXPECT_EQ(NormalizeHost("pypi.org.."), std::nullopt);
  EXPECT_EQ(NormalizeHost("."), std::nullopt);
  EXPECT_EQ(NormalizeHost(""), std::nullopt);
  EXPECT_EQ(NormalizeHost(".a.test"), std::nullopt);
  EXPECT_EQ(NormalizeHost("a..b"), std::nullopt);
}

TEST(HostNameTest, LabelBytesAreLettersDigitsAndInnerHyphens) {
  EXPECT_EQ(NormalizeHost("a_b.test"), std::nullopt);  // '_' is for DNS records, not hosts
  EXPECT_EQ(NormalizeHost("-a.test"), std::nullopt);
  EXPECT_EQ(NormalizeHost("a-.test"), std::nullopt);
  EXPECT_EQ(NormalizeHost("a b.test"), std::nullopt);
  EXPECT_EQ(NormalizeHost("a/b"), std::nullopt);
  EXPECT_EQ(NormalizeHost("b\xc3\xa4r.test"), std::nullopt);  // non-ASCII: use the xn-- form
  EXPECT_EQ(NormalizeHost("xn--br-via.test"), "xn--br-via.test");
}

TEST(HostNameTest, LengthLimits) {
  const std::string label63(63, 'a');
  EXPECT_EQ(NormalizeHost(label63 + ".test"), label63 + ".test");
  EXPECT_EQ(NormalizeHost(std::string(64, 'a') + ".test"), std::nullopt);
  std::string name;  // 253 bytes: 63 + 1 + 63 + 1 + 63 + 1 + 61
  name = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  ASSERT_EQ(name.size(), 253U);
  EXPECT_EQ(NormalizeHost(name), name);
  EXPECT_EQ(NormalizeHost(name + "."), name);
  EXPECT_EQ(NormalizeHost(name + "b"), std::nullopt);
}

// A name whose last label is a number is an IPv4 address to the C library's resolver (inet_aton's
// old forms), so it is no name: the proxy would otherwise pass "1.2.3" on as a name and connect to
// 1.2.0.3, a destination no rule named.
TEST(HostNameTest, ANumericLastLabelIsNoName) {
  for (const char* text : {"1.2.3", "127.1", "2130706433", "1.0x7f", "a.0x", "a.0XFF", "10.0.0.1.",
                           "a.007", "01.02.03.04"}) {
    EXPECT_EQ(NormalizeHost(text), std::nullopt) << text;
    ASSERT_TRUE(CheckHostName(text).has_value()) << text;
    EXPECT_EQ(CheckHostName(text)->fault, HostNameFault::kNumericLast) << text;
  }
  EXPECT_EQ(NormalizeHost("a.0xg"), "a.0xg");  // not hex: a name
  EXPECT_EQ(NormalizeHost("1.2.3.x"), "1.2.3.x");
}

TEST(HostNameTest, Literals) {
  EXPECT_EQ(NormalizeHost("10.0.0.5"), "10.0.0.5");
  EXPECT_EQ(NormalizeHost("010.0.0.5"), std::nullopt);  // octal-looking: neither form
  EXPECT_EQ(NormalizeHost("256.0.0.1"), std::nullopt);
  EXPECT_EQ(NormalizeHost("[0:0::1]"), "::1");
  EXPECT_EQ(NormalizeHost("0:0:0:0:0:0:0:1"), "::1");
  EXPECT_EQ(NormalizeHost("::FFFF:127.0.0.1"), "::ffff:127.0.0.1");
  EXPECT_EQ(NormalizeHost("[10.0.0.5]"), std::nullopt);  // brackets are for IPv6
  EXPECT_EQ(NormalizeHost("[pypi.org]"), std::nullopt);
  EXPECT_EQ(NormalizeHost("https://pypi.org"), std::nullopt);
  EXPECT_TRUE(IsAddressLiteral("10.0.0.5"));
  EXPECT_TRUE(IsAddressLiteral("::1"));
  EXPECT_FALSE(IsAddressLiteral("pypi.org"));
}

// A zone names an interface, not a destination: refused whatever it is, "%0" included (the
// proxy's old check looked at the parsed scope id, which is 0 for "%0").
TEST(HostNameTest, AnIpv6ZoneIsRefused) {
  for (const char* text : {"fe80::1%eth0", "fe80::1%0", "[fe80::1%0]", "::1%1", "[::1%25lo]"}) {
    EXPECT_EQ(NormalizeHost(text), std::nullopt) << text;
  }
}

// inet_pton reads a C string: a NUL inside the text must not cut it to a literal.
TEST(HostNameTest, ANulByteIsNeverALiteralNorAName) {
  for (const std::string& text :
       {"10.0.0.1\0.evil.test"s, "10.0.0.1\0"s, "::1\0x"s, "[::1\0]"s, "pypi.org\0"s, "\0"s}) {
    EXPECT_EQ(NormalizeHost(text), std::nullopt) << "a text of " << text.size() << " bytes";
  }
  EXPECT_FALSE(ParseIpv4Literal("10.0.0.1\0"s).has_value());
  EXPECT_FALSE(ParseIpv6Literal("::1\0"s).has_value());
}

TEST(HostNameTest, ProblemsSayWhereTheyAre) {
  const auto under = CheckHostName("ab.c_d.test");
  ASSERT_TRUE(under.has_value());
  EXPECT_EQ(under->fault, HostNameFault::kBadByte);
  EXPECT_EQ(under->offset, 4U);
  const auto hyphen = CheckHostName("ok.-bad.test");
  ASSERT_TRUE(hyphen.has_value());
  EXPECT_EQ(hyphen->fault, HostNameFault::kHyphenAtEdge);
  EXPECT_EQ(hyphen->offset, 3U);
  EXPECT_EQ(hyphen->length, 4U);
  const auto empty = CheckHostName("a..b");
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->fault, HostNameFault::kEmptyLabel);
  EXPECT_EQ(empty->offset, 2U);
  EXPECT_FALSE(CheckHostName("pypi.org.").has_value());
}

using old_host_names::DifferenceClass;
using old_host_names::OldPolicyNormalize;
using old_host_names::OldProxyNormalize;

// Inputs: every string of up to 3 bytes over a small alphabet that exercises the grammar, seeds
// (real names, literals, edge cases) and random splices and mutations of them (fixed seed).
std::vector<std::string> Inputs() {
  std::vector<std::string> out;
  const std::string alphabet = std::string("a0.-_:[]%Z1") + '\0';
  out.emplace_back();
  for (char a : alphabet) {
    out.emplace_back(1, a);
    for (char b : alphabet) {
      out.push_back(std::string{a, b});
      for (char c : alphabet) out.push_back(std::string{a, b, c});
    }
  }
  const std::vector<std::string> seeds = {"pypi.org",
                                          "PyPI.Org.",
                                          "files.pythonhosted.org",
                                          "localhost",
                                          "a_b-c.test",
                                          "-x.test",
                                          "x-.test",
                                          "1.2.3",
                                          "1.2.3.4",
                                          "1.2.3.4.",
                                          "127.1",
                                          "0x7f.1",
                                          "1.0x7f",
                                          "::1",
                                          "[::1]",
                                          "fe80::1%0",
                                          "fe80::1%eth0",
                                          "::ffff:10.0.0.1",
                                          "010.0.0.1",
                                          "256.1.1.1",
                                          "[10.0.0.1]",
                                          "xn--br-via.de",
                                          "a..b",
                                          ".",
                                          "a.",
                                          "10.0.0.1\0.x"s,
                                          std::string(63, 'a') + ".t",
                                          std::string(64, 'a'),
                                          std::string(250, 'a') + ".io",
                                          "1password.com",
                                          "a.0x",
                                          "2130706433"};
  out.insert(out.end(), seeds.begin(), seeds.end());
  std::mt19937 rng(20261206);
  std::uniform_int_distribution<std::size_t> pick_seed(0, seeds.size() - 1);
  std::uniform_int_distribution<std::size_t> pick_char(0, alphabet.size() - 1);
  for (int i = 0; i < 20000; ++i) {
    std::string s = seeds[pick_seed(rng)];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
      switch (rng() % 4) {
        case 0:
          s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), alphabet[pick_char(rng)]);
          break;
        case 1:
          if (at < s.size()) s.erase(at, 1);
          break;
        case 2:
          if (at < s.size()) s[at] = alphabet[pick_char(rng)];
          break;
        default:
          s = s.substr(0, at) + seeds[pick_seed(rng)];
          break;
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

void Differ(const char* old_name, std::optional<std::string> (*old)(std::string_view),
            std::map<std::string, int>& seen) {
  int unexplained = 0;
  for (const std::string& text : Inputs()) {
    const auto now = NormalizeHost(text);
    const auto before = old(text);
    if (now == before) continue;
    const std::string why = DifferenceClass(text);
    if (why.empty() && ++unexplained <= 10) {
      ADD_FAILURE() << old_name << " and the shared normaliser disagree on '" << text << "' ("
                    << text.size() << " bytes): before " << before.value_or("<no host>") << ", now "
                    << now.value_or("<no host>");
    }
    // Beyond brackets, the new one only ever refuses more: never a host the old one refused,
    // never another normal form.
    if (why != "brackets") {
      EXPECT_FALSE(now.has_value())
          << old_name << " refused '" << text << "' but now it is " << *now;
    }
    ++seen[why];
  }
  EXPECT_EQ(unexplained, 0) << old_name << ": differences outside the known classes";
}

TEST(HostNameDifferentialTest, AgreesWithThePolicysOldNormaliserButForNulAndHexLabels) {
  std::map<std::string, int> seen;
  Differ("the policy's old normaliser", OldPolicyNormalize, seen);
  // The old policy refused '_', '%', hyphens at the edges and all-digit last labels already; it
  // took "10.0.0.1\0..." for 10.0.0.1 and a 0x last label for a name.
  EXPECT_GT(seen["NUL byte"], 0);
  EXPECT_GT(seen["numeric last label"], 0);
  EXPECT_EQ(seen["underscore"], 0);
  EXPECT_EQ(seen["hyphen at a label's edge"], 0);
}

TEST(HostNameDifferentialTest, AgreesWithTheProxysOldNormaliserButForTheKnownClasses) {
  std::map<std::string, int> seen;
  Differ("the proxy's old normaliser", OldProxyNormalize, seen);
  // Each class is real: the proxy passed such hosts on and the policy could not name them.
  for (const char* why :
       {"underscore", "hyphen at a label's edge", "numeric last label", "IPv6 zone"}) {
    EXPECT_GT(seen[why], 0) << "no input of class '" << why << "' differed";
  }
}

}  // namespace
}  // namespace cagent
