// Helpers shared by the spec tests.
#pragma once

#include "ccsb/spec_json.hpp"

#include <picojson.h>

#include <string>
#include <string_view>

namespace spec_test {

// A minimal valid spec with `key` set to the JSON value `value_json`
// (replacing sessionId/workspaceId when those are the key).
inline std::string with_field(const std::string& key, const std::string& value_json) {
  picojson::value base;
  std::string err = picojson::parse(base, std::string(R"({"sessionId":"s1","workspaceId":"w1"})"));
  picojson::value v;
  err += picojson::parse(v, value_json);
  if (!err.empty()) return "<<bad test json: " + err + ">>";
  base.get<picojson::object>()[key] = v;
  return base.serialize();
}

// Same, with one bind mount whose `key` is set (hostPath "/h" otherwise).
inline std::string with_mount_field(const std::string& key, const std::string& value_json) {
  picojson::value m;
  std::string err = picojson::parse(m, std::string(R"({"hostPath":"/h"})"));
  picojson::value v;
  err += picojson::parse(v, value_json);
  if (!err.empty()) return "<<bad test json: " + err + ">>";
  m.get<picojson::object>()[key] = v;
  return with_field("bindMounts", "[" + m.serialize() + "]");
}

inline std::string without_field(const std::string& json, const std::string& key) {
  picojson::value v;
  picojson::parse(v, json);
  v.get<picojson::object>().erase(key);
  return v.serialize();
}

} // namespace spec_test
