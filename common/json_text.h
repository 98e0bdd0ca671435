// The one way cagent turns JSON into text (result.json, --json output, listings, the event log).
//
// nlohmann::json::dump() throws type_error 316 on a string that is not valid UTF-8 — and strings
// cagent records come from the workspace (file names git reports), the agent and the model. A
// throw there used to abort a run without its result.json. JsonText never throws: invalid UTF-8
// is replaced by U+FFFD, so the record is always written and always valid JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace cagent {

// `value` serialised; `indent` < 0 = one line, as json::dump. Never throws (an allocation failure
// aside, which terminates as everywhere else).
std::string JsonText(const nlohmann::json& value, int indent = -1) noexcept;

}  // namespace cagent
