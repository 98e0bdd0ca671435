// Runs a libFuzzer target over files, without libFuzzer: for GCC builds, for CTest over the seed
// corpus, and for replaying a crash input under a debugger.
//
// Usage: <binary> PATH...   where each PATH is a file or a directory (its regular files, not
// recursively, in name order). Exits 0 when every input ran, 1 if a path could not be read or no
// input was found. A crash or abort in the target ends the process, as under libFuzzer.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

bool RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    (void)std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  (void)std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    (void)std::fprintf(stderr, "usage: %s FILE_OR_DIRECTORY...\n", argv[0]);
    return 1;
  }
  bool ok = true;
  std::size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(arg, ec)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      if (ec) {
        (void)std::fprintf(stderr, "replay: cannot list %s: %s\n", arg.c_str(),
                           ec.message().c_str());
        ok = false;
        continue;
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        ok = RunFile(f) && ok;
        ++count;
      }
    } else {
      ok = RunFile(arg) && ok;
      ++count;
    }
  }
  if (count == 0) {
    (void)std::fprintf(stderr, "replay: no inputs found\n");
    return 1;
  }
  (void)std::fprintf(stderr, "replay: ran %zu input(s)%s\n", count, ok ? "" : ", some unreadable");
  return ok ? 0 : 1;
}
