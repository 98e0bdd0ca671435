#include "launcher/cli/parse_hint.h"

#include <string_view>
#include <vector>

#include "policy/language/checker.h"

namespace cagent::launcher::cli {
namespace {

// The chain of subcommands the words selected: "cagent policy check" -> the check App.
const CLI::App* Deepest(const CLI::App& app, std::string& path) {
  const CLI::App* cur = &app;
  for (;;) {
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : cur->get_subcommands(
             [](const CLI::App* a) { return !a->get_name().empty() && a->parsed(); })) {
      next = sub;
    }
    if (next == nullptr) return cur;
    path += " " + next->get_name();
    cur = next;
  }
}

// --long names of `app` and of its option groups (nameless subcommands), as typed.
void LongNames(const CLI::App& app, std::vector<std::string>& out) {
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& l : opt->get_lnames()) out.push_back("--" + l);
  }
  for (const CLI::App* group :
       app.get_subcommands([](const CLI::App* a) { return a->get_name().empty(); })) {
    LongNames(*group, out);
  }
}

std::vector<std::string_view> Views(const std::vector<std::string>& names) {
  return {names.begin(), names.end()};
}

std::string Quoted(std::string_view word) {
  std::string out;
  for (const char c : word.substr(0, 64)) {
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  return "'" + out + "'";
}

}  // namespace

std::string ParseErrorHint(const CLI::App& app, const CLI::ParseError& error) {
  std::string path = "cagent";
  const CLI::App* cur = Deepest(app, path);
  if (cur == &app) return "";  // the top level's own words are checked before the parse
  const std::vector<std::string> extras = app.remaining(true);

  // A misspelt option: the first word CLI11 did not take that looks like one.
  std::vector<std::string> options;
  LongNames(*cur, options);
  for (const std::string& w : extras) {
    if (w == "--") break;  // the command's words follow
    if (w.size() < 2 || w[0] != '-' || w == "-") continue;
    const std::string_view whole = w;
    const std::string_view name = whole.substr(0, whole.find('='));
    const std::string guess = policy::DidYouMean(name, Views(options));
    return "unknown option " + Quoted(name) + " for '" + path + "'; " +
           (guess.empty() ? "run '" + path + " --help' for its options"
                          : "did you mean '" + guess + "'?");
  }

  // A misspelt or missing subcommand.
  std::vector<std::string> subcommands;
  for (const CLI::App* sub : cur->get_subcommands(
           [](const CLI::App* a) { return !a->get_name().empty() && !a->get_group().empty(); })) {
    subcommands.push_back(sub->get_name());
  }
  if (subcommands.empty()) return "";
  std::string list;
  for (const auto& s : subcommands) list += (list.empty() ? "" : ", ") + s;
  for (const std::string& w : extras) {
    if (w.empty() || w[0] == '-') continue;
    const std::string guess = policy::DidYouMean(w, Views(subcommands));
    return "unknown subcommand " + Quoted(w) + " of '" + path + "'; " +
           (guess.empty() ? "it has: " + list : "did you mean '" + guess + "'?");
  }
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) {
    return "'" + path + "' needs a subcommand: " + list;
  }
  return "";
}

}  // namespace cagent::launcher::cli
