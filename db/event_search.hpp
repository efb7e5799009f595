#pragma once

// NIP-50 search on the write path (docs/search.md): the text whose 'simple'
// tsvector the insert statements store in events.search. The relay prepares
// it so that to_tsvector can never fail on an event (a failing statement
// would refuse the write): no NUL (a text parameter cannot carry one), only
// valid UTF-8, and a bounded length (a tsvector holds at most 1 MiB).

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "messages/proto/event.hpp"

namespace waggle::db {

// Content past this many bytes is not searchable (the largest WebSocket
// frame is 64 KiB, so only events posted another way can be that long).
constexpr size_t max_search_text = 64 * 1024;

// Kinds whose content is never searchable: push leases are never served
// (docs/push.md), and the content of NIP-04 DMs (4), NIP-59 seals (13) and
// gift wraps (1059) is ciphertext, whose "words" would only bloat the index.
constexpr bool searchable_kind(int32_t kind) {
  return kind != 4 && kind != 13 && kind != 1059 && kind != 30350;
}

// The length of the valid UTF-8 sequence at the start of `s`, or 0.
inline size_t utf8_sequence(std::string_view s) {
  auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  unsigned char c = b(0);
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2))
      return 0;
    if ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) > 0x9F))  // overlong, surrogate
      return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3))
      return 0;
    if ((c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) > 0x8F))  // overlong, > U+10FFFF
      return 0;
    return 4;
  }
  return 0;
}

// The text to index for `ev`, or nullopt when there is nothing to search
// (the column stays NULL, outside the partial index).
inline std::optional<std::string> search_text(const proto::event& ev) {
  if (!searchable_kind(ev.kind))
    return std::nullopt;
  std::string_view in = ev.content;
  std::string out;
  out.reserve(std::min(in.size(), max_search_text));
  bool words = false;
  for (size_t i = 0; i < in.size();) {
    size_t n = utf8_sequence(in.substr(i));
    if (out.size() + std::max<size_t>(n, 1) > max_search_text)
      break;  // whole characters only
    if (n == 0 || in[i] == '\0') {
      out.push_back(' ');
      i += n == 0 ? 1 : n;
      continue;
    }
    words = words || static_cast<unsigned char>(in[i]) > 0x20;
    out.append(in.substr(i, n));
    i += n;
  }
  if (!words)
    return std::nullopt;
  return out;
}

}  // namespace waggle::db
