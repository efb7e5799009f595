#pragma once

// Which tags of an event have a row in event_tags (docs/tag-index.md): one
// per distinct (single-letter name, first value), values up to
// max_indexed_tag_value bytes. The write path inserts exactly these rows and
// the expiration reaper deletes exactly these, so the two cannot disagree.

#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "db/event_store.hpp"
#include "db/sql_util.hpp"
#include "messages/proto/event.hpp"

namespace waggle::db {

// (name, value) views into `ev`'s tags, in tag order.
inline std::vector<std::pair<std::string_view, std::string_view>>
indexed_tags(const proto::event& ev) {
  std::vector<std::pair<std::string_view, std::string_view>> out;
  std::set<std::pair<char, std::string_view>> seen;
  for (const auto& t : ev.tags) {
    if (t.size() < 2 || t[0].size() != 1 || !sql::is_letter(t[0][0]))
      continue;
    if (t[1].size() > max_indexed_tag_value)
      continue;
    if (!seen.emplace(t[0][0], t[1]).second)
      continue;
    out.emplace_back(t[0], t[1]);
  }
  return out;
}

}  // namespace waggle::db
