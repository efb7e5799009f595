// The connection actor's NIP-77 frames (docs/negentropy.md): NEG-OPEN reads
// the set a REQ with the same filter could read, on the reader pool's costly
// lane and under the same read admission as a COUNT; NEG-MSG answers from
// that set; NEG-CLOSE drops it. Every refusal is a NEG-ERR with a reason.

#include "actors/connection/connection_actor.hpp"
#include "actors/trace/trace_recorder.hpp"

namespace waggle {

namespace {
// Read admission keys its tickets by subscription id; a NEG session may
// share its id with a REQ, and closing one must not withdraw the other.
std::string read_key(const std::string& sub_id) { return "NEG " + sub_id; }
}  // namespace

void connection_state::send_neg_err(const std::string& sub_id, const std::string& reason) {
  answer_client(proto::render_neg_err(sub_id, reason), reason);
}

void connection_state::on_neg_open(proto::neg_open_msg&& msg) {
  const auto& conf = neg.settings();
  if (!conf.enabled)
    return send_neg_err(msg.sub_id, "blocked: NIP-77 negentropy is off on this relay");
  if (authed.empty())
    return send_neg_err(msg.sub_id, "auth-required: authenticate with NIP-42 AUTH first");
  if (msg.f.search)
    return send_neg_err(msg.sub_id, "blocked: a search filter cannot be reconciled");
  // A NEG-OPEN for an open id replaces it (NIP-77).
  on_neg_close({msg.sub_id});
  if (neg.size() >= conf.max_sessions)
    return send_neg_err(msg.sub_id, "blocked: too many negentropy sessions on this connection (max " +
                                      std::to_string(conf.max_sessions) + ")");
  std::vector<proto::filter> filters{std::move(msg.f)};
  auto ticket = subs.next_generation();
  auto now = env.sources.steady_now ? env.sources.steady_now() : bucket_clock::now();
  auto refused = reads.admit(ticket, read_key(msg.sub_id), true, filters, authed,
                             settings.remote_ip, now);
  if (!refused.st.ok()) {
    if (env.stats)
      env.stats->count_refused(refused.label);
    return send_neg_err(msg.sub_id, refused.st.message());
  }
  auto access = access_for(filters);
  auto asked = self->request(peers.reader, settings.read_timeout,
                             sync_items_request{settings.community_id, std::move(filters),
                                                std::move(access), conf.max_items,
                                                last_write_answer.time_since_epoch().count()});
  const auto request_id = asked.id().request_id().integer_value();
  reads.at_pool(ticket, request_id);
  neg.opening(msg.sub_id, ticket, request_id, std::move(msg.message));
  std::move(asked).then(
    traced_reply<sync_items_reply>(self, env, [this, sub_id = msg.sub_id, ticket](
                                                sync_items_reply& reply) {
      reads.done(ticket);
      if (!neg.is_opening(sub_id, ticket))
        return;  // closed or replaced meanwhile
      if (!reply.err.ok()) {
        neg.close(sub_id);
        return send_neg_err(sub_id, reply.err.message());
      }
      if (reply.too_many) {
        neg.close(sub_id);
        return send_neg_err(sub_id, "blocked: the filter matches more than " +
                                      std::to_string(neg.settings().max_items) +
                                      " events; narrow it (since/until)");
      }
      auto opened = neg.open(sub_id, reply.packed);
      if (!opened.error.empty())
        return send_neg_err(sub_id, opened.error);
      send(proto::render_neg_msg(sub_id, opened.answer));
    }),
    [this, sub_id = msg.sub_id, ticket, request_id](caf::error&) {
      reads.done(ticket);
      self->send(peers.reader, read_withdraw{{request_id}, false});
      if (!neg.is_opening(sub_id, ticket))
        return;
      neg.close(sub_id);
      send_neg_err(sub_id, "error: reading the session's events failed");
    });
}

void connection_state::on_neg_msg(proto::neg_msg&& msg) {
  if (neg.opening_of(msg.sub_id)) {
    // The client did not wait for the first answer: the session ends, and
    // its read still at the pool must not run for nobody (red team).
    on_neg_close({msg.sub_id});
    return send_neg_err(msg.sub_id, "invalid: NEG-MSG before the answer to NEG-OPEN");
  }
  auto r = neg.on_message(msg.sub_id, msg.message);
  if (!r.error.empty())
    return send_neg_err(msg.sub_id, r.error);
  send(proto::render_neg_msg(msg.sub_id, r.answer));
}

void connection_state::on_neg_close(const proto::neg_close_msg& msg) {
  // An open still at the pool must not run for nobody.
  if (auto pending = neg.opening_of(msg.sub_id)) {
    reads.done(pending->ticket);
    self->send(peers.reader, read_withdraw{{pending->request_id}, false});
  }
  neg.close(msg.sub_id);
}

}  // namespace waggle
