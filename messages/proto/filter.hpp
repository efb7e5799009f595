#pragma once

// NIP-01 filters: parsing with limits, and matching against events.
// NIP-50 `search` is parsed here and run by the history reads only
// (docs/search.md): it never matches a live event.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/proto/event.hpp"

namespace waggle::proto {

struct filter_limits {
  size_t max_values = 500;        // per list (ids, authors, kinds, each #x)
  size_t max_filters = 10;        // per REQ/COUNT
  uint32_t default_limit = 100;   // when a filter has no limit
  uint32_t max_limit = 500;       // a larger limit is clamped to this
  size_t max_tag_value_len = 256; // longer values can never be indexed
  // NIP-50 (docs/search.md): off, a filter with `search` is refused, so a
  // client learns the relay cannot search rather than getting everything.
  bool search = true;
  size_t max_search_len = 1024;   // bytes of the search string
  // What one search may cost (docs/search.md, "Cost"): it ranks at most the
  // newest `max_search_ranked` matches, and each of its statements runs at
  // most `search_timeout_ms` (within the read's own budget).
  uint32_t max_search_ranked = 2000;
  int64_t search_timeout_ms = 2000;
};

struct filter {
  // Absent = no condition; present-but-empty matches nothing (like kinds).
  std::optional<std::vector<std::string>> ids;      // full 64-hex ids (lowercase)
  std::optional<std::vector<std::string>> authors;  // full 64-hex pubkeys (lowercase)
  std::optional<std::vector<int32_t>> kinds;  // present-but-empty matches nothing
  // "#e" -> values; only single-letter tag names (a-zA-Z). A key present with
  // an empty list matches nothing.
  std::map<char, std::vector<std::string>> tags;
  std::optional<int64_t> since;
  std::optional<int64_t> until;
  std::optional<uint32_t> limit;     // as given by the client, already clamped
  // NIP-50: full-text search over content, as sent (search_terms() is what
  // is searched). A filter with it is history only: it never matches live.
  std::optional<std::string> search;

  bool operator==(const filter&) const = default;

  // The history limit this filter asks for after defaults and clamping.
  uint32_t effective_limit(const filter_limits& lim) const {
    return limit ? *limit : lim.default_limit;
  }
  // True when no event can ever match (e.g. "kinds": []), so no query is needed.
  bool matches_nothing() const;
};

// Parses one filter object (a JSON object as text). Unknown keys other than
// single-letter tag filters are rejected with ec::invalid, so that a client
// learns its query is not understood rather than silently getting everything.
result<filter> parse_filter(std::string_view json, const filter_limits& lim);

// Pure match (NIP-01 semantics; tags match on the first element/value pair).
// A filter with `search` matches no event here: search is one-shot (history,
// then EOSE), so the live path never delivers to it.
bool matches(const filter& f, const event& ev);
bool matches_any(const std::vector<filter>& fs, const event& ev);

// NIP-50: the words a search string asks for. The extensions NIP-50 defines
// (`include:`, `domain:`, `language:`, `sentiment:`, `nsfw:` followed by a
// value) are dropped, as none is supported; control characters (NUL
// included) become spaces; surrounding whitespace is trimmed. Empty: the
// search matches nothing.
std::string search_terms(std::string_view search);

// Canonical JSON of a filter (for logs, traces and NOTICEs).
std::string to_json(const filter& f);

}  // namespace waggle::proto
