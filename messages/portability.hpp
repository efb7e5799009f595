#pragma once

// What the load actor takes (actors/portability/load_actor.hpp,
// docs/portability.md). Its events arrive in its spawn context and its
// answer leaves through the context's callback, like the HTTP submit actor's;
// the one message is its own. The type ID is in messages/type_ids.hpp.

#include <caf/meta/type_name.hpp>

namespace waggle {

// Load actor -> itself: admit the next slice of its events. A load of
// thousands of events costs ~65 µs of signature check each; slicing hands
// the scheduler thread back between slices, so the replies that free the
// pipeline (and every other actor) are not held behind a whole batch.
struct load_next {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, load_next&) {
  return f(caf::meta::type_name("load_next"));
}

}  // namespace waggle
