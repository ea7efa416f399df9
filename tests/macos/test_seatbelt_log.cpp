// M8: the unified log's Seatbelt denial lines -> violation events, on a
// corpus of realistic lines (ndjson as `log stream --style ndjson` writes
// them, compact and syslog styles as saved logs show them), noise that must
// be ignored and malformed lines that must not crash the parser.
#include "ccsb/render/seatbelt/log.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace ccsb;

namespace {
const std::string kTag = "ccsb-s1-0123abcd";

std::string ndjson(const std::string& message_json_escaped) {
  return R"({"traceID":4713529868730372,"eventMessage":")" + message_json_escaped +
         R"(","eventType":"logEvent","source":null,"formatString":"%s","activityIdentifier":0,"subsystem":"","category":"","threadID":1234567,"senderImageUUID":"5B7A1E2C-0000-0000-0000-000000000000","processImagePath":"\/kernel","senderImagePath":"\/System\/Library\/Extensions\/Sandbox.kext\/Contents\/MacOS\/Sandbox","timestamp":"2025-03-04 10:21:07.123456+0100","machTimestamp":123456789,"messageType":"Error","processImageUUID":"00000000-0000-0000-0000-000000000000","processID":0,"senderProgramCounter":123,"parentActivityIdentifier":0,"timezoneName":""})";
}
} // namespace

TEST_CASE("M8: an ndjson file-read denial becomes a violation", "[M8]") {
  std::string line = ndjson(R"(Sandbox: cat(4711) deny(1) file-read-data \/Users\/u\/.ssh\/id_rsa\n)" + kTag);
  auto v = parse_seatbelt_denial(line, kTag);
  REQUIRE(v);
  CHECK(v->action == "file-read-data");
  CHECK(v->target == "/Users/u/.ssh/id_rsa");
  CHECK(v->raw == line);
}

TEST_CASE("M8: corpus of denial lines with their action and target", "[M8]") {
  struct row {
    std::string line, action, target;
  };
  const row rows[] = {
      {ndjson(R"(Sandbox: touch(5120) deny(1) file-write-create \/Users\/u\/wt\/.env\n)" + kTag), "file-write-create",
       "/Users/u/wt/.env"},
      {ndjson(R"(Sandbox: git(5121) deny(1) file-write-data \/Users\/u\/wt\/.git\/config\n)" + kTag), "file-write-data",
       "/Users/u/wt/.git/config"},
      {ndjson(R"(Sandbox: mv(5122) deny(1) file-write-unlink \/Users\/u\/wt\/.git\n)" + kTag), "file-write-unlink",
       "/Users/u/wt/.git"},
      {ndjson(R"(Sandbox: curl(5123) deny(1) network-outbound 93.184.216.34:443\n)" + kTag), "network-outbound",
       "93.184.216.34:443"},
      {ndjson(R"(Sandbox: ssh(5124) deny(1) network-outbound \/private\/tmp\/com.apple.launchd.AbC\/Listeners\n)" + kTag),
       "network-outbound", "unix:/private/tmp/com.apple.launchd.AbC/Listeners"},
      {ndjson(R"(Sandbox: bash(5125) deny(1) process-exec* \/Users\/u\/wt\/a.out\n)" + kTag), "process-exec*",
       "/Users/u/wt/a.out"},
      {ndjson(R"(Sandbox: 3 duplicate reports for touch deny(1) file-write-create \/Users\/u\/wt\/k.pem\n)" + kTag),
       "file-write-create", "/Users/u/wt/k.pem"},
      // a process name with spaces and parentheses; a path with spaces
      {ndjson(R"(Sandbox: Code Helper (Plugin)(812) deny(1) file-read-data \/Users\/u\/Library\/Application Support\/Google\/Chrome\/Default\/Cookies\n)" + kTag),
       "file-read-data", "/Users/u/Library/Application Support/Google/Chrome/Default/Cookies"},
      // older releases: the tag after a space, "deny" without a count
      {"2025-03-04 10:21:07.123456+0100 0x1a2b3c   Error       0x0                  0      0    kernel: (Sandbox) Sandbox: python3(901) deny file-read-metadata /Users/u/.aws/credentials " + kTag,
       "file-read-metadata", "/Users/u/.aws/credentials"},
      {"2025-03-04 10:21:07.123 E  kernel[0:1f2] (Sandbox) Sandbox: node(902) deny(1) network-outbound 127.0.0.1:5432 " + kTag,
       "network-outbound", "127.0.0.1:5432"},
      {"Mar  4 10:21:07 mac kernel[0]: Sandbox: sh(903) deny(1) file-write-create /private/etc/hosts " + kTag,
       "file-write-create", "/private/etc/hosts"},
  };
  for (const auto& r : rows) {
    INFO(r.line);
    auto v = parse_seatbelt_denial(r.line, kTag);
    REQUIRE(v);
    CHECK(v->action == r.action);
    CHECK(v->target == r.target);
  }
}

TEST_CASE("M8: noise and other sessions are ignored", "[M8]") {
  const std::string lines[] = {
      "Filtering the log data using \"eventMessage ENDSWITH \\\"" + kTag + "\\\"\"",
      "Timestamp                       Thread     Type        Activity             PID    TTL  ",
      ndjson(R"(Sandbox: cat(4711) deny(1) file-read-data \/Users\/u\/.ssh\/id_rsa\nccsb-s2-99999999)"),       // another session
      ndjson(R"(Sandbox: cat(4711) deny(1) file-read-data \/Users\/u\/.ssh\/id_rsa\nx)" + kTag),             // tag not a whole token
      ndjson(R"(Sandbox: cat(4711) deny(1) file-read-data \/Users\/u\/.ssh\/id_rsa)"),                      // no tag
      ndjson(R"(Sandbox: cat(4711) allow file-read-data \/Users\/u\/x\n)" + kTag),                          // an allow report
      ndjson(R"(System Policy: cat(4711) deny(1) file-read-data \/Users\/u\/Desktop\n)" + kTag),            // TCC, not Sandbox
      ndjson(R"(Sandbox: cat(4711) deny(1) FILE-READ \/x\n)" + kTag),                                        // not an operation name
      R"({"eventMessage":42})",
      R"({"eventMessage":"Sandbox: cat(1) deny(1) file-read-data \/x\n)" + kTag,                           // truncated JSON
      R"({"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})",
      "",
      kTag,
      "Sandbox: " + kTag,
      "Sandbox: cat(1) deny(1) " + kTag,
      std::string("\xff\xfe\x00garbage ", 12) + kTag,
  };
  for (const auto& l : lines) {
    INFO(l);
    CHECK_FALSE(parse_seatbelt_denial(l, kTag));
  }
  CHECK_FALSE(parse_seatbelt_denial(std::string(kMaxLogLine + 1, 'a') + " " + kTag, kTag));
  CHECK_FALSE(parse_seatbelt_denial("Sandbox: cat(1) deny(1) file-read-data /x " + kTag, ""));
}

TEST_CASE("M8: the log reader's argv asks for the session's tag", "[M8]") {
  auto argv = seatbelt_log_argv(kLogTool, kTag);
  CHECK(argv == std::vector<std::string>{"/usr/bin/log", "stream", "--style", "ndjson", "--predicate",
                                         "eventMessage ENDSWITH \"" + kTag + "\""});
}
