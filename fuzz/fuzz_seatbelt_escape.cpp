// Fuzzer for the SBPL escaper and the glob -> regex translation (M7).
//
// Input: a first byte choosing the property, then text.
//  * even: the text is a path (prefixed with "/"). It is put into every
//    slot of a policy (read-deny, write-deny, writable root, glob root,
//    grant root) and rendered. Either the renderer refuses it with
//    invalid_argument (and then the escaper refuses the text too), or the
//    profile parses as balanced s-expressions, has exactly one top-level
//    form per rule line (nothing added), and the path appears, decoded, as
//    a string atom.
//  * odd: "GLOB\nPATH" (each at most 48 bytes, GLOB prefixed with "/"). The
//    anchored regex glob_regex(GLOB) (POSIX extended, std::regex) matches
//    PATH exactly when the reference matcher glob_match says so; and where
//    PATH is absolute and lexically normal (the only paths Seatbelt or the
//    broker decide on), create_allow_regex(GLOB), when it translates GLOB,
//    matches PATH exactly when create_allow::matches does (P7 exceptions).
#include "ccsb/render/seatbelt/render.hpp"

#include <cstddef>
#include <cstdint>
#include <regex>
#include <string>
#include <string_view>

namespace {

bool has_atom(const std::vector<ccsb::sbpl::sbpl_node>& nodes, const std::string& s) {
  for (const auto& n : nodes) {
    if (n.k == ccsb::sbpl::sbpl_node::kind::string && n.text == s) return true;
    if (has_atom(n.items, s)) return true;
  }
  return false;
}

void render_property(const std::string& path) {
  ccsb::policy pol;
  pol.read_deny = {{path, "fuzz", ccsb::path_shape::file}};
  pol.write_deny = {{path + "/d", "fuzz", ccsb::path_shape::dir}};
  pol.write_allow = {{path, "fuzz", ccsb::path_shape::dir}};
  pol.write_deny_globs = {{path, "*.pem", true, "fuzz"}};
  pol.exec.grant_roots = {path + "/bin"};
  pol.exec.denied_binaries = {{"/usr/bin/sudo", "fuzz", ccsb::path_shape::file}};
  ccsb::seatbelt_facts f;
  f.http_port = 3128;
  f.socks_port = 1080;
  f.session_tag = "ccsb-fuzz-00000000";
  auto prof = ccsb::render_seatbelt(pol, f);
  if (!prof) {
    if (prof.err().code != ccsb::errc::invalid_argument) __builtin_trap();
    // A refusal must come from the text itself (or a P8 root), never from a bug.
    if (ccsb::sbpl::sbpl_string(path, "x") && prof.err().field.rfind("write_allow", 0) != 0) __builtin_trap();
    return;
  }
  auto forms = ccsb::sbpl::parse_sbpl(prof->text);
  if (!forms) __builtin_trap();
  std::size_t lines = 0;
  for (std::size_t i = 0; i < prof->text.size(); ++i)
    if ((i == 0 || prof->text[i - 1] == '\n') && prof->text[i] == '(') ++lines;
  if (forms->size() != lines) __builtin_trap();
  if (!has_atom(*forms, path)) __builtin_trap();
}

void glob_property(std::string_view in) {
  auto nl = in.find('\n');
  if (nl == std::string_view::npos) return;
  std::string glob = "/" + std::string(in.substr(0, nl));
  std::string path(in.substr(nl + 1));
  if (glob.size() > 48 || path.size() > 48) return;
  auto re = ccsb::sbpl::glob_regex(glob, "glob");
  if (!re) return; // control bytes / non-UTF-8: refused
  if (path.find('\0') != std::string::npos) return;
  bool fast;
  try {
    fast = std::regex_search(path, std::regex(*re, std::regex::extended));
  } catch (const std::regex_error&) {
    __builtin_trap(); // the translation produced an invalid regex
  }
  bool slow = ccsb::sbpl::glob_match(glob, path);
  if (fast != slow) __builtin_trap();
  if (path.empty() || path.front() != '/' || ccsb::lexical_normal(path) != path) return;
  auto ca = ccsb::sbpl::create_allow_regex(glob, "createAllow[0]");
  if (!ca) return; // no exact regex: refused
  bool ca_fast;
  try {
    ca_fast = std::regex_search(path, std::regex(*ca, std::regex::extended));
  } catch (const std::regex_error&) {
    __builtin_trap();
  }
  if (ca_fast != ccsb::create_allow::matches(glob, path)) __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 512) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0)
    render_property("/" + std::string(in));
  else
    glob_property(in);
  return 0;
}
