// libFuzzer target for a run's record read back (launcher/run/run_record.h): result.json as
// `cagent runs`, `show`, `rm`, `log`, `apply` and `batch` read it (ParseRunResult, then
// RunRecord::FromJson), then the row `runs` lists, its line, `show`'s text and exit code, and the
// record written again (ToJson).
//
// Input: the file's bytes. Invariants: a record is a JSON object and every object reads as a
// RunRecord; nothing throws; the listing is one line and `show`'s text holds no control byte but
// its newlines (every field escaped); the row serializes and parses back; what a record reads as
// writes out and reads back the same (ToJson . FromJson is stable after one pass).
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
  auto typed = run::RunRecord::FromJson(j);
  Check(typed.ok());
  const run::RunRecord& rec = *typed;
  const nlohmann::json row = run::RunRow("run-1", &rec);
  const std::string line = run::RunListLine(row, "/home/u");
  Check(Printable(line));
  Check(!line.empty() && line.find('\n') == line.size() - 1);
  Check(cagent::ParseJsonText(cagent::JsonText(row)).is_object());
  Check(Printable(run::RunShowText(rec)));
  (void)run::RunShowExitCode(rec);
  const nlohmann::json written = rec.ToJson();
  auto again = run::RunRecord::FromJson(cagent::ParseJsonText(cagent::JsonText(written)));
  Check(again.ok());
  Check(again->ToJson() == written);
  return 0;
}
