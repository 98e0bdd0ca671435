// issue 36: what a sandbox with credentials sees, through `cagent exec` with a profile whose
// credentials are bound to a host of its hosts section. Checked without the proxy's TLS
// interception (egress_clients_test.cc and the proxy's own tests cover the swap): inside, the
// variable is a placeholder, the file credential's file holds a placeholder, the CA bundle is
// where the variables say, and a scan for the real value finds nothing. The twin runs the same
// scan with the same profile minus its credentials section (the variable passed, the file's
// directory shown): there it finds the value, so the scan can see it.
//
// What the scan covers (a sh script inside the sandbox): /proc/PID/environ and /proc/PID/cmdline
// of every process it can read, and every readable regular file under the view's top-level
// directories except /proc, /sys and /dev (pseudo files: mem, kcore, pagemap) and the host's
// read-only system trees (/usr, /lib*, /bin, /sbin, /opt): these hold over 100,000 files here,
// too slow to grep in a test, and nothing cagent adds to a view is in them (its files are in
// HOME, /tmp, /etc and the credential's own directory, which are scanned). The value searched for
// is read from a file in the sandbox's /tmp, excluded from the scan, so that it never is in a
// command line or an environment the scan reads.
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The value, written in two halves so that this binary's own text never holds it whole (a scan
// of /proc of the test process would otherwise find it... it is not in the sandbox, but keep the
// needle out of every command line anyway). No '-' or '_': MakePlaceholder keeps no prefix.
constexpr char kHalfA[] = "SECRETq7Zk";
constexpr char kHalfB[] = "W3pX9vLm2R";
std::string Value() { return std::string(kHalfA) + kHalfB; }
constexpr char kFileHalfA[] = "FILESECRETa8Q";
constexpr char kFileHalfB[] = "n4Tb6Ke1Ys";

class CredentialViewE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Harness::Get().skip_reason().empty()) GTEST_SKIP() << Harness::Get().skip_reason();
    ws_ = Harness::Get().MakeDir("credview");
    secrets_ = Harness::Get().MakeDir("credview-host");
    WriteFile(secrets_ + "/token", std::string(kFileHalfA) + kFileHalfB + "\n");
  }

  // The profile: loopback with a hosts section, the credential's variable passed by the profile
  // too (the guard's attack), the file credential's directory shown read-only.
  std::string Profile(bool with_credentials) const {
    // Not `extends base`: it scrubs *_TOKEN, and the twin needs the variable passed.
    std::string text =
        "workspace read-write\n"
        "network loopback\n"
        "filesystem {\n  read-only /usr /etc /bin /sbin /lib /lib64 " +
        secrets_ +
        "\n}\n"
        "environment {\n  pass TEST_TOKEN PATH\n}\n"
        "hosts {\n  allow pkgs.test:8443\n}\n";
    if (with_credentials) {
      text +=
          "credentials {\n  tok env TEST_TOKEN for pkgs.test:8443\n"
          "  cfg file " +
          secrets_ + "/token for pkgs.test:8443\n}\n";
    }
    const std::string path = ws_ + (with_credentials ? "/with.cagent" : "/without.cagent");
    WriteFile(path, text);
    return path;
  }

  // Runs `script` in the sandbox with TEST_TOKEN set in cagent's environment, and --pass-env too.
  RunResult Exec(bool with_credentials, const std::string& script) const {
    RunOptions o;
    o.extra_env = {"TEST_TOKEN=" + Value()};
    o.timeout = std::chrono::seconds(240);
    return Harness::Get().Run(
        {"exec", "-w", ws_, "--profile", Profile(with_credentials), "--best-effort", "cgroup",
         "--no-tty", "--pass-env", "TEST_TOKEN", "--resolve", "pkgs.test:8443:127.0.0.2", "--",
         "/bin/sh", "-c", script},
        o);
  }

  // The scan (see the top of the file): prints "FOUND <path>" for each hit, then "scanned".
  static std::string Scan() {
    return std::string("printf '%s%s\\n%s%s\\n' '") + kHalfA + "' '" + kHalfB + "' '" + kFileHalfA +
           "' '" + kFileHalfB +
           "' > /tmp/needle\n"
           "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do\n"
           "  if grep -qaF -f /tmp/needle \"$f\" 2>/dev/null; then echo \"FOUND $f\"; fi\n"
           "done\n"
           "for d in /*; do\n"
           "  case \"$d\" in /proc|/sys|/dev|/usr|/lib|/lib32|/lib64|/libx32|/bin|/sbin|/opt) "
           "continue;; esac\n"
           "  grep -rlsaF -f /tmp/needle \"$d\" 2>/dev/null | grep -v '^/tmp/needle$' | "
           "sed 's/^/FOUND /'\n"
           "done\n"
           "echo scanned\n";
  }

  std::string ws_;
  std::string secrets_;
};

