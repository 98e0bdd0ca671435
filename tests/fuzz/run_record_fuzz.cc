// libFuzzer target for a run's record read back (launcher/run/run_record.h): result.json as
// `cagent runs`, `show`, `rm` and `log` read it (ParseRunResult), then the row `runs` lists, its
// line, `show`'s text and exit code.
//
// Input: the file's bytes. Invariants: a record is a JSON object; nothing throws; the listing is
// one line and `show`'s text holds no control byte but its newlines (every field escaped); the row
// serializes and parses back.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/json_text.h"
#include "launcher/run/run_record.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
namespace run = cagent::launcher::run;

// No byte below 0x20 but '\n', and no DEL: what reaches the terminal is escaped.
bool Printable(std::string_view text) {
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && b != '\n') || b == 0x7f) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto record = run::ParseRunResult(text, "result.json");
  if (!record) {
    Check(!record.error().Message().empty());
    return 0;
  }
  const nlohmann::json& j = *record;
  Check(j.is_object());
  const nlohmann::json row = run::RunRow("run-1", &j);
  const std::string line = run::RunListLine(row, "/home/u");
  Check(Printable(line));
  Check(!line.empty() && line.find('\n') == line.size() - 1);
  Check(cagent::ParseJsonText(cagent::JsonText(row)).is_object());
  Check(Printable(run::RunShowText(j)));
  (void)run::RunShowExitCode(j);
  return 0;
}
