// libFuzzer target for common/sha256.cc against OpenSSL's libcrypto (a differential): issue 37
// replaced libcrypto's SHA-256 with our own, and every digest (audit chain, approvals, patches,
// the agent's ledger) must stay what it was.
//
// Input: one byte N (0..15), N bytes that choose how the message is cut, then the message.
// Invariants, for the portable engine and, where the CPU has it, the SHA-NI one:
//   - the one-shot digest equals libcrypto's;
//   - the message fed in pieces (1..130 bytes, cycled from the N bytes) gives the same digest.
#include <openssl/evp.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/sha256.h"
#include "common/sha256_engine.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cagent::fuzz::InputReader in(data, size);
  const std::string_view cuts = in.Take(in.Byte() % 16U);
  const std::string_view message = in.Rest();

  std::array<std::uint8_t, 32> expected{};
  unsigned int expected_size = 0;
  Check(EVP_Digest(message.data(), message.size(), expected.data(), &expected_size, EVP_sha256(),
                   nullptr) == 1);
  Check(expected_size == expected.size());

  for (const auto engine : {cagent::Sha256Engine::kPortable, cagent::Sha256Engine::kShaNi}) {
    if (!cagent::ForceSha256EngineForTesting(engine)) continue;
    Check(cagent::Sha256Digest(message) == expected);
    cagent::Sha256 sha;
    for (const std::string_view piece : cagent::fuzz::Pieces(message, cuts, 130)) {
      sha.Update(piece);
    }
    Check(sha.Finish() == expected);
  }
  return 0;
}
