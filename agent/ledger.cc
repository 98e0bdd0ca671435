#include "agent/ledger.h"

namespace cagent::agent {

void Ledger::RecordRead(const std::string& path, const std::string& digest) {
  entries_[path] = Entry{digest, false, false};
}

void Ledger::RecordWrite(const std::string& path, const std::string& digest) {
  entries_[path] = Entry{digest, false, false};
}

void Ledger::Invalidate(const std::string& path) {
  auto it = entries_.find(path);
  if (it != entries_.end()) it->second.invalidated = true;
}

void Ledger::MarkAllStale() {
  for (auto& [path, entry] : entries_) entry.maybe_stale = true;
}

Ledger::State Ledger::Check(const std::string& path, const std::string& current_digest) const {
  auto it = entries_.find(path);
  if (it == entries_.end()) return State::kNeverRead;
  if (it->second.invalidated) return State::kInvalidated;
  if (it->second.digest != current_digest) return State::kChanged;
  return State::kFresh;
}

std::optional<std::string> Ledger::Digest(const std::string& path) const {
  auto it = entries_.find(path);
  if (it == entries_.end() || it->second.invalidated) return std::nullopt;
  return it->second.digest;
}

bool Ledger::MaybeStale(const std::string& path) const {
  auto it = entries_.find(path);
  return it != entries_.end() && it->second.maybe_stale;
}

}  // namespace cagent::agent
