// Which compression function Sha256 (common/sha256.h) runs, for its tests and benchmark: both
// engines compute the same digests; only their speed differs. Product code does not include this.
#pragma once

namespace cagent {

enum class Sha256Engine {
  kPortable,  // plain C++, any CPU (FIPS 180-4 section 6.2.2)
  kShaNi,     // x86-64 SHA extensions (SHA256RNDS2, SHA256MSG1/2), with SSE4.1
};

// Whether this CPU (and this build) can run kShaNi: x86-64 with the SHA, SSSE3 and SSE4.1 CPUID
// bits set.
bool Sha256ShaNiAvailable();

// The engine Sha256 uses in this process: kShaNi when available, else kPortable, decided on the
// first digest unless forced.
Sha256Engine ActiveSha256Engine();

// Tests and benchmarks only: makes every later digest in this process use `engine`. Returns false
// (and changes nothing) when `engine` is kShaNi and Sha256ShaNiAvailable() is false. Not to be
// called while another thread is hashing.
bool ForceSha256EngineForTesting(Sha256Engine engine);

}  // namespace cagent
