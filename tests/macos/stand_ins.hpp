// tests/macos/stand_ins.hpp — the stand-ins of the two programs the macOS
// driver runs (M8, S7), shared by test_driver.cpp (seatbelt_driver through
// the session API) and test_macsim.cpp (ccsb-run-macsim, the launcher with
// every macOS choice made). Shell scripts, 0755 (test_macsim runs them as
// nobody when root):
//   sandbox-exec  checks `-p PROFILE -- COMMAND...` (exit 90 without -p, 91
//                 without --), keeps PROFILE in OUT/profile.sb and its
//                 environment in OUT/env.txt, then runs the command;
//   log           `log stream ... --predicate P` with the session tag at the
//                 end of P (its 5th argument): keeps its argv in
//                 OUT/log_argv.txt and its pid in OUT/log.pid, prints one
//                 denial for that tag and one for another session
//                 (ccsb-other-11111111), then waits like a streaming log.
#pragma once

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

namespace stand_ins {

inline std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void script(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
}

inline void sandbox_exec(const std::string& path, const std::string& out) {
  script(path, "[ \"$1\" = -p ] || exit 90\n"
               "printf '%s' \"$2\" > '" + out + "/profile.sb'\n"
               "[ \"$3\" = -- ] || exit 91\n"
               "env > '" + out + "/env.txt'\n"
               "shift 3\nexec \"$@\"\n");
}

inline void log(const std::string& path, const std::string& out) {
  script(path, "tag=$(printf '%s' \"$5\" | sed 's/.*\"\\(.*\\)\"/\\1/')\n"
               "printf '%s\\n' \"$*\" > '" + out + "/log_argv.txt'\n"
               "echo $$ > '" + out + "/log.pid'\n"
               "printf '{\"eventMessage\":\"Sandbox: cat(7) deny(1) file-read-data "
               "\\\\/Users\\\\/u\\\\/.ssh\\\\/id_rsa\\\\n%s\"}\\n' \"$tag\"\n"
               "printf '{\"eventMessage\":\"Sandbox: cat(8) deny(1) file-read-data \\\\/x\\\\nccsb-other-11111111\"}\\n'\n"
               "exec sleep 30\n");
}

} // namespace stand_ins
