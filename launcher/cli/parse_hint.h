// What to tell the user when CLI11 refuses a command line below the top level: the subcommand
// the words reached, and the nearest option or subcommand name to a misspelt one
// ("cagent exec --jsn" -> did you mean '--json-file'?; "cagent policy chek" -> 'check'), where
// CLI11 alone says "The following arguments were not expected" or "A subcommand is required".
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace cagent::launcher::cli {

// One line without the "cagent: " prefix, or "" when there is nothing better to say than
// CLI11's own message. `app` is the root after the failed parse.
[[nodiscard]] std::string ParseErrorHint(const CLI::App& app, const CLI::ParseError& error);

}  // namespace cagent::launcher::cli