TEST_F(CredentialViewE2eTest, TheSandboxSeesPlaceholdersAndTheBundleAndNoValue) {
  const std::string script =
      "echo \"token=$TEST_TOKEN\"\n"
      "echo \"file=$(cat " +
      secrets_ +
      "/token)\"\n"
      "for v in SSL_CERT_FILE CURL_CA_BUNDLE REQUESTS_CA_BUNDLE GIT_SSL_CAINFO PIP_CERT "
      "NODE_EXTRA_CA_CERTS; do\n"
      "  eval p=\\$$v; echo \"$v=$p\"\n"
      "  if grep -q 'BEGIN CERTIFICATE' \"$p\"; then echo \"$v readable\"; fi\n"
      "done\n"
      "if [ -f /etc/ssl/certs/ca-certificates.crt ] && "
      "tail -c \"$(wc -c < \"$NODE_EXTRA_CA_CERTS\")\" /etc/ssl/certs/ca-certificates.crt | "
      "cmp -s - \"$NODE_EXTRA_CA_CERTS\"; "
      "then echo 'system bundle ends with the CA'; fi\n" +
      Scan();
  const RunResult r = Exec(true, script);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("scanned"));
  EXPECT_THAT(r.out, Not(HasSubstr("FOUND"))) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr(Value())));
  // A placeholder of at least 32 random letters and digits, nothing of the value kept (it has no
  // "_" or "-" for a prefix).
  const auto token = r.out.find("token=");
  ASSERT_NE(token, std::string::npos);
  const std::string placeholder = r.out.substr(token + 6, r.out.find('\n', token) - token - 6);
  EXPECT_GE(placeholder.size(), 32U) << placeholder;
  EXPECT_THAT(placeholder, Not(HasSubstr(kHalfA)));
  const auto file = r.out.find("file=");
  ASSERT_NE(file, std::string::npos);
  const std::string file_placeholder = r.out.substr(file + 5, r.out.find('\n', file) - file - 5);
  EXPECT_GE(file_placeholder.size(), 32U) << file_placeholder;
  EXPECT_NE(file_placeholder, placeholder);
  for (const char* v : {"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO",
                        "PIP_CERT", "NODE_EXTRA_CA_CERTS"}) {
    EXPECT_THAT(r.out, HasSubstr(std::string(v) + " readable")) << r.out;
  }
  EXPECT_THAT(r.out, HasSubstr("SSL_CERT_FILE=/home/cagent/.cagent/ca-bundle.pem"));
  EXPECT_THAT(r.out, HasSubstr("NODE_EXTRA_CA_CERTS=/home/cagent/.cagent/cagent-ca.pem"));
  if (::access("/etc/ssl/certs/ca-certificates.crt", R_OK) == 0) {
    EXPECT_THAT(r.out, HasSubstr("system bundle ends with the CA"));
  }
}

TEST_F(CredentialViewE2eTest, WithoutTheCredentialsSectionTheScanFindsTheValue) {
  // The twin: the same profile, --pass-env and file, minus the credentials section.
  const RunResult r = Exec(false, "echo \"token=$TEST_TOKEN\"\n" + Scan());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("token=" + Value()));
  EXPECT_THAT(r.out, HasSubstr("/environ"));  // the shell's own environment
  EXPECT_THAT(r.out, HasSubstr("FOUND " + secrets_ + "/token"));
}

TEST_F(CredentialViewE2eTest, AProfileWithCredentialsButNoHostsIsRefused) {
  const std::string profile = ws_ + "/nohosts.cagent";
  WriteFile(profile,
            "workspace read-write\nnetwork loopback\n"
            "credentials {\n  tok env TEST_TOKEN for pkgs.test:8443\n}\n");
  RunOptions o;
  o.extra_env = {"TEST_TOKEN=" + Value()};
  const RunResult r = Harness::Get().Run(
      {"exec", "-w", ws_, "--profile", profile, "--no-tty", "--", "/bin/true"}, o);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("need filtered egress"));
  EXPECT_THAT(r.err, Not(HasSubstr(Value())));
}

}  // namespace
}  // namespace cagent::testing
