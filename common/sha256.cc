// SHA-256 as FIPS 180-4 defines it (sections 4.1.2, 4.2.2, 5.1.1, 5.3.3, 6.2): the message is
// padded to whole 64-byte blocks and each block is compressed into eight 32-bit words of state.
// Two compression functions, one result: a portable one, and on x86-64 one on the CPU's SHA
// extensions, several times faster; which one runs is decided once (Blocks() below).
#include "common/sha256.h"

#include <atomic>
#include <bit>
#include <cstring>

#include "common/sha256_engine.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace cagent {
namespace {

// Compresses `blocks` consecutive 64-byte blocks at `data` into `state`.
using BlocksFn = void (*)(std::uint32_t* state, const std::uint8_t* data, std::size_t blocks);

// FIPS 180-4 section 5.3.3: the first 32 bits of the fractional parts of the square roots of the
// first eight primes.
constexpr std::array<std::uint32_t, 8> kInitialState = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

// Section 4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64
// primes. Aligned for the SHA-NI path's 16-byte loads of four at a time.
alignas(16) constexpr std::uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

std::uint32_t LoadBigEndian32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

void StoreBigEndian32(std::uint32_t v, std::uint8_t* p) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}

// ---- portable (section 6.2.2) ----

// Section 4.1.2's functions. Ch and Maj in forms with one operation fewer than the standard's.
inline std::uint32_t BigSigma0(std::uint32_t x) {
  return std::rotr(x, 2) ^ std::rotr(x, 13) ^ std::rotr(x, 22);
}
inline std::uint32_t BigSigma1(std::uint32_t x) {
  return std::rotr(x, 6) ^ std::rotr(x, 11) ^ std::rotr(x, 25);
}
inline std::uint32_t SmallSigma0(std::uint32_t x) {
  return std::rotr(x, 7) ^ std::rotr(x, 18) ^ (x >> 3);
}
inline std::uint32_t SmallSigma1(std::uint32_t x) {
  return std::rotr(x, 17) ^ std::rotr(x, 19) ^ (x >> 10);
}
inline std::uint32_t Ch(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  return z ^ (x & (y ^ z));
}
inline std::uint32_t Maj(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  return (x & y) | (z & (x | y));
}

// One round, with the eight working variables passed in their rotated order so that no round
// moves them: the caller names them a..h afresh for each of eight consecutive rounds, and only d
// and h change (d += T1; h = T1 + T2, which becomes the next round's a).
inline void Round(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t& d,
                  std::uint32_t e, std::uint32_t f, std::uint32_t g, std::uint32_t& h,
                  std::uint32_t k_plus_w) {
  const std::uint32_t t1 = h + BigSigma1(e) + Ch(e, f, g) + k_plus_w;
  const std::uint32_t t2 = BigSigma0(a) + Maj(a, b, c);
  d += t1;
  h = t1 + t2;
}

void BlocksPortable(std::uint32_t* state, const std::uint8_t* data, std::size_t blocks) {
  for (; blocks > 0; --blocks, data += 64) {
    // The message schedule W, all 64 words, each with its round constant already added.
    std::uint32_t w[64];
    for (int t = 0; t < 16; ++t) w[t] = LoadBigEndian32(data + 4 * t);
    for (int t = 16; t < 64; ++t) {
      w[t] = SmallSigma1(w[t - 2]) + w[t - 7] + SmallSigma0(w[t - 15]) + w[t - 16];
    }
    for (int t = 0; t < 64; ++t) w[t] += kRoundConstants[t];

    std::uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    std::uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int t = 0; t < 64; t += 8) {
      Round(a, b, c, d, e, f, g, h, w[t]);
      Round(h, a, b, c, d, e, f, g, w[t + 1]);
      Round(g, h, a, b, c, d, e, f, w[t + 2]);
      Round(f, g, h, a, b, c, d, e, w[t + 3]);
      Round(e, f, g, h, a, b, c, d, w[t + 4]);
      Round(d, e, f, g, h, a, b, c, w[t + 5]);
      Round(c, d, e, f, g, h, a, b, w[t + 6]);
      Round(b, c, d, e, f, g, h, a, w[t + 7]);
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
  }
}

// ---- x86-64 SHA extensions ----
#if defined(__x86_64__)

