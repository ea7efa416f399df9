// ccsb-bpfgen — run while building (never installed): builds the two seccomp
// programs ccsb's launch path loads, with libseccomp, and writes them as a
// C++ header, so the programs that include it (ccsb-run, ccsbd, ccsb-init,
// with CCSB_PRECOMPILED_BPF) load them without building them on every launch
// (issue 9: about 1 ms in the launcher and 0.2 ms in ccsb-init):
//   kBaseline         the L6 baseline filter (ccsb/sys/seccomp.hpp
//                     baseline_seccomp_program), and kBaselineSkipped, the
//                     optional entries this architecture lacks;
//   kBroker           the X1 broker's notification filter
//                     (init/broker/filter.hpp build_filter_libseccomp).
//
//   ccsb-bpfgen OUTPUT.hpp
//
// The header is written next to OUTPUT and renamed over it, so a failed run
// leaves no half header behind; any failure to build a program exits 1 with
// the reason, and the build stops (fail closed: no build without the filter).
// The same libseccomp and the same table build the programs at run time
// elsewhere; tests/escape/test_seccomp.cpp holds both to the same bytes.
#include "broker/filter.hpp"
#include "ccsb/sys/seccomp.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

void write_program(std::ostringstream& out, const char* name, const std::vector<sock_filter>& prog) {
  out << "inline constexpr sock_filter " << name << "[] = {\n";
  char line[96];
  for (const auto& f : prog) {
    std::snprintf(line, sizeof line, "    {0x%04x, 0x%02x, 0x%02x, 0x%08x},\n", f.code, f.jt, f.jf, f.k);
    out << line;
  }
  out << "};\n";
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ccsb-bpfgen OUTPUT.hpp\n");
    return 2;
  }
  std::vector<std::string> skipped;
  auto baseline = ccsb::sys::baseline_seccomp_program(&skipped);
  if (!baseline) {
    std::fprintf(stderr, "ccsb-bpfgen: the L6 baseline filter: %s\n", baseline.err().what().c_str());
    return 1;
  }
  auto broker = ccsb::init::build_filter_libseccomp();
  if (!broker) {
    std::fprintf(stderr, "ccsb-bpfgen: the X1 broker filter: %s\n", broker.err().what().c_str());
    return 1;
  }
  std::ostringstream out;
  out << "// Generated while building by ccsb-bpfgen (init/bpfgen.cpp) with " << ccsb::sys::libseccomp_version()
      << ". Do not edit.\n#pragma once\n\n#include <linux/filter.h>\n\n#include <array>\n#include <string_view>\n\n"
      << "namespace ccsb::precompiled {\n\n";
  write_program(out, "kBaseline", *baseline);
  out << "inline constexpr std::array<std::string_view, " << skipped.size() << "> kBaselineSkipped{";
  for (std::size_t i = 0; i < skipped.size(); ++i) out << (i ? ", " : "") << '"' << skipped[i] << '"';
  out << "};\n";
  write_program(out, "kBroker", *broker);
  out << "\n} // namespace ccsb::precompiled\n";
  const std::string path = argv[1], tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << out.str();
    if (!f.flush()) {
      std::fprintf(stderr, "ccsb-bpfgen: cannot write %s\n", tmp.c_str());
      return 1;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::perror("ccsb-bpfgen: rename");
    return 1;
  }
  return 0;
}
