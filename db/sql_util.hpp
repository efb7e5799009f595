#pragma once

// Small SQL-building helpers shared by the write and read paths of events.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace waggle::db::sql {

inline bool is_hex64(std::string_view s) {
  if (s.size() != 64)
    return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

inline std::string hex_of(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

inline bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A PostgreSQL array literal, built element by element. Text elements are
// always double-quoted with `"` and `\` escaped, which is the complete quoting
// rule for array input (braces, commas, whitespace and the word NULL are then
// literal). A NUL byte cannot be sent in a text parameter at all (libpq
// parameters are C strings), so it is refused here; callers send such values
// hex-encoded instead.
class array_literal {
 public:
  array_literal() { s_.push_back('{'); }
  void text(std::string_view v) {
    sep();
    s_.push_back('"');
    for (char c : v) {
      if (c == '\0')
        throw std::invalid_argument("array_literal: NUL byte in a text element");
      if (c == '"' || c == '\\')
        s_.push_back('\\');
      s_.push_back(c);
    }
    s_.push_back('"');
  }
  void null() {
    sep();
    s_ += "NULL";
  }
  void integer(int64_t v) {
    sep();
    s_ += std::to_string(v);
  }
  // bytea element from hex digits: the element text is \x<hex>, whose
  // backslash the array syntax needs escaped.
  void bytea_hex(std::string_view hex) { text(std::string("\\x").append(hex)); }
  void optional_text(const std::optional<std::string>& v) {
    if (v)
      text(*v);
    else
      null();
  }
  std::string str() const { return s_ + "}"; }
  bool empty() const { return first_; }

 private:
  void sep() {
    if (!first_)
      s_.push_back(',');
    first_ = false;
  }
  std::string s_;
  bool first_ = true;
};

}  // namespace waggle::db::sql
