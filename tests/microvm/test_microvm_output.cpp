// The guest's output against a caller that does not read (X4; docs/microvm.md
// "Exec relay"): the launcher does not hoard it (the session's consumer
// blocks, the control port is not read, the agent and then the command
// block as on a full pipe), and once the caller reads, every byte arrives.
// One VM boot.
#include "microvm_support.hpp"

#include <fcntl.h>
#include <sys/wait.h>

using namespace escape;
using namespace microvm_test;

namespace {

// VmRSS of `pid` in KiB, 0 when it is gone.
long rss_kib(pid_t pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return 0;
}

} // namespace

TEST_CASE("X4: a guest writing faster than the caller reads holds the launcher's memory to a bound, and no byte is "
          "lost",
          "[X4][microvm]") {
  sandbox_fixture fx;
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  int out[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  const std::string err_path = fx.base + "/stderr.txt";
  const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(err >= 0);
  ccsb_test::process_options o;
  o.argv = {ccsb_run_path(), "--backend", "microvm", "--microvm-accel", "tcg", "--events", fx.events, "--",
            "/bin/sh",       "-c",        "echo @@ran=1 >&2; head -c " + std::to_string(kBytes) +
                                              " /dev/zero && echo @@written=1 >&2"};
  o.env = fx.env();
  o.cwd = fx.work;
  o.stdout_fd = out[1];
  o.stderr_fd = err;
  const pid_t pid = ccsb_test::spawn(o);
  ::close(out[1]);
  ::close(err);
  REQUIRE(pid > 0);
  // Nothing is read for up to 30 s: the launcher's resident memory is
  // sampled until the command says it wrote everything (it cannot, with
  // the bound: the port, the guest's pipe and this pipe hold far less).
  long max_rss = 0;
  bool ran = false, written_unread = false;
  for (int i = 0; i < 300 && !written_unread; ++i) {
    max_rss = std::max(max_rss, rss_kib(pid));
    const std::string e = read_file(err_path);
    ran = e.find("@@ran=1") != std::string::npos;
    written_unread = e.find("@@written=1") != std::string::npos;
    ::usleep(100 * 1000);
  }
  max_rss = std::max(max_rss, rss_kib(pid));
  // Then everything is read.
  std::size_t total = 0;
  bool only_zeros = true;
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = ::read(out[0], buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t k = 0; k < n; ++k) only_zeros = only_zeros && buf[static_cast<std::size_t>(k)] == 0;
    total += static_cast<std::size_t>(n);
  }
  ::close(out[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("stderr: " << read_file(err_path));
  INFO("the launcher's largest VmRSS: " << max_rss << " KiB; bytes read: " << total);
  CHECK(ran);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(total == kBytes);
  CHECK(only_zeros);
  CHECK(read_file(err_path).find("@@written=1") != std::string::npos);
  // With nobody reading, the command did not get to its end, and the
  // launcher held far less than what the command had written.
  CHECK_FALSE(written_unread);
  CHECK(max_rss < 32 * 1024);
}
