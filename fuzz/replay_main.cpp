// Replay driver: runs LLVMFuzzerTestOneInput over every file of the corpus
// directories (or files) given on the command line, so that each fuzz target
// doubles as a normal ctest test with any compiler. Exits non-zero when a
// directory is missing or empty, so a lost corpus cannot pass silently.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::size_t runs = 0;
  auto run_file = [&](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    ++runs;
  };
  for (int i = 1; i < argc; ++i) {
    fs::path p(argv[i]);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) run_file(e.path());
    } else if (fs::is_regular_file(p, ec)) {
      run_file(p);
    } else {
      std::fprintf(stderr, "replay: no such corpus: %s\n", argv[i]);
      return 2;
    }
  }
  // Also run the empty input, which every target must survive.
  LLVMFuzzerTestOneInput(nullptr, 0);
  std::printf("replay: %zu inputs\n", runs);
  return runs == 0 ? 3 : 0;
}
