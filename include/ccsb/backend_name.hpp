// ccsb/backend_name.hpp — the backend enum and its stored names (B1).
//
// Kept apart from backend.hpp (selection, probes) so that the pure spec model
// (spec.hpp) can name a backend without pulling in any host probing.
//
// Stored names (written by existing servers, always lowercase):
//   "microvm" -> backend::microvm
//   "native"  -> backend::native
//   "none"    -> backend::none
//   "docker"  -> backend::native   (legacy stored value, B1)
//   absent / null / anything else -> backend::none
//
// Decision: matching is exact and case-sensitive. The names are the ones the
// servers wrote; "Native", " native" or "NATIVE" are not names any server
// stores, so B1 treats them like every other unrecognised value (-> none).
// from_name reads back a stored badge; it is not the parser for a user's
// request (B3 `--sandbox` and the explicit backend request of B6 are parsed,
// with errors, elsewhere), so it never has to guess.
#pragma once

#include <optional>
#include <string_view>

namespace ccsb {

enum class backend { microvm, native, none };

// B1: never fails; unknown or absent -> none.
constexpr backend from_name(const std::optional<std::string_view>& name) noexcept {
  if (!name) return backend::none;
  const std::string_view n = *name;
  if (n == "microvm") return backend::microvm;
  if (n == "native" || n == "docker") return backend::native;
  return backend::none; // "none" and every unrecognised value
}

constexpr std::string_view to_string(backend b) noexcept {
  switch (b) {
  case backend::microvm: return "microvm";
  case backend::native: return "native";
  case backend::none: return "none";
  }
  return "none";
}

} // namespace ccsb
