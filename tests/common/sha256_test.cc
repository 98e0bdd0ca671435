#include "common/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace cagent {
namespace {

// Vectors from FIPS 180-4's examples and the NIST CAVP short/long message sets.
TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
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
  // The one-shot context is reused per thread: a second digest starts afresh.
  EXPECT_EQ(Sha256Hex("abc"), abc_hex);
  Sha256 first;
  first.Update("a");
  Sha256 moved(std::move(first));
  moved.Update("bc");
  Sha256 assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.FinishHex(), abc_hex);
}

}  // namespace
}  // namespace cagent
