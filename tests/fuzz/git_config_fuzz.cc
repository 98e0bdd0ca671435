// libFuzzer target for the reader of `git config --list -z` output
// (launcher/guard/git_config_guard.h): after a run, cagent lists the workspace repository's
// configuration, which the sandboxed code could write, and keeps only entries it knows to be
// harmless.
//
// Invariants: an accepted listing is exactly the entries written back (key, then newline and
// value when there is one, then NUL), so nothing is lost or invented between reading and judging;
// every key has a section and a variable and no control byte; judging an entry is deterministic.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "launcher/guard/git_config_guard.h"
#include "tests/fuzz/fuzz_util.h"

using cagent::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view listing(reinterpret_cast<const char*>(data), size);
  const auto entries = cagent::launcher::ParseGitConfigListing(listing);
  if (!entries) {
    Check(!listing.empty());
    return 0;
  }
  std::string written;
  for (const auto& e : *entries) {
    const std::size_t dot = e.key.find('.');
    Check(dot != std::string::npos && dot > 0 && e.key.back() != '.');
    for (const char c : e.key) Check(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
    written += e.key;
    if (e.value) written += "\n" + *e.value;
    written.push_back('\0');
    const bool allowed_new = cagent::launcher::GitConfigEntryAllowed(e, true);
    const bool allowed_old = cagent::launcher::GitConfigEntryAllowed(e, false);
    Check(cagent::launcher::GitConfigEntryAllowed(e, true) == allowed_new);
    Check(cagent::launcher::GitConfigEntryAllowed(e, false) == allowed_old);
  }
  Check(written == listing);
  const auto again = cagent::launcher::ParseGitConfigListing(written);
  Check(again.has_value() && *again == *entries);
  return 0;
}
