// A launcher of one's own on the session API (S7), complete: it builds from
// an installed package (find_package) and from a source tree
// (add_subdirectory), tests/cmake_import runs it both ways, and the README's
// "Embedding the library" shows this file (a doc test compares them).
//
//   launcher DIR    a dispatch-profile session binding DIR (writable, the
//                   working directory) runs one command that writes a file
//                   and tries to create server.pem (P7: denied); every
//                   event is printed as its S5 line; exit 0 when the command
//                   ran, its write landed and the denial came as a violation.
// Linux (the bubblewrap backend). The helpers ccsb-init and egressd are
// found as ccsb-run finds them (docs/embedding.md).
#include <ccsb/ccsb.hpp>
#include <ccsb/launch/linux/host_probe.hpp>
#include <ccsb/launch/request_builder.hpp>
#include <ccsb/launch/session.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  namespace L = ccsb::launch;

  // B2: what this host offers, probed once per process.
  const ccsb::probe_result native = ccsb::probe_native(L::gather_probe_facts());
  if (!native.available) {
    std::fprintf(stderr, "no native sandbox on this host: %s\n", native.hint.c_str());
    return 125;
  }

  // The session: one worktree, bound writable; the dispatch profile (X1
  // broker, egressd with an empty allowlist, Landlock).
  L::request_inputs in;
  in.spec.session_id = "example-" + std::to_string(::getpid());
  in.spec.workspace_id = "example";
  in.spec.bind_mounts.push_back({dir, dir, false});
  in.spec.guest_workdir = dir;
  in.prof = ccsb::profile::dispatch;
  L::session_request rq;
  rq.init_path = L::helper_path(std::nullopt, "CCSB_INIT", "ccsb-init");
  rq.egressd_path = L::helper_path(std::nullopt, "CCSB_EGRESSD", "egressd");
  rq.landlock_abi = native.landlock_abi;
  auto built = L::build_session_request(std::move(in), std::move(rq), L::gather_host_facts());
  if (!built) {
    std::fprintf(stderr, "refused: %s\n", built.err().what().c_str());
    return 125;
  }

  // Events arrive on the reactor's thread (this one), in order.
  int violations = 0;
  L::session_callbacks cb;
  cb.event = [&](const ccsb::sandbox_event& e) {
    std::printf("%s\n", ccsb::to_json_line(e).c_str());
    if (e.kind == ccsb::event_kind::violation) ++violations;
  };

  L::reactor r;
  auto s = L::session::launch(r, std::move(built->request), std::move(cb)); // warm: `ready` was emitted
  if (!s) {
    std::fprintf(stderr, "launch: %s\n", s.err().what().c_str());
    return 125;
  }
  auto id = (*s)->exec({"/bin/sh", "-c", "echo hello > notes.txt && echo k > server.pem"}, {});
  if (!id) {
    std::fprintf(stderr, "exec: %s\n", id.err().what().c_str());
    return 125;
  }
  (void)r.run_until([&] { return (*s)->finished(*id); });
  const int code = (*s)->exit_code(*id).value_or(-1);
  (*s)->destroy();

  const bool wrote = ::access((dir + "/notes.txt").c_str(), F_OK) == 0;
  const bool denied = ::access((dir + "/server.pem").c_str(), F_OK) != 0;
  std::printf("example: exit %d, %d violation(s), notes.txt %s, server.pem %s\n", code, violations,
              wrote ? "written" : "MISSING", denied ? "absent" : "CREATED");
  return code != 0 && violations > 0 && wrote && denied ? 0 : 1;
}
