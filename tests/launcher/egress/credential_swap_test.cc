// Placeholders and their swap (issue 36), on request heads as a sandboxed client writes them:
// bearer and custom headers, Basic credentials (git over HTTPS), query strings, a forward proxy's
// absolute URL with user-info. A placeholder sent to a host its credential is not bound to is
// refused, wherever in the head it hides.
#include "launcher/egress/credential_swap.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace cagent::launcher::egress {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class CredentialSwapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    all_ = {{"gh", MakePlaceholder("ghp_REALGITHUBTOKEN0123456789abcdef0123"),
             "ghp_REALGITHUBTOKEN0123456789abcdef0123"},
            {"npm", MakePlaceholder("npm_REALNPMTOKEN99999999999999999999"),
             "npm_REALNPMTOKEN99999999999999999999"}};
  }
  const SandboxCredential& gh() const { return all_[0]; }
  const SandboxCredential& npm() const { return all_[1]; }

  std::vector<SandboxCredential> all_;
};

TEST_F(CredentialSwapTest, APlaceholderKeepsTheValuesFormButNothingElse) {
  const std::string ph = gh().placeholder;
  EXPECT_TRUE(ph.starts_with("ghp_"));
  EXPECT_EQ(ph.size(), gh().value.size());
  EXPECT_THAT(ph, Not(HasSubstr("REALGITHUBTOKEN")));
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) seen.insert(MakePlaceholder(gh().value));
  EXPECT_EQ(seen.size(), 100U);
  // A short value still gets 32 random characters; an odd value keeps no prefix.
  EXPECT_EQ(MakePlaceholder("abc").size(), 32U);
  EXPECT_TRUE(MakePlaceholder("sk-ant-api03-xyz").starts_with("sk-ant-"));  // up to 12 bytes kept
  EXPECT_EQ(MakePlaceholder("!!!!").find('!'), std::string::npos);
  // With the randomness given, it is a function of it.
  const std::vector<unsigned char> r(64, 7);
  EXPECT_EQ(MakePlaceholder("npm_x", r), MakePlaceholder("npm_x", r));
}

TEST_F(CredentialSwapTest, BearerCustomHeadersAndQueryStringsGetTheRealValue) {
  RequestHead h{"GET",
                "/data?access_token=" + gh().placeholder,
                {{"Host", "api.github.com"},
                 {"Authorization", "Bearer " + gh().placeholder},
                 {"X-Token", gh().placeholder + "," + gh().placeholder}}};
  const SwapResult r = SwapCredentials(h, {&gh()}, all_);
  EXPECT_FALSE(r.misdirected);
  EXPECT_THAT(r.used, ElementsAre("gh"));
  EXPECT_EQ(h.target, "/data?access_token=" + gh().value);
  EXPECT_EQ(h.headers[1].second, "Bearer " + gh().value);
  EXPECT_EQ(h.headers[2].second, gh().value + "," + gh().value);
  EXPECT_EQ(h.headers[0].second, "api.github.com");
}

TEST_F(CredentialSwapTest, BasicCredentialsAreDecodedSwappedAndEncodedAgain) {
  // git sends user:password as Basic; the placeholder is the password.
  RequestHead h{"POST",
                "/org/repo.git/git-upload-pack",
                {{"authorization", "Basic " + Base64Encode("x-access-token:" + gh().placeholder)}}};
  const SwapResult r = SwapCredentials(h, {&gh()}, all_);
  EXPECT_THAT(r.used, ElementsAre("gh"));
  EXPECT_EQ(h.headers[0].second, "Basic " + Base64Encode("x-access-token:" + gh().value));
}

TEST_F(CredentialSwapTest, UserInfoInAForwardProxysUrlIsSwapped) {
  RequestHead h{"GET", "http://bot:" + npm().placeholder + "@registry.test/pkg", {}};
  const SwapResult r = SwapCredentials(h, {&npm()}, all_);
  EXPECT_THAT(r.used, ElementsAre("npm"));
  EXPECT_EQ(h.target, "http://bot:" + npm().value + "@registry.test/pkg");
}

TEST_F(CredentialSwapTest, APlaceholderSentWhereItIsNotBoundIsRefusedWhereverItHides) {
  const std::vector<RequestHead> attempts = {
      {"GET", "/?t=" + gh().placeholder, {}},
      {"GET", "/", {{"Authorization", "Bearer " + gh().placeholder}}},
      {"GET", "/", {{"Cookie", "a=b; t=" + gh().placeholder}}},
      {"GET", "/", {{"Authorization", "Basic " + Base64Encode("u:" + gh().placeholder)}}},
      {"GET", "/", {{"Proxy-Authorization", "basic  " + Base64Encode(gh().placeholder + ":x")}}},
  };
  for (RequestHead h : attempts) {
    const RequestHead before = h;
    // The request goes to a host only npm is bound to.
    const SwapResult r = SwapCredentials(h, {&npm()}, all_);
    ASSERT_TRUE(r.misdirected) << before.target;
    EXPECT_EQ(*r.misdirected, "gh");
    EXPECT_TRUE(r.used.empty());
    EXPECT_EQ(h.target, before.target);
    EXPECT_EQ(h.headers, before.headers);
  }
  // The twin: to the host gh is bound to, the same requests are swapped.
  for (RequestHead h : attempts) {
    EXPECT_FALSE(SwapCredentials(h, {&gh()}, all_).misdirected);
  }
}

TEST_F(CredentialSwapTest, NothingToSwapChangesNothing) {
  RequestHead h{"GET", "/x", {{"Accept", "*/*"}}};
  const RequestHead before = h;
  const SwapResult r = SwapCredentials(h, {&gh(), &npm()}, all_);
  EXPECT_TRUE(r.used.empty());
  EXPECT_FALSE(r.misdirected);
  EXPECT_EQ(h.headers, before.headers);
}

TEST_F(CredentialSwapTest, AValueThatCouldEndAHeaderLineIsNeverWritten) {
  SandboxCredential bad{"bad", MakePlaceholder("tok"), "tok\r\nX-Injected: 1"};
  std::vector<SandboxCredential> all = {bad};
  RequestHead h{"GET", "/", {{"Authorization", "Bearer " + bad.placeholder}}};
  const SwapResult r = SwapCredentials(h, {&all[0]}, all);
  EXPECT_TRUE(r.used.empty());
  EXPECT_EQ(h.headers[0].second, "Bearer " + bad.placeholder);
}

TEST(Base64, RoundTripsAndRefusesWhatIsNotCanonical) {
  const std::vector<std::string> samples = {"",     "f",     "fo",     "foo",
                                            "foob", "fooba", "foobar", std::string("\0\xff", 2)};
  for (const std::string& s : samples) {
    auto back = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(back) << s;
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  for (const char* bad : {"Zm8", "Zm9=", "Z===", "Zm=8", "Zm8=Zm8=", "Zm 8", "Zm8\n"}) {
    EXPECT_FALSE(Base64Decode(bad)) << bad;
  }
  EXPECT_FALSE(Base64Decode(std::string((1U << 16) + 4, 'A')));
}

}  // namespace
}  // namespace cagent::launcher::egress
