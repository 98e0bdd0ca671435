// SHA-256 (FIPS 180-4), used for digests both sides need: the audit log's hash chain, approval
// bindings, policy and patch digests, and the agent's read-before-edit ledger. Not for secrets.
// Computed here, without libcrypto (issue 37: the launch path maps no OpenSSL code): a portable
// compression function, and on x86-64 CPUs with the SHA extensions one that uses them, chosen once
// per process (common/sha256_engine.h). Nothing here allocates, fails or holds a resource.
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
  // The state is held inline: moving copies it (104 bytes), and a moved-from object keeps the
  // state it had.
  ~Sha256() = default;
  Sha256(Sha256&& other) noexcept = default;
  Sha256& operator=(Sha256&& other) noexcept = default;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  // Feeds more bytes; may be called any number of times before Finish().
  void Update(const void* data, std::size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // The 32-byte digest. The object must not be updated afterwards.
  std::array<std::uint8_t, 32> Finish();
  // Lowercase hex of Finish().
  std::string FinishHex();

 private:
  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> block_{};  // the bytes of a block not yet compressed
  std::uint64_t length_ = 0;              // bytes fed so far; length_ % 64 of them are in block_
};

// SHA-256 of `data` (no allocation).
std::array<std::uint8_t, 32> Sha256Digest(std::string_view data);
// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

// Lowercase hex of a 32-byte digest, written to `out` (64 characters, no terminator).
void Sha256ToHex(const std::array<std::uint8_t, 32>& digest, char* out);

}  // namespace cagent
