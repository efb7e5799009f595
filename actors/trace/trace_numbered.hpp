#pragma once

// A replayed actor's exchange with an actor the replay does not run, as the
// trace holds it (docs/traces.md): what it sent under its own number
// (`out_kind`: bus_out, cluster_out) and the answer it took for that number
// (`reply_kind`: bus_reply, cluster_reply). A replay's stand-in numbers what
// it receives in arrival order, which is the sender's order (one sender, one
// mailbox), and answers request n only at its reply record.

#include <cstdint>
#include <string>
#include <string_view>

#include <caf/error.hpp>

#include "actors/trace/trace_recorder.hpp"

namespace waggle {

template <class Msg>
void trace_numbered(const node_env& env, std::string_view kind, uint64_t n, const Msg& msg) {
  if (env.trace && env.trace->node_level())
    env.trace->record(env.actor, kind,
                      trace_fields{}
                        .num("n", static_cast<int64_t>(n))
                        .str("type", trace_codec::name_of<Msg>())
                        .raw("msg", trace_codec::encode(msg)));
}

// An error answer as [code, category]: the code (a bus_errc, or CAF's own)
// decides what the asker does, the context text does not.
inline void trace_numbered_error(const node_env& env, std::string_view kind, uint64_t n,
                                 const caf::error& err) {
  if (!env.trace || !env.trace->node_level())
    return;
  std::string msg = "[";
  msg += std::to_string(err.code());
  msg += ",\"";
  msg += caf::to_string(err.category());
  msg += "\"]";
  env.trace->record(env.actor, kind,
                    trace_fields{}.num("n", static_cast<int64_t>(n)).str("type", "error").raw("msg", msg));
}

}  // namespace waggle
