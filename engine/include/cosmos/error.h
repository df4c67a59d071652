// Errors crossing the engine's public API. The engine never throws across it: functions return
// Result<T>, which holds a value or an Error with a category the UI can act on, a stable code that
// tests assert, and a sentence a person can read (what failed, with which file).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace cosmos {

enum class ErrorCategory {
  bad_input,          // a file or argument that is missing, malformed or inconsistent
  unsupported_model,  // a well-formed model this engine does not run
  out_of_memory,      // GPU or host memory exhausted
  cancelled,          // the caller asked to stop
  io,                 // the operating system refused a read or write
  internal,           // a bug or an unexpected library failure
};

const char* to_string(ErrorCategory category);

struct Error {
  ErrorCategory category = ErrorCategory::internal;
  std::string code;     // stable slug, e.g. "safetensors.header_length"; tests compare it
  std::string message;  // human sentence, shown as is

  // "what: message" with a context prefix, e.g. the file being read.
  Error with_context(const std::string& context) const {
    return Error{category, code, context + ": " + message};
  }
};

inline Error make_error(ErrorCategory category, std::string code, std::string message) {
  return Error{category, std::move(code), std::move(message)};
}

// Minimal expected<T, Error> (std::expected is C++23; g++ 12 lacks it).
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}      // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { assert(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
struct Ok {};
using Status = Result<Ok>;
inline Status ok_status() { return Ok{}; }

}  // namespace cosmos
