#pragma once

// What the reader pool and its sessions take: histories, counts and access
// checks, with the grants they answer, and the pool's bookkeeping of its
// sessions and of withdrawn reads. Each struct's `inspect` is beside it; the
// type IDs are in messages/type_ids.hpp.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/proto/filter.hpp"
#include "messages/proto/status.hpp"
#include "messages/value_inspect.hpp"
#include "messages/values.hpp"

namespace waggle {

// -- grants and access ------------------------------------------------------------

// One channel a subscription may read, and on whose authority: `open` (any
// authenticated user) and/or the pubkeys that are members.
struct channel_grant {
  std::string channel;
  bool open = false;
  std::vector<std::string> members;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, channel_grant& x) {
  return f(caf::meta::type_name("channel_grant"), x.channel, x.open, x.members);
}

// Access to the community itself (docs/communities.md), on whose authority:
// the members among the reader's pubkeys, or, while the community is open,
// any of its pubkeys that is not banned (`guests`).
struct community_grant {
  // Set by the reader that checked it; a reply without it (a trace recorded
  // before communities had members) carries no community facts.
  bool checked = false;
  bool open = false;
  std::vector<std::string> members;
  std::vector<std::string> guests;
  bool allows() const { return !members.empty() || (open && !guests.empty()); }
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, community_grant& x) {
  return f(caf::meta::type_name("community_grant"), x.checked, x.open, x.members, x.guests);
}

// The channels a read names in `#h` and the pubkeys the reader proved: the
// reader session re-checks access (proto::nip29::may_read) before it reads.
struct read_access {
  std::vector<std::string> channels;
  std::vector<std::string> pubkeys;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, read_access& x) {
  return f(caf::meta::type_name("read_access"), x.channels, x.pubkeys);
}

// -- histories and counts -----------------------------------------------------------

struct history_request {
  int64_t community_id = 0;
  std::vector<proto::filter> filters;
  read_access access;
  history_page page;
  // The steady-clock time (ns since its epoch) of the requester's last
  // acknowledged write, 0 = none: a bounded replica read must be proved at
  // or after it (docs/replicas.md, read-your-writes).
  int64_t read_after_ns = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, history_request& x) {
  return f(caf::meta::type_name("history_request"), x.community_id, x.filters, x.access, x.page,
           x.read_after_ns);
}

struct history_reply {
  std::vector<std::string> raws;  // newest first
  status err;
  // The access re-check's grants (one per channel of the request's access),
  // so the subscription drops any authority lost before it was registered.
  std::vector<channel_grant> grants;
  community_grant community;
  // Set when the history goes on past `raws`: the request of its next page.
  bool more = false;
  history_page next;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, history_reply& x) {
  return f(caf::meta::type_name("history_reply"), x.raws, x.err, x.grants, x.community, x.more,
           x.next);
}

struct count_request {
  int64_t community_id = 0;
  std::vector<proto::filter> filters;
  read_access access;
  int64_t read_after_ns = 0;  // as in history_request
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, count_request& x) {
  return f(caf::meta::type_name("count_request"), x.community_id, x.filters, x.access,
           x.read_after_ns);
}

struct count_reply {
  uint64_t count = 0;
  status err;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, count_reply& x) {
  return f(caf::meta::type_name("count_reply"), x.count, x.err);
}

// NIP-77 (docs/negentropy.md): the items a negentropy session reconciles,
// read with the same access re-check and visibility as a history, on the
// costly lane (every matching row is read, as for a count).
struct sync_items_request {
  int64_t community_id = 0;
  std::vector<proto::filter> filters;
  read_access access;
  uint64_t max_items = 0;
  int64_t read_after_ns = 0;  // as in history_request
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_items_request& x) {
  return f(caf::meta::type_name("sync_items_request"), x.community_id, x.filters, x.access,
           x.max_items, x.read_after_ns);
}

struct sync_items_reply {
  std::string packed;  // proto::negentropy::packed_item_bytes per item, ascending
  uint64_t count = 0;
  bool too_many = false;  // more than max_items matched; nothing packed
  status err;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_items_reply& x) {
  return f(caf::meta::type_name("sync_items_reply"), x.packed, x.count, x.too_many, x.err);
}

// Connection actor -> reader: may these pubkeys read these channels? Asked
// before a REQ naming channels is registered with the hub.
struct access_request {
  int64_t community_id = 0;
  read_access access;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, access_request& x) {
  return f(caf::meta::type_name("access_request"), x.community_id, x.access);
}

struct access_reply {
  std::vector<channel_grant> grants;  // one per channel asked, when err is ok
  status err;                         // ec::restricted names the first refused channel
  community_grant community;          // when err is ok
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, access_reply& x) {
  return f(caf::meta::type_name("access_reply"), x.grants, x.err, x.community);
}

// -- withdrawal and the pool's sessions (docs/architecture.md, "reader pool") ----

// Connection actor -> reader pool: its reads whose caller gave up (the
// subscription was closed or replaced, or the socket went away). `requests`
// are the request ids of the connection's own `request(...)` calls
// (caf::message_id::request_id, as the pool sees them); `all` withdraws every
// read of the sender. Reads still queued are dropped, never answered (nobody
// waits: the requester's own timeout clears its handler); one already
// running is not interrupted (statement_timeout ends it).
struct read_withdraw {
  std::vector<uint64_t> requests;
  bool all = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, read_withdraw& x) {
  return f(caf::meta::type_name("read_withdraw"), x.requests, x.all);
}

// Reader pool -> reader session, once at start: "you are my session
// `index`". The session then sends `reader_idle` back after every read, which
// is how the pool knows it may hand it the next one (sessions answer the
// connection directly, as delegated, so the pool never sees the reply).
struct reader_attach {
  uint64_t index = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reader_attach& x) {
  return f(caf::meta::type_name("reader_attach"), x.index);
}

struct reader_idle {
  uint64_t index = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reader_idle& x) {
  return f(caf::meta::type_name("reader_idle"), x.index);
}

}  // namespace waggle
