#include "actors/bus/nats_subject.hpp"

#include "messages/bus.hpp"

namespace waggle {

namespace {

constexpr char hex[] = "0123456789ABCDEF";

void escape_byte(std::string& out, unsigned char c) {
  out.push_back('%');
  out.push_back(hex[c >> 4]);
  out.push_back(hex[c & 15]);
}

// One token (no dots unless `dots`), escaped; `first` is the subject's start.
void escape(std::string& out, std::string_view token, bool first, bool dots) {
  if (token.empty()) {
    out.push_back('%');
    return;
  }
  for (size_t i = 0; i < token.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(token[i]);
    if (c == '%' || c == '*' || c == '>' || (dots && c == '.') || (first && i == 0 && c == '$'))
      escape_byte(out, c);
    else
      out.push_back(static_cast<char>(c));
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string nats_subject(std::string_view bus_subject) {
  std::string out;
  out.reserve(bus_subject.size() + 8);
  size_t start = 0;
  while (true) {
    auto dot = bus_subject.find('.', start);
    auto token = bus_subject.substr(start, dot == std::string_view::npos ? dot : dot - start);
    escape(out, token, start == 0, false);
    if (dot == std::string_view::npos)
      break;
    out.push_back('.');
    start = dot + 1;
  }
  return out;
}

std::string nats_queue(std::string_view group) {
  std::string out;
  escape(out, group, true, true);
  return out;
}

std::optional<std::string> bus_subject_of(std::string_view subject) {
  std::string out;
  out.reserve(subject.size());
  size_t start = 0;
  while (true) {
    auto dot = subject.find('.', start);
    auto token = subject.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (token.empty())
      return std::nullopt;
    if (token != "%") {
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] != '%') {
          out.push_back(token[i]);
          continue;
        }
        if (i + 2 >= token.size())
          return std::nullopt;
        int hi = hex_value(token[i + 1]), lo = hex_value(token[i + 2]);
        if (hi < 0 || lo < 0)
          return std::nullopt;
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
      }
    }
    if (dot == std::string_view::npos)
      break;
    out.push_back('.');
    start = dot + 1;
  }
  // Only the canonical image counts: `a.%62` is not `a.b`.
  if (!bus_valid_name(out) || nats_subject(out) != subject)
    return std::nullopt;
  return out;
}

}  // namespace waggle
