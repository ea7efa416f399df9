// The egressd binary as built: every coroutine frame that GCC laid out starts
// with the resume and destroy pointers (N8: "no input can crash it").
//
// std::coroutine_handle assumes that layout: from_promise() steps back a fixed
// distance from the promise to find the frame, and resume() calls through the
// frame's first word. GCC 12 sometimes puts the hoisted condition of an `if`
// or `while` whose condition is a co_await (`if (!co_await x) ...`) in front
// of those pointers (a field named __ifcd_N). Such a coroutine then runs its
// first resumption with a frame pointer 8 bytes off, reads a resume index that
// is not one, and lands on the __builtin_unreachable of its dispatch switch:
// SIGILL on the first byte an upstream sends to a close-delimited response,
// taking every tunnel of the session with it. Nothing warns at compile time,
// so this test reads the frame types from the binary's DWARF (readelf) and
// names any coroutine that is laid out that way.
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace etest;

namespace {

struct die {
  int depth = 0;
  std::string tag;
  std::string name;
  std::string producer;
};

// Parses `readelf --debug-dump=info` output into a flat list of DIEs with
// their depth, tag, name and (compile units) producer.
std::vector<die> read_dies(const std::string& text) {
  std::vector<die> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto lt = line.find('<');
    if (lt != std::string::npos && line.find("Abbrev Number:") != std::string::npos) {
      auto gt = line.find('>', lt);
      die d;
      d.depth = std::atoi(line.c_str() + lt + 1);
      auto open = line.find('(', gt);
      auto close = line.find(')', open);
      if (open != std::string::npos && close != std::string::npos) d.tag = line.substr(open + 1, close - open - 1);
      (void)gt;
      out.push_back(d);
      continue;
    }
    if (out.empty()) continue;
    auto attr = [&](const char* name) -> std::optional<std::string> {
      auto at = line.find(name);
      if (at == std::string::npos) return std::nullopt;
      auto colon = line.rfind(": ");
      if (colon == std::string::npos || colon < at) return std::nullopt;
      std::string v = line.substr(colon + 2);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
      return v;
    };
    if (auto n = attr("DW_AT_name")) out.back().name = *n;
    if (line.find("DW_AT_producer") != std::string::npos) out.back().producer = line;
  }
  return out;
}

} // namespace

TEST_CASE("N8: every GCC coroutine frame in egressd starts with its resume and destroy pointers", "[N8][egressd]") {
  require_egressd();
  auto r = run({find_tool("readelf"), "--debug-dump=info", egressd_path()}, 120000);
  REQUIRE(r.exit_code == 0);
  auto dies = read_dies(r.out);
  {
    // No debug information means nothing can be checked: fail, do not pass unseen.
    INFO("egressd has no DWARF compile units: build it with debug information (RelWithDebInfo, -g)");
    REQUIRE(std::count_if(dies.begin(), dies.end(), [](const die& d) { return d.tag == "DW_TAG_compile_unit"; }) > 0);
  }
  std::size_t gcc_units = 0, frames = 0;
  std::vector<std::string> bad;
  bool in_gcc_unit = false;
  for (std::size_t i = 0; i < dies.size(); ++i) {
    const auto& d = dies[i];
    if (d.tag == "DW_TAG_compile_unit") {
      in_gcc_unit = d.producer.find("GNU C++") != std::string::npos;
      if (in_gcc_unit) ++gcc_units;
      continue;
    }
    if (!in_gcc_unit || d.tag != "DW_TAG_structure_type") continue;
    if (d.name.size() < 6 || d.name.compare(d.name.size() - 6, 6, ".Frame") != 0) continue;
    ++frames;
    // The first member (a child one level down) must be the resume pointer.
    std::string first;
    for (std::size_t j = i + 1; j < dies.size() && dies[j].depth > d.depth; ++j)
      if (dies[j].depth == d.depth + 1 && dies[j].tag == "DW_TAG_member") {
        first = dies[j].name;
        break;
      }
    if (first != "_Coro_resume_fn") bad.push_back(d.name.substr(0, 160) + " starts with " + first);
  }
  std::string listed;
  for (const auto& b : bad) listed += "\n  " + b;
  INFO("GCC compile units: " << gcc_units << ", coroutine frames: " << frames << listed);
  if (gcc_units > 0) {
    // Built by GCC: the frames must be there to be checked.
    CHECK(frames > 0);
  } else {
    // Clang lays out coroutine frames in LLVM (no __ifcd fields); nothing to check.
    SUCCEED("egressd was not built by GCC");
  }
  CHECK(bad.empty());
}
