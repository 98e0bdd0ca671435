#include "launcher/session/network_hint.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>

#include "launcher/egress/address.h"
#include "policy/match/hosts.h"

namespace cagent::launcher::session {
namespace {

constexpr int kNoRoute = 0;  // nothing allows the host: a lookup, a policy refusal
constexpr int kAddress = 1;  // a non-public address no rule names

std::string Who(const NetworkHintContext& ctx) {
  if (ctx.allow_host_flag) return "this sandbox";
  if (ctx.profile.empty()) return ctx.exec ? "cagent exec without a profile" : "the profile";
  return "profile '" + ctx.profile + "'";
}

// The ways to let a sandbox without network reach a host, those that apply here.
std::string NoNetworkWays(const NetworkHintContext& ctx) {
  const std::string hosts = "a hosts section (docs/policy-language.md, \"hosts\")";
  const std::string registries =
      "a -registries profile (--profile backend-registries or frontend-registries)";
  if (ctx.exec && ctx.profile.empty()) {
    return "--allow-host HOST, " + registries + ", or a profile with " + hosts;
  }
  if (ctx.exec) {
    return hosts + " in the profile, " + registries +
           ", or cagent exec --allow-host HOST without --profile";
  }
  return hosts + " in the profile (or in its setup block, for setup commands), or " + registries;
}

std::string FilteredPrefix(const NetworkHintContext& ctx) {
  if (ctx.allow_host_flag) return "network: this sandbox reaches only the --allow-host hosts";
  return "network: " + Who(ctx) +
         " reaches only the hosts its hosts section allows (network loopback with a hosts "
         "section)";
}

std::string AllowWay(const NetworkHintContext& ctx, const std::string& what) {
  if (ctx.allow_host_flag) return "--allow-host " + what;
  return "a rule in the profile's hosts section: allow " + what;
}

}  // namespace

std::string LookupRefusedHint(const NetworkHintContext& ctx, std::string_view name) {
  const std::string n(name);
  if (!ctx.filtered) {
    return "network: " + Who(ctx) +
           " has no network beyond loopback (network loopback), so every name lookup (" + n +
           " first) answers \"no such name\"; to let the command reach a host: " +
           NoNetworkWays(ctx);
  }
  return FilteredPrefix(ctx) + ", and " + n +
         " is not one of them (its lookup answers \"no such name\"); to allow it: " +
         AllowWay(ctx, n);
}

std::string ConnectionRefusedHint(const NetworkHintContext& ctx,
                                  const egress::ConnectionRecord& r) {
  if (r.allowed || r.dest.host.empty()) return "";
  const std::string where = policy::HostPortText(r.dest.host, r.dest.port);
  if (r.refused_by == egress::RefusedBy::kPolicy) {
    return FilteredPrefix(ctx) + ", and " + where + " is refused" +
           (r.rule.empty() ? std::string() : " (rule " + r.rule + ")") +
           "; to allow it: " + AllowWay(ctx, where);
  }
  if (r.refused_by != egress::RefusedBy::kAddress || r.refused_address.empty()) return "";
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(r.refused_address, ec);
  if (ec) return "";
  const std::string phrase(egress::AddressClassPhrase(egress::Classify(address)));
  const std::string named = policy::HostPortText(r.refused_address, r.dest.port);
  const std::string rule = AllowWay(ctx, named);
  if (policy::IsAddressLiteral(r.dest.host)) {
    return "network: " + r.refused_address + " is " + phrase +
           ", which cagent refuses unless a rule names the address (against DNS rebinding); to "
           "reach it: " +
           rule;
  }
  std::string fix;
  if (ctx.resolve_flag) {
    fix = "--resolve " + where + ":" +
          (address.is_v6() ? "[" + r.refused_address + "]" : r.refused_address) + ", or ";
  }
  return "network: " + r.dest.host + " resolves to " + r.refused_address + ", " + phrase +
         ", which cagent refuses unless the address is named (against DNS rebinding); to reach "
         "it: " +
         fix + rule;
}

std::string RefusalTally::Note(const std::string& what, int cause, const std::string& hint) {
  const std::lock_guard<std::mutex> lock(mu_);
  if (refused_.size() < kMaxListed &&
      std::find(refused_.begin(), refused_.end(), what) == refused_.end()) {
    refused_.push_back(what);
  }
  if (hint.empty() || given_[cause]) return "";
  given_[cause] = true;
  hints_.push_back(hint);
  return hint;
}

std::string RefusalTally::OnLookupRefused(const std::string& name) {
  // A name without a dot (localhost's AAAA when /etc/hosts has only its A, the sandbox's own
  // hostname, a search for a bare word) is no host beyond the sandbox: not a refusal to explain.
  if (name.find('.') == std::string::npos || name.ends_with(".localhost")) return "";
  {
    const std::lock_guard<std::mutex> lock(mu_);
    ++lookups_;
    if (given_[kNoRoute]) {
      // The common case after the first (npm asks dozens of times): no text is made.
      if (refused_.size() >= kMaxListed) return "";
    }
  }
  return Note(name + " (lookup)", kNoRoute, LookupRefusedHint(ctx_, name));
}

std::string RefusalTally::OnConnection(const egress::ConnectionRecord& record) {
  if (record.allowed || record.dest.host.empty()) return "";
  const int cause = record.refused_by == egress::RefusedBy::kAddress ? kAddress : kNoRoute;
  const std::string hint = ConnectionRefusedHint(ctx_, record);
  if (hint.empty()) return "";  // not a refusal a host rule changes: the record says why
  return Note(policy::HostPortText(record.dest.host, record.dest.port), cause, hint);
}

std::vector<std::string> RefusalTally::hints() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return hints_;
}

std::vector<std::string> RefusalTally::refused() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

std::uint64_t RefusalTally::lookups_refused() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return lookups_;
}

std::string WithRefusals(std::string detail, const RefusalTally& tally) {
  const std::vector<std::string> refused = tally.refused();
  if (refused.empty()) return detail;
  detail += "; refused: ";
  for (std::size_t i = 0; i < refused.size(); ++i) {
    if (i > 0) detail += ", ";
    detail += refused[i];
  }
  for (const std::string& h : tally.hints()) detail += "; " + h;
  return detail;
}

}  // namespace cagent::launcher::session
