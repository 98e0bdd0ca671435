// Profiles that must fail (STYLE.md "Tests": a folder of inputs that must fail, each with its
// expected first diagnostic, as in kafel and ninja).
//
// Every tests/testdata/bad/NAME.cagent begins with a comment line
//
//   # expect: bad/NAME.cagent:LINE:COL: error: MESSAGE
//
// holding the first line of its rendered diagnostics, sorted. Each file is compiled from memory
// with CompileText under the display name "bad/NAME.cagent" (so the expectation does not depend on
// where the source tree is); `extends` resolves to the built-in profiles. A file without the
// comment, or one that compiles, fails. To add a case: write the file with "# expect: " and the
// line you mean, and run this test.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "policy/language/diagnostics.h"
#include "policy/language/loader.h"

namespace cagent::policy {
namespace {

const std::string kBadDir = std::string(CAGENT_SOURCE_DIR) + "/tests/testdata/bad";
constexpr std::string_view kExpect = "# expect: ";

std::vector<std::string> BadProfiles() {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(kBadDir.c_str())) {
    while (dirent* ent = ::readdir(d)) {
      std::string_view n = ent->d_name;
      if (n.ends_with(".cagent")) names.emplace_back(n);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class BadProfile : public ::testing::TestWithParam<std::string> {};

TEST_P(BadProfile, FailsWithTheExpectedFirstDiagnostic) {
  const std::string text = ReadFile(kBadDir + "/" + GetParam());
  ASSERT_FALSE(text.empty()) << "cannot read " << kBadDir << "/" << GetParam();
  const std::string first_line = text.substr(0, text.find('\n'));
  ASSERT_TRUE(first_line.starts_with(kExpect))
      << GetParam() << " must begin with a line '# expect: <first rendered diagnostic line>'";
  const std::string expected = first_line.substr(kExpect.size());
  ASSERT_FALSE(expected.empty()) << GetParam() << ": the '# expect:' line is empty";

  SearchPath search;  // the built-in profiles only
  Compiled c = CompileText("bad/" + GetParam(), text, search);
  const std::string rendered = RenderAll(*c.sources, c.diags);
  EXPECT_FALSE(c.ok()) << GetParam() << " compiled, but must fail";
  EXPECT_TRUE(c.diags.HasErrors()) << rendered;
  EXPECT_EQ(rendered.substr(0, rendered.find('\n')), expected) << "all diagnostics:\n" << rendered;
}

INSTANTIATE_TEST_SUITE_P(Testdata, BadProfile, ::testing::ValuesIn(BadProfiles()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name =
                               param_info.param.substr(0, param_info.param.rfind('.'));
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(BadProfiles, FolderHoldsTheCases) {
  // Guards against the folder going missing (ValuesIn of nothing runs no test at all).
  EXPECT_GE(BadProfiles().size(), 25U) << "in " << kBadDir;
}

}  // namespace
}  // namespace cagent::policy
