// SHA-256 (FIPS 180-4), used for digests both sides need: the audit log's hash chain, approval
// bindings, policy and patch digests, and the agent's read-before-edit ledger. Not for secrets.
// Computed by OpenSSL's libcrypto (its assembly uses the CPU's SHA extensions where present);
// this wrapper only keeps the interface small and never fails: should libcrypto be unable to
// provide SHA-256 at all, the process aborts with a message, since no digest could be trusted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace cagent {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
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
  evp_md_ctx_st* ctx_ = nullptr;
};

// SHA-256 of `data` (one context per thread, reused: no allocation).
std::array<std::uint8_t, 32> Sha256Digest(std::string_view data);
// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

// Lowercase hex of a 32-byte digest, written to `out` (64 characters, no terminator).
void Sha256ToHex(const std::array<std::uint8_t, 32>& digest, char* out);

}  // namespace cagent
