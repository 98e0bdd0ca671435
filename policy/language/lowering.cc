#include "policy/language/lowering.h"

#include "common/money.h"
#include "policy/language/dump.h"

namespace cagent::policy {

Ceiling CeilingOf(const Policy& policy, Limit limit) {
  Ceiling c;
  c.name = std::string(LimitName(limit));
  c.kind = LimitKindOf(limit);
  const LimitValue& v = policy.limit(limit);
  c.currency = v.currency;
  if (v.bounded()) {
    c.value = v.value;
    c.where = "'" + policy.name + "' sets " + c.name + " " + FormatLimit(limit, v) + " at " +
              policy.Where(v.loc);
  }
  return c;
}

std::string FormatValue(LimitKind kind, std::uint64_t value, const std::string& currency) {
  switch (kind) {
    case LimitKind::kDuration:
      return FormatDuration(value);
    case LimitKind::kSize:
      return FormatSize(value);
    case LimitKind::kCount:
      break;
    case LimitKind::kMoney:
      return FormatMoney(value, currency);
  }
  return std::to_string(value);
}

Status CheckLowers(std::string_view flag, const Ceiling& ceiling, std::uint64_t requested) {
  if (!ceiling.value || requested <= *ceiling.value) return Ok{};
  const std::string most = FormatValue(ceiling.kind, *ceiling.value, ceiling.currency);
  const std::string set =
      ceiling.where.empty() ? "the profile sets " + ceiling.name + " " + most : ceiling.where;
  return PlainError(std::string(flag) + " can only lower the profile's limit",
                    FormatValue(ceiling.kind, requested, ceiling.currency) + " asked, but " + set +
                        "; pass at most " + most)
      .WithCode(Error::Code::kInvalidInput);
}

}  // namespace cagent::policy
