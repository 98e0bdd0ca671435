// SHA-256 throughput: common/sha256.cc (its SHA-NI and portable compression functions) against
// OpenSSL's libcrypto, called the way common/sha256.cc called it before issue 37 (a fetched
// EVP_MD, one reused EVP_MD_CTX, EVP_DigestInit_ex2 + Update + Final per digest), on 64 B (an
// audit entry's argument digest), 4 KiB and 1 MiB (files and patches) of random bytes
// (docs/performance.md, "SHA-256 without libcrypto"). One iteration = one whole digest.
//
//   build/tests/bench/cagent_bench_sha256 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <openssl/evp.h>

#include <cstdint>
#include <random>
#include <string>

#include "common/sha256.h"
#include "common/sha256_engine.h"

namespace {

const std::string& Input(std::size_t size) {
  static std::string data = [] {
    std::mt19937_64 rng(37);
    std::string out(std::size_t{1} << 20, '\0');
    for (char& c : out) c = static_cast<char>(rng());
    return out;
  }();
  static std::string slice;
  slice.assign(data, 0, size);
  return slice;
}

void Ours(benchmark::State& state, cagent::Sha256Engine engine) {
  if (!cagent::ForceSha256EngineForTesting(engine)) {
    state.SkipWithError("this CPU has no SHA extensions");
    return;
  }
  const std::string data = Input(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(cagent::Sha256Digest(data));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
}

void Libcrypto(benchmark::State& state) {
  EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (md == nullptr || ctx == nullptr) {
    state.SkipWithError("libcrypto has no SHA-256");
    return;
  }
  const std::string data = Input(static_cast<std::size_t>(state.range(0)));
  unsigned char digest[32];
  unsigned int size = 0;
  for (auto _ : state) {
    if (EVP_DigestInit_ex2(ctx, md, nullptr) != 1 ||
        EVP_DigestUpdate(ctx, data.data(), data.size()) != 1 ||
        EVP_DigestFinal_ex(ctx, digest, &size) != 1) {
      state.SkipWithError("EVP_Digest* failed");
      break;
    }
    benchmark::DoNotOptimize(digest);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
  EVP_MD_CTX_free(ctx);
  EVP_MD_free(md);
}

void OursShaNi(benchmark::State& state) { Ours(state, cagent::Sha256Engine::kShaNi); }
void OursPortable(benchmark::State& state) { Ours(state, cagent::Sha256Engine::kPortable); }

BENCHMARK(OursShaNi)->Arg(64)->Arg(4096)->Arg(1 << 20);
BENCHMARK(OursPortable)->Arg(64)->Arg(4096)->Arg(1 << 20);
BENCHMARK(Libcrypto)->Arg(64)->Arg(4096)->Arg(1 << 20);

}  // namespace

BENCHMARK_MAIN();
