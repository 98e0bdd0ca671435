// SHA-256 (FIPS 180-4), used for digests both sides need: the audit log's hash chain, approval
// bindings, policy and patch digests, and the agent's read-before-edit ledger. Not for secrets:
// nothing here is constant-time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cagent {

class Sha256 {
 public:
  Sha256();
  // Feeds more bytes; may be called any number of times before Finish().
  void Update(const void* data, std::size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // The 32-byte digest. The object must not be updated afterwards.
  std::array<std::uint8_t, 32> Finish();
  // Lowercase hex of Finish().
  std::string FinishHex();

 private:
  void Block(const std::uint8_t* block);
  std::array<std::uint32_t, 8> state_{};
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_ = 0;
};

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace cagent
