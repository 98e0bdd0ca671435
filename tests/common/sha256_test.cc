#include "common/sha256.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>

#include "common/sha256_engine.h"

namespace cagent {

// For gtest's messages about the parameterised tests below.
void PrintTo(Sha256Engine engine, std::ostream* os) {
  *os << (engine == Sha256Engine::kShaNi ? "ShaNi" : "Portable");
}

namespace {

// The state is inline: nothing to free, nothing a move could leave dangling (issue 37 took the
// heap-allocated libcrypto context out).
static_assert(std::is_trivially_destructible_v<Sha256>);
static_assert(std::is_nothrow_move_constructible_v<Sha256>);
static_assert(!std::is_copy_constructible_v<Sha256>);

// The reference: OpenSSL's libcrypto, which computed these digests before issue 37.
std::string LibcryptoHex(std::string_view data) {
  std::array<std::uint8_t, 32> digest{};
  unsigned int size = 0;
  EXPECT_EQ(EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr), 1);
  EXPECT_EQ(size, 32U);
  std::string hex(64, '\0');
  Sha256ToHex(digest, hex.data());
  return hex;
}

std::string RandomBytes(std::mt19937_64& rng, std::size_t size) {
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

// `data` through one Sha256, fed in chunks of random sizes: mostly short (within a block, across
// a block boundary), sometimes several blocks at once, sometimes empty.
std::string ChunkedHex(std::mt19937_64& rng, std::string_view data) {
  Sha256 sha;
  std::size_t at = 0;
  while (at < data.size()) {
    std::size_t chunk = 0;
    switch (rng() % 4) {
      case 0:
        chunk = 0;
        break;
      case 1:
        chunk = rng() % 8;
        break;
      case 2:
        chunk = rng() % 130;
        break;
      default:
        chunk = rng() % 4096;
        break;
    }
    chunk = std::min(chunk, data.size() - at);
    sha.Update(data.data() + at, chunk);
    at += chunk;
  }
  return sha.FinishHex();
}

// Each test runs once per compression function; the SHA-NI run skips on a CPU without it.
class Sha256EngineTest : public testing::TestWithParam<Sha256Engine> {
 protected:
  void SetUp() override {
    if (!ForceSha256EngineForTesting(GetParam())) {
      GTEST_SKIP() << "this CPU has no SHA extensions (CPUID.7.0:EBX.SHA, SSSE3, SSE4.1)";
    }
    // Otherwise the two runs could be one function tested twice.
    ASSERT_EQ(ActiveSha256Engine(), GetParam());
  }
  void TearDown() override {
    ForceSha256EngineForTesting(Sha256ShaNiAvailable() ? Sha256Engine::kShaNi
                                                       : Sha256Engine::kPortable);
  }
};

// FIPS 180-4's examples (NIST's "SHA256.pdf", "SHA2_Additional.pdf"): the empty message, one
// block, two blocks (448 bits: the padding needs a second block), the 896-bit message, and one
// million 'a'.
TEST_P(Sha256EngineTest, NistVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                      "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  const std::string million(1000000, 'a');
  EXPECT_EQ(Sha256Hex(million), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  std::mt19937_64 rng(37);
  EXPECT_EQ(ChunkedHex(rng, million),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // One byte at a time: every Update goes through the partial-block path.
  Sha256 bytewise;
  for (char c : million) bytewise.Update(&c, 1);
  EXPECT_EQ(bytewise.FinishHex(),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Every length from 0 to 1000 (all paddings: one or two final blocks, the 0x80 at every offset),
// random bytes, one-shot and in random chunks, against libcrypto.
TEST_P(Sha256EngineTest, EveryLengthUpTo1000MatchesLibcrypto) {
  const std::uint64_t seed = 0x5a256 ^ static_cast<std::uint64_t>(GetParam());
  std::mt19937_64 rng(seed);
  for (std::size_t size = 0; size <= 1000; ++size) {
    const std::string data = RandomBytes(rng, size);
    const std::string expected = LibcryptoHex(data);
    ASSERT_EQ(Sha256Hex(data), expected) << "size " << size << ", seed " << seed;
    ASSERT_EQ(ChunkedHex(rng, data), expected) << "size " << size << ", seed " << seed;
    std::string raw(64, '\0');
    Sha256ToHex(Sha256Digest(data), raw.data());
    ASSERT_EQ(raw, expected) << "size " << size << ", seed " << seed;
  }
}

TEST_P(Sha256EngineTest, LargeInputsMatchLibcrypto) {
  const std::uint64_t seed = 0x1a46e ^ static_cast<std::uint64_t>(GetParam());
  std::mt19937_64 rng(seed);
  for (std::size_t size : {4095UL, 4096UL, 4097UL, 65536UL + 55, (1UL << 20) + 13, 3UL << 20}) {
    const std::string data = RandomBytes(rng, size);
    const std::string expected = LibcryptoHex(data);
    EXPECT_EQ(Sha256Hex(data), expected) << "size " << size << ", seed " << seed;
    for (int split = 0; split < 3; ++split) {
      EXPECT_EQ(ChunkedHex(rng, data), expected) << "size " << size << ", seed " << seed;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, Sha256EngineTest,
                         testing::Values(Sha256Engine::kPortable, Sha256Engine::kShaNi),
                         [](const testing::TestParamInfo<Sha256Engine>& param) {
                           return testing::PrintToString(param.param);
                         });

// Left alone, a process uses the SHA extensions exactly when the CPU has them.
TEST(Sha256, DefaultEngineIsShaNiWhenTheCpuHasIt) {
  EXPECT_EQ(ActiveSha256Engine(),
            Sha256ShaNiAvailable() ? Sha256Engine::kShaNi : Sha256Engine::kPortable);
  EXPECT_TRUE(ForceSha256EngineForTesting(Sha256Engine::kPortable));
  EXPECT_EQ(ActiveSha256Engine(), Sha256Engine::kPortable);
  EXPECT_EQ(ForceSha256EngineForTesting(Sha256Engine::kShaNi), Sha256ShaNiAvailable());
  EXPECT_EQ(ActiveSha256Engine(),
            Sha256ShaNiAvailable() ? Sha256Engine::kShaNi : Sha256Engine::kPortable);
}

TEST(Sha256, IncrementalEqualsOneShotAcrossBlockBoundaries) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i * 7));
  for (std::size_t split : {0UL, 1UL, 55UL, 56UL, 63UL, 64UL, 65UL, 128UL, 299UL, 300UL}) {
    Sha256 h;
    h.Update(std::string_view(data).substr(0, split));
    h.Update(std::string_view(data).substr(split));
    EXPECT_EQ(h.FinishHex(), Sha256Hex(data)) << "split at " << split;
  }
}

TEST(Sha256, DigestHexAndMovedObjectsAgree) {
  const std::string abc_hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  std::string hex(64, '?');
  Sha256ToHex(Sha256Digest("abc"), hex.data());
  EXPECT_EQ(hex, abc_hex);
  EXPECT_EQ(Sha256Hex("abc"), abc_hex);
  // Moved mid-block (the partial block travels with the state) and moved again.
  Sha256 first;
  first.Update("a");
  Sha256 moved(std::move(first));
  moved.Update("bc");
  Sha256 assigned;
  assigned.Update("something else, to be overwritten");
  assigned = std::move(moved);
  EXPECT_EQ(assigned.FinishHex(), abc_hex);
}

}  // namespace
}  // namespace cagent
