// Ledger: read-before-edit bookkeeping of the agent (inside the sandbox).
//
// For each workspace-relative file the model has seen, the SHA-256 of the content it saw. An edit
// is allowed only when the file's current content still has that digest; a file never read (or
// invalidated) cannot be edited in place (write_file of a new file is fine).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

namespace cagent::agent {

class Ledger {
 public:
  // The model saw `path` whose whole content has `digest` (a partial read records the whole
  // file's digest too: the edit check is about the file, not the window).
  void RecordRead(const std::string& path, const std::string& digest);
  // After the agent itself wrote the file: the model knows the new content.
  void RecordWrite(const std::string& path, const std::string& digest);
  // Compaction dropped the file's contents from the context.
  void Invalidate(const std::string& path);
  // A command ran that may have changed anything: every entry must be re-checked; entries whose
  // file still has the recorded digest stay valid (Check compares digests anyway), so this only
  // marks them so the refusal can say why.
  void MarkAllStale();

  enum class State { kFresh, kNeverRead, kInvalidated, kChanged };
  // Compares `current_digest` with what was recorded.
  [[nodiscard]] State Check(const std::string& path, const std::string& current_digest) const;
  [[nodiscard]] std::optional<std::string> Digest(const std::string& path) const;
  // True when a command ran since `path` was last read or written (MarkAllStale): a kChanged
  // refusal can then say the command probably changed it.
  [[nodiscard]] bool MaybeStale(const std::string& path) const;
  // Number of entries (read or written files, invalidated ones included).
  [[nodiscard]] std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string digest;
    bool invalidated = false;
    bool maybe_stale = false;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace cagent::agent
