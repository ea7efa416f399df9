// ccsb/result.hpp — the error model (rule 4: fail closed, say why).
//
// Every fallible operation in ccsb returns result<T>: either a value or an
// `error` that carries a code, the path of the offending field (for example
// "bindMounts[2].hostPath") and a human message. Security decisions never
// throw; callers must look at the result.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ccsb {

// Stable error categories. Names are part of the JSON/CLI contract.
enum class errc {
  invalid_argument,    // a value has the wrong form
  missing_field,       // a required JSON field is absent
  wrong_type,          // a JSON field has the wrong type
  invalid_pattern,     // a domain pattern is not one of the N3 forms
  invalid_host,        // a host name or address literal is malformed
  illegal_transition,  // S4 state machine rejected a transition
  handle_destroyed,    // S4: any use after `destroyed`
  backend_unavailable, // B6: an explicit backend cannot be provided
  unenforceable,       // P7/L4: the backend cannot enforce a required rule
  io_error,            // the host refused an operation (launcher only)
  unsupported,         // S7: the session cannot do this here (suspend without a freezer)
  unknown_session,     // S8: no session of that id was launched (ccsbd)
};

constexpr std::string_view to_string(errc c) noexcept {
  switch (c) {
  case errc::invalid_argument: return "invalid_argument";
  case errc::missing_field: return "missing_field";
  case errc::wrong_type: return "wrong_type";
  case errc::invalid_pattern: return "invalid_pattern";
  case errc::invalid_host: return "invalid_host";
  case errc::illegal_transition: return "illegal_transition";
  case errc::unsupported: return "unsupported";
  case errc::handle_destroyed: return "handle_destroyed";
  case errc::backend_unavailable: return "backend_unavailable";
  case errc::unenforceable: return "unenforceable";
  case errc::io_error: return "io_error";
  case errc::unknown_session: return "unknown_session";
  }
  return "unknown";
}

struct error {
  errc code{errc::invalid_argument};
  std::string field;   // path of the offending field or input; may be empty
  std::string message; // what is wrong and, where possible, how to fix it

  // "field: message" or just "message"; used for one-line CLI reasons.
  std::string what() const {
    std::string out;
    if (!field.empty()) {
      out += field;
      out += ": ";
    }
    out += message;
    return out;
  }
  friend bool operator==(const error&, const error&) = default;
};

inline error make_error(errc code, std::string field, std::string message) {
  return error{code, std::move(field), std::move(message)};
}

// Prefix a field path: nest("bindMounts[2]", e) turns "hostPath" into
// "bindMounts[2].hostPath".
inline error nest(std::string_view parent, error e) {
  if (e.field.empty())
    e.field = std::string(parent);
  else if (!e.field.empty() && e.field.front() == '[')
    e.field = std::string(parent) + e.field;
  else
    e.field = std::string(parent) + "." + e.field;
  return e;
}

// A minimal std::expected-like type (C++20 has none).
template <class T> class [[nodiscard]] result {
public:
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  result(error e) : v_(std::in_place_index<1>, std::move(e)) {}

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & { assert(has_value()); return std::get<0>(v_); }
  const T& value() const& { assert(has_value()); return std::get<0>(v_); }
  T&& value() && { assert(has_value()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const error& err() const& { assert(!has_value()); return std::get<1>(v_); }
  error&& err() && { assert(!has_value()); return std::get<1>(std::move(v_)); }

private:
  std::variant<T, error> v_;
};

// result<void>
template <> class [[nodiscard]] result<void> {
public:
  result() = default;
  result(error e) : e_(std::move(e)), ok_(false) {}
  bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  const error& err() const& { assert(!ok_); return e_; }
  error&& err() && { assert(!ok_); return std::move(e_); }

private:
  error e_{};
  bool ok_{true};
};

inline result<void> ok() { return {}; }

} // namespace ccsb
