// A small evaluator of the profiles ccsb writes, for tests: parse with
// ccsb::sbpl::parse_sbpl, then decide an operation on a path the way
// Seatbelt does for these rule shapes (the last matching rule wins; no match
// falls back to the (allow default) at the top). Filters understood: subpath,
// literal, regex (POSIX extended, std::regex), remote ip "localhost:PORT" /
// "localhost:*", remote unix-socket path-literal / path-regex. Anything else
// fails the test, so a new rule shape cannot be silently mis-evaluated.
#pragma once

#include "ccsb/render/seatbelt/sbpl.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

namespace sbeval {

using ccsb::sbpl::sbpl_node;

struct rule {
  bool allow{false};
  std::vector<std::string> ops;
  std::vector<sbpl_node> filters; // empty: matches everything
  std::string message;
};

struct profile {
  std::vector<rule> rules;
  bool default_allow{false};
};

inline profile load(const std::string& text) {
  auto forms = ccsb::sbpl::parse_sbpl(text);
  if (!forms) FAIL("profile does not parse: " << forms.err().what());
  profile p;
  for (const auto& f : *forms) {
    REQUIRE(!f.items.empty());
    REQUIRE(f.items[0].k == sbpl_node::kind::symbol);
    const std::string& head = f.items[0].text;
    if (head == "version") continue;
    REQUIRE((head == "allow" || head == "deny"));
    rule r;
    r.allow = head == "allow";
    for (std::size_t i = 1; i < f.items.size(); ++i) {
      const auto& it = f.items[i];
      if (it.k == sbpl_node::kind::symbol) {
        r.ops.push_back(it.text);
      } else if (it.k == sbpl_node::kind::list && !it.items.empty() && it.items[0].text == "with") {
        REQUIRE(it.items.size() == 3);
        REQUIRE(it.items[1].text == "message");
        r.message = it.items[2].text;
      } else {
        REQUIRE(it.k == sbpl_node::kind::list);
        r.filters.push_back(it);
      }
    }
    if (r.ops.size() == 1 && r.ops[0] == "default" && r.filters.empty()) {
      p.default_allow = r.allow;
      continue;
    }
    p.rules.push_back(std::move(r));
  }
  return p;
}

inline bool op_matches(const std::string& rule_op, const std::string& op) {
  if (!rule_op.empty() && rule_op.back() == '*') return op.rfind(rule_op.substr(0, rule_op.size() - 1), 0) == 0;
  return rule_op == op;
}

inline bool regex_match(const std::string& re, const std::string& s) {
  return std::regex_search(s, std::regex(re, std::regex::extended));
}

// target: a path for file and process operations; "ip:localhost:PORT" or
// "unix:/path" for network operations.
inline bool filter_matches(const sbpl_node& f, const std::string& target) {
  REQUIRE(f.items.size() >= 2);
  const std::string& k = f.items[0].text;
  if (k == "subpath") {
    const std::string& s = f.items[1].text;
    return s == "/" || target == s || target.rfind(s + "/", 0) == 0;
  }
  if (k == "literal") return target == f.items[1].text;
  if (k == "regex") return regex_match(f.items[1].text, target);
  if (k == "remote") {
    const std::string& kind = f.items[1].text;
    REQUIRE(f.items.size() == 3);
    if (kind == "ip") {
      const std::string& a = f.items[2].text;
      if (target.rfind("ip:", 0) != 0) return false;
      std::string t = target.substr(3);
      if (a == "localhost:*") return t.rfind("localhost:", 0) == 0;
      return t == a;
    }
    if (kind == "unix-socket") {
      if (target.rfind("unix:", 0) != 0) return false;
      const auto& inner = f.items[2];
      std::string path = target.substr(5);
      if (inner.items[0].text == "path-literal") return path == inner.items[1].text;
      if (inner.items[0].text == "path-regex") return regex_match(inner.items[1].text, path);
    }
  }
  FAIL("filter the evaluator does not know: " << k);
  return false;
}

// true: allowed.
inline bool decide(const profile& p, const std::string& op, const std::string& target) {
  bool allowed = p.default_allow;
  for (const auto& r : p.rules) {
    bool op_ok = false;
    for (const auto& o : r.ops) op_ok = op_ok || op_matches(o, op);
    if (!op_ok) continue;
    bool hit = r.filters.empty();
    for (const auto& f : r.filters) hit = hit || filter_matches(f, target);
    if (hit) allowed = r.allow;
  }
  return allowed;
}

} // namespace sbeval
