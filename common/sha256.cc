#include "common/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace cagent {
namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "cagent: SHA-256 unavailable from libcrypto (%s)\n", what);
  std::abort();
}

// Fetched once: an explicit fetch spares every EVP_DigestInit_ex2 the provider lookup an implicit
// EVP_sha256() would repeat. Never freed (it lives as long as the process).
const EVP_MD* Md() {
  static EVP_MD* const md = [] {
    EVP_MD* m = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (m == nullptr) Fail("EVP_MD_fetch");
    return m;
  }();
  return md;
}

EVP_MD_CTX* NewContext() {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) Fail("EVP_MD_CTX_new");
  if (EVP_DigestInit_ex2(ctx, Md(), nullptr) != 1) Fail("EVP_DigestInit_ex2");
  return ctx;
}

void Feed(EVP_MD_CTX* ctx, const void* data, std::size_t size) {
  if (size > 0 && EVP_DigestUpdate(ctx, data, size) != 1) Fail("EVP_DigestUpdate");
}

std::array<std::uint8_t, 32> Final(EVP_MD_CTX* ctx) {
  std::array<std::uint8_t, 32> out{};
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx, out.data(), &n) != 1 || n != out.size()) {
    Fail("EVP_DigestFinal_ex");
  }
  return out;
}

std::string Hex(const std::array<std::uint8_t, 32>& digest) {
  std::string hex(64, '\0');
  Sha256ToHex(digest, hex.data());
  return hex;
}

}  // namespace

Sha256::Sha256() : ctx_(NewContext()) {}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

Sha256::Sha256(Sha256&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(ctx_);
    ctx_ = std::exchange(other.ctx_, nullptr);
  }
  return *this;
}

void Sha256::Update(const void* data, std::size_t size) {
  if (ctx_ == nullptr) Fail("update of a moved-from Sha256");
  Feed(ctx_, data, size);
}

std::array<std::uint8_t, 32> Sha256::Finish() {
  if (ctx_ == nullptr) Fail("finish of a moved-from Sha256");
  return Final(ctx_);
}

std::string Sha256::FinishHex() { return Hex(Finish()); }

void Sha256ToHex(const std::array<std::uint8_t, 32>& digest, char* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < digest.size(); ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
}

std::array<std::uint8_t, 32> Sha256Digest(std::string_view data) {
  // One context per thread, re-initialised per digest: the audit chain and the argument digests
  // hash several short inputs per tool call, and a context allocation each would cost more than
  // hashing them.
  struct Context {
    EVP_MD_CTX* ctx = NewContext();
    Context() = default;
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
    ~Context() { EVP_MD_CTX_free(ctx); }
  };
  thread_local Context local;
  if (EVP_DigestInit_ex2(local.ctx, Md(), nullptr) != 1) Fail("EVP_DigestInit_ex2");
  Feed(local.ctx, data.data(), data.size());
  return Final(local.ctx);
}

std::string Sha256Hex(std::string_view data) { return Hex(Sha256Digest(data)); }

}  // namespace cagent