// SHA256RNDS2 keeps the state as two vectors, ABEF and CDGH (A in the highest lane), runs two
// rounds on the low two lanes of W+K, and returns the new ABEF; the old ABEF becomes the new CDGH.
// SHA256MSG1 and SHA256MSG2 compute the next four schedule words from the previous sixteen.
__attribute__((target("sha,sse4.1"))) void BlocksShaNi(std::uint32_t* state,
                                                       const std::uint8_t* data,
                                                       std::size_t blocks) {
  // Byte order within each 32-bit lane reversed: the message words are big-endian.
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);

  // state[0..3] = a b c d and state[4..7] = e f g h (lane 0 first) -> ABEF and CDGH.
  const __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state)),
                                         0xB1);  // lanes b a d c
  const __m128i efgh = _mm_shuffle_epi32(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4)), 0x1B);  // lanes h g f e
  __m128i abef = _mm_alignr_epi8(abcd, efgh, 8);                            // lanes f e b a
  __m128i cdgh = _mm_blend_epi16(efgh, abcd, 0xF0);                         // lanes h g d c

  for (; blocks > 0; --blocks, data += 64) {
    const __m128i abef_in = abef;
    const __m128i cdgh_in = cdgh;
    // m[i % 4] holds schedule words 4i .. 4i+3 while rounds 4i .. 4i+3 run.
    __m128i m[4];
    for (int i = 0; i < 4; ++i) {
      m[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * i)),
                              byte_swap);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      if (i >= 4) {
        // W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16] for t = 4i .. 4i+3: MSG1 adds
        // s0(W[t-15]) to W[t-16], the alignr supplies W[t-7], MSG2 adds s1(W[t-2]).
        const __m128i& older = m[(i + 1) % 4];   // W[4i-12 .. 4i-9]
        const __m128i& before = m[(i + 2) % 4];  // W[4i-8 .. 4i-5]
        const __m128i& last = m[(i + 3) % 4];    // W[4i-4 .. 4i-1]
        const __m128i partial =
            _mm_add_epi32(_mm_sha256msg1_epu32(m[i % 4], older), _mm_alignr_epi8(last, before, 4));
        m[i % 4] = _mm_sha256msg2_epu32(partial, last);
      }
      __m128i wk = _mm_add_epi32(
          m[i % 4], _mm_load_si128(reinterpret_cast<const __m128i*>(kRoundConstants + 4 * i)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);  // rounds 4i, 4i+1: cdgh is now ABEF
      wk = _mm_shuffle_epi32(wk, 0x0E);              // the upper two W+K down
      abef = _mm_sha256rnds2_epu32(abef, cdgh, wk);  // rounds 4i+2, 4i+3: back in place
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
  }

  // ABEF and CDGH -> a b c d and e f g h.
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);  // lanes a b e f
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);  // lanes g h c d
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), _mm_alignr_epi8(dchg, feba, 8));
}

bool CpuHasShaNi() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool ssse3 = (ecx & bit_SSSE3) != 0;
  const bool sse41 = (ecx & bit_SSE4_1) != 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool sha = (ebx & bit_SHA) != 0;
  return ssse3 && sse41 && sha;
}

#else

bool CpuHasShaNi() { return false; }

#endif

bool ShaNiAvailable() {
  static const bool available = CpuHasShaNi();
  return available;
}

BlocksFn BlocksFor(Sha256Engine engine) {
#if defined(__x86_64__)
  if (engine == Sha256Engine::kShaNi) return &BlocksShaNi;
#else
  (void)engine;
#endif
  return &BlocksPortable;
}

// The compression function in use; null until the first digest picks one. A relaxed atomic: every
// value it ever holds computes the same digests, and two threads racing to pick store the same.
std::atomic<BlocksFn> g_blocks{nullptr};

BlocksFn Blocks() {
  BlocksFn fn = g_blocks.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    fn = BlocksFor(ShaNiAvailable() ? Sha256Engine::kShaNi : Sha256Engine::kPortable);
    g_blocks.store(fn, std::memory_order_relaxed);
  }
  return fn;
}

}  // namespace

bool Sha256ShaNiAvailable() { return ShaNiAvailable(); }

Sha256Engine ActiveSha256Engine() {
  return Blocks() == &BlocksPortable ? Sha256Engine::kPortable : Sha256Engine::kShaNi;
}

bool ForceSha256EngineForTesting(Sha256Engine engine) {
  if (engine == Sha256Engine::kShaNi && !ShaNiAvailable()) return false;
  g_blocks.store(BlocksFor(engine), std::memory_order_relaxed);
  return true;
}

Sha256::Sha256() : state_(kInitialState) {}

void Sha256::Update(const void* data, std::size_t size) {
  if (size == 0) return;
  const auto* in = static_cast<const std::uint8_t*>(data);
  const std::size_t held = length_ % 64;
  length_ += size;
  const BlocksFn blocks = Blocks();
  if (held > 0) {
    const std::size_t take = size < 64 - held ? size : 64 - held;
    std::memcpy(block_.data() + held, in, take);
    in += take;
    size -= take;
    if (held + take < 64) return;
    blocks(state_.data(), block_.data(), 1);
  }
  if (size >= 64) {
    blocks(state_.data(), in, size / 64);
    in += size - size % 64;
    size %= 64;
  }
  if (size > 0) std::memcpy(block_.data(), in, size);
}

std::array<std::uint8_t, 32> Sha256::Finish() {
  // Section 5.1.1: a 1 bit, zeros up to 56 bytes into a block, then the length in bits as a
  // 64-bit big-endian number.
  const std::uint64_t bits = length_ * 8;
  std::size_t used = length_ % 64;
  block_[used++] = 0x80;
  const BlocksFn blocks = Blocks();
  if (used > 56) {
    std::memset(block_.data() + used, 0, 64 - used);
    blocks(state_.data(), block_.data(), 1);
    used = 0;
  }
  std::memset(block_.data() + used, 0, 56 - used);
  StoreBigEndian32(static_cast<std::uint32_t>(bits >> 32), block_.data() + 56);
  StoreBigEndian32(static_cast<std::uint32_t>(bits), block_.data() + 60);
  blocks(state_.data(), block_.data(), 1);

  std::array<std::uint8_t, 32> digest;
  for (std::size_t i = 0; i < 8; ++i) StoreBigEndian32(state_[i], digest.data() + 4 * i);
  return digest;
}

std::string Sha256::FinishHex() {
  std::string hex(64, '\0');
  Sha256ToHex(Finish(), hex.data());
  return hex;
}

void Sha256ToHex(const std::array<std::uint8_t, 32>& digest, char* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < digest.size(); ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
}

std::array<std::uint8_t, 32> Sha256Digest(std::string_view data) {
  Sha256 sha;
  sha.Update(data);
  return sha.Finish();
}

std::string Sha256Hex(std::string_view data) {
  Sha256 sha;
  sha.Update(data);
  return sha.FinishHex();
}

}  // namespace cagent
