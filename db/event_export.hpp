#pragma once

// What `waggle export` reads (docs/portability.md): one community's live
// events, oldest first, as the raw JSON the relay stored, through a
// server-side cursor so that a community of any size streams in chunks.

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include <pqxx/connection>

namespace waggle::db {

struct export_range {
  std::optional<int64_t> since;  // created_at >= since
  std::optional<int64_t> until;  // created_at <= until
};

struct export_counts {
  uint64_t events = 0;         // handed to the sink
  uint64_t relay_derived = 0;  // left out: each relay derives and signs its own
};

// Every live event of `community_id` in `range` (not deleted, not expired at
// `now`, as reads see them), ordered by created_at then id ascending, handed
// to `sink` one at a time. NIP-29 group state and NIP-43 membership state
// (proto::is_relay_derived) are left out and counted. One read-only
// transaction, so one snapshot; `DECLARE ... NO SCROLL CURSOR` fetched
// `chunk` rows at a time, so at most one chunk is ever held here. `progress`
// (optional) runs after each chunk. Throws what libpqxx throws.
export_counts export_events(pqxx::connection& conn, int64_t community_id,
                            const export_range& range, int64_t now, size_t chunk,
                            const std::function<void(std::string_view raw)>& sink,
                            const std::function<void(const export_counts&)>& progress = {});

}  // namespace waggle::db
