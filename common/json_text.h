// The one way cagent turns JSON into text (result.json, --json output, listings, the event log).
//
// nlohmann::json::dump() throws type_error 316 on a string that is not valid UTF-8 — and strings
// cagent records come from the workspace (file names git reports), the agent and the model. A
// throw there used to abort a run without its result.json. JsonText never throws: invalid UTF-8
// is replaced by U+FFFD, so the record is always written and always valid JSON.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace cagent {

// `value` serialised; `indent` < 0 = one line, as json::dump. Never throws (an allocation failure
// aside, which terminates as everywhere else).
std::string JsonText(const nlohmann::json& value, int indent = -1) noexcept;

// Appends `text` to `out` as a JSON string (quotes included), with exactly the bytes JsonText
// gives for json(text): the same escapes (\" \\ \b \f \n \r \t, \u00xx for the other controls),
// UTF-8 copied as is, and invalid UTF-8 replaced by U+FFFD. For writers that build a line by hand
// (the audit log) without a json value per field. Never throws.
void AppendJsonString(std::string& out, std::string_view text) noexcept;

// The nesting depth of arrays and objects in the JSON text `text` (brackets inside strings
// skipped), counted without parsing and without recursion, so a hostile `[[[[...` can be refused
// before nlohmann's recursive parser sees it. Stops once the depth exceeds `limit` and returns
// limit + 1. Does not validate the text (a stray closer never takes the count below 0).
std::size_t JsonDepth(std::string_view text, std::size_t limit) noexcept;

// json::parse(text) without exceptions, refusing (a discarded value) a text with a NUL byte:
// nlohmann's lexer takes NUL for the end of the input, so `{"a":1}<NUL>anything` parses as
// {"a":1} (found by fuzzing, issue #33), and a parser that reads the rest differently (the one
// of a sandboxed MCP server, a scanner of the raw text) would see another message. A JSON text
// has no raw NUL (RFC 8259: not outside strings, escaped inside them), so nothing valid is lost.
nlohmann::json ParseJsonText(std::string_view text);

// ParseJsonText(text), refusing first (a discarded value, *too_deep set when
// given) a text nested deeper than `max_depth`. nlohmann parses and destroys without recursion,
// but dump() (so JsonText), copies and comparisons recurse once per level: a value of 100 000
// levels, 200 KB of brackets, overflows the stack in the first of them. Every parse of JSON that
// someone else wrote (a model's answer, a replay file, a record read back) goes through this.
nlohmann::json ParseJsonWithin(std::string_view text, std::size_t max_depth,
                               bool* too_deep = nullptr);

}  // namespace cagent
