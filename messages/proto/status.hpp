#pragma once

// Error codes used inside waggle. Protocol text (the NIP-01 `OK`/`CLOSED`
// prefixes) is rendered only at the edge, by the connection actor, from these.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace waggle {

enum class ec : uint8_t {
  none = 0,
  invalid,        // malformed or failing validation     -> "invalid:"
  duplicate,      // already stored (or a newer version)  -> "duplicate:" (accepted)
  blocked,        // policy refuses it                   -> "blocked:"
  restricted,     // not allowed for this identity       -> "restricted:"
  auth_required,  // needs NIP-42 AUTH first             -> "auth-required:"
  rate_limited,   // too much, too fast                  -> "rate-limited:"
  unavailable,    // database or node unavailable        -> "error:"
  internal,       // a bug or an unexpected failure      -> "error:"
};

// The NIP-01 machine-readable prefix for a code (without the colon).
std::string_view prefix_of(ec code);

// An error code with its human-readable reason.
struct status {
  ec code = ec::none;
  std::string reason;

  bool ok() const { return code == ec::none; }
  // "prefix: reason" as sent in OK/CLOSED/NOTICE.
  std::string message() const;
  bool operator==(const status&) const = default;
};

// A value or a status; small on purpose (no exceptions across actor edges).
template <class T>
class result {
 public:
  result(T value) : v_(std::move(value)) {}
  result(status err) : v_(std::move(err)) {}
  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& operator*() { return std::get<0>(v_); }
  const T& operator*() const { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  const status& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, status> v_;
};

inline status make_status(ec code, std::string reason) { return {code, std::move(reason)}; }

// A read the database ended at its statement_timeout: said as such, so a
// client with too wide a read knows, and paced as a refusal (the client's
// filters made it slow). One text, shared by the reader that says it and the
// connection that weighs it (actors/connection/refusal_pacer.hpp).
inline status query_too_long() { return {ec::unavailable, "query took too long"}; }

}  // namespace waggle
