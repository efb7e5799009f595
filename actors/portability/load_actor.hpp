#pragma once

// The load actor: events that come from no client's socket (an operator's
// `waggle import` file, a sync peer's history) go through the relay's own
// write path, as an EVENT would: proto::parse_event, classify_event with
// `vouched` set (docs/portability.md, "What is vouched"), then request_store
// (ingest, or the group actor for NIP-29 commands), each answered only after
// its transaction committed. What a load adds, and why:
//  - relay-derived kinds (NIP-29 group state, NIP-43 membership state) are
//    refused whoever signed them: this relay derives its own from the
//    commands and members it holds, and another relay's signature cannot be
//    carried to this relay's key;
//  - NIP-29 commands and NIP-09 deletions (kind 5) go one at a time, after
//    everything before them committed and before anything after them is
//    sent: commands are authorised against the roster the earlier lines
//    built, and a deletion never races its target in another batch (the
//    live relay's known gap, docs/decisions.md). Everything else goes to
//    ingest at once, which forms its batches (group commit) as for a node;
//  - a second copy of an id in one load shares the first copy's answer
//    (a duplicate once the first is stored) and is not written again.
// One actor per load: it answers through `done` and quits.

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/connection/event_admission.hpp"
#include "actors/connection/store_request.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

enum class load_status : uint8_t {
  stored,     // committed by this load
  duplicate,  // already stored, or beaten by a stored newer version or deletion
  refused,    // the relay's rules refuse it; nothing was written
  failed,     // the outcome is unknown (database unavailable, a timeout): send it again
};

struct load_result {
  load_status status = load_status::failed;
  std::string id;      // the event's id, once it parsed
  std::string reason;  // the relay's OK message, "prefix: reason" ("" when stored)
};

struct load_outcome {
  std::vector<load_result> results;  // one per event, in order
  // Channels whose NIP-29 commands were sent (whatever their answer: a
  // failed one may have committed): their group state is to be settled.
  std::set<std::string> channels;
};

struct load_settings {
  int64_t community_id = 0;
  std::string relay_pubkey;
  admission_policy policy;
  size_t max_event_bytes = 64 * 1024;  // the node's --max-frame-bytes
  caf::timespan reply_timeout = std::chrono::seconds(120);
};

struct load_context {
  load_settings settings;
  store_peers peers;
  node_env env;
  std::vector<std::string> raws;
  std::function<void(load_outcome)> done;
};

// The refusal of an event larger than the node takes (an import's reader
// says it of a line it never holds whole).
status oversize_refusal(size_t max_event_bytes);

struct load_state;
using load_ptr = load_actor::stateful_pointer<load_state>;

struct load_state {
  static inline const char* name = "load";

  load_ptr self = nullptr;
  load_context ctx;
  load_outcome out;

  void init(load_ptr self_ptr, load_context context);
  // Admits and sends the next slice, as far as the order allows.
  void step();

 private:
  // Parses and admits event `i`: its event when it is to be stored (and
  // whether it goes alone), or nullptr when it is answered already.
  event_ptr admit(size_t i, int64_t now, bool& alone);
  void send(size_t i, event_ptr ev, bool alone);
  void on_reply(size_t i, bool alone, const ingest_reply& reply);
  void refuse(size_t i, const status& st);
  void schedule();
  void maybe_finish();

  size_t next_ = 0;         // the next event to admit
  size_t in_flight_ = 0;    // sent together, not answered yet
  bool alone_out_ = false;  // a command or deletion is out
  std::optional<std::pair<size_t, event_ptr>> held_;  // one that waits for in_flight_ == 0
  bool scheduled_ = false;  // a load_next is in the mailbox
  std::unordered_map<std::string, size_t> first_of_;  // id -> its first copy
  std::vector<std::pair<size_t, size_t>> copies_;     // (copy, first copy)
};

load_actor::behavior_type load_actor_impl(load_ptr self, load_context ctx);

}  // namespace waggle
