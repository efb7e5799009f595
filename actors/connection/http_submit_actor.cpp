#include "actors/connection/http_submit_actor.hpp"

#include "actors/connection/event_admission.hpp"
#include "actors/connection/policy_gate.hpp"
#include "actors/connection/store_request.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "messages/outcome.hpp"
#include "messages/proto/nip98.hpp"

namespace waggle {

void http_submit_state::init(http_submit_ptr self_ptr, http_submit_context context) {
  self = self_ptr;
  ctx = std::move(context);
}

std::optional<http_event_in> http_submit_state::authorize(http_request_in& req) {
  // Outside the recorded boundary, like the header itself: a trace starts
  // from the pubkey NIP-98 proved (http_event_in), so this clock reading is
  // the source's, not the trace's.
  auto now = ctx.env.sources.unix_now();
  auto auth = proto::verify_nip98(req.authorization, "POST", req.host, req.target, req.body, now,
                                  ctx.settings.policy.auth_window);
  if (!auth.ok) {
    if (auth.missing_payload && ctx.env.stats)
      ctx.env.stats->count_refused("nip98_payload");
    // Not an event yet: answered, not counted in the event metrics.
    finish({}, answer_for(auth.err), false);
    return std::nullopt;
  }
  if (ctx.seen) {
    auto use = ctx.seen->record(auth.token_key, auth.created_at + ctx.settings.policy.auth_window, now);
    if (use != seen_tokens::use::first) {
      finish({},
             answer_for(use == seen_tokens::use::replayed
                          ? status{ec::auth_required, nip98_replayed_reason}
                          : status{ec::unavailable, "too many NIP-98 tokens in use, retry later"}),
             false);
      return std::nullopt;
    }
  }
  if (req.body.empty()) {
    finish({}, answer_for(status{ec::invalid, "empty body, expected an event"}), false);
    return std::nullopt;
  }
  return http_event_in{std::move(auth.pubkey), std::move(req.body)};
}

void http_submit_state::on_event(const http_event_in& in) {
  auto parsed = proto::parse_event(in.text);
  if (!parsed)
    return finish({}, answer_for(parsed.error()));
  auto ev = std::make_shared<const proto::event>(std::move(*parsed));
  auto now = ctx.env.unix_now();
  auto admitted = classify_event(*ev, {{in.auth_pubkey}, now, ctx.settings.policy,
                                       ctx.settings.relay_pubkey, false});
  if (admitted.route == route::reject)
    return finish(ev->id, answer_for(admitted.refusal));
  policy_gate(
    self, ctx.env, ctx.policy, ctx.settings.write_policy, {ev, now, ctx.settings.remote_ip},
    [this, ev, where = admitted.route] { dispatch(ev, where); },
    [this, id = ev->id](const answer& a) { finish(id, a); });
}

void http_submit_state::dispatch(const event_ptr& ev, route where) {
  switch (where) {
    case route::reject:
      return;  // refused before the gate
    case route::ephemeral:
      return fan_out(ev);
    case route::membership:
      if (!ctx.membership)
        return finish(ev->id, answer_for(status{ec::unavailable, "membership requests are not served here"}));
      self->request(ctx.membership, ctx.settings.ingest_timeout,
                    membership_request{ctx.settings.community_id, ev})
        .then(
          [this, id = ev->id](membership_reply& reply) {
            finish(id, {reply.accepted, reply.message,
                        reply.accepted ? std::string_view{"accepted"} : std::string_view{"restricted"},
                        static_cast<uint16_t>(reply.accepted ? 200 : 403)});
          },
          [this, id = ev->id](caf::error&) {
            finish(id, answer_for(status{ec::unavailable, "membership actor unavailable"}));
          });
      return;
    case route::group_command:
    case route::store:
      break;
  }
  request_store(self, {ctx.ingest, ctx.group}, ctx.settings.ingest_timeout,
                ctx.settings.community_id, ev, [this, id = ev->id](ingest_reply& reply) {
                  finish(id, answer_for(reply.outcome, reply.reason));
                });
}

void http_submit_state::fan_out(const event_ptr& ev) {
  // Only for those who may use the community (channel events never come
  // here over HTTP: classify_event refuses them).
  if (ctx.settings.community_open) {
    self->send(ctx.hub, committed_events{{ingest_item{ctx.settings.community_id, ev}}});
    return finish(ev->id, answer_for(status{}));
  }
  self->request(ctx.reader, ctx.settings.read_timeout,
                access_request{ctx.settings.community_id, {{}, {ev->pubkey}}})
    .then(
      [this, ev](access_reply& reply) {
        if (!reply.err.ok())
          return finish(ev->id, answer_for(reply.err));
        self->send(ctx.hub, committed_events{{ingest_item{ctx.settings.community_id, ev}}});
        finish(ev->id, answer_for(status{}));
      },
      [this, ev](caf::error&) {
        finish(ev->id, answer_for(status{ec::unavailable, "access check failed"}));
      });
}

void http_submit_state::finish(const std::string& id, const answer& a, bool counted) {
  if (ctx.env.stats && counted)
    ctx.env.stats->count(a);
  ctx.done({id, a.accepted, a.message, a.http_status});
  self->quit();
}

http_submit_actor::behavior_type http_submit_actor_impl(http_submit_ptr self,
                                                        http_submit_context ctx) {
  self->state.init(self, std::move(ctx));
  return {
    // -- requests ---------------------------------------------------------------
    [self](http_request_in& req) {
      auto& ctx = self->state.ctx;
      trace_section section{ctx.env};  // http_in and what ingest is sent after it
      if (auto in = self->state.authorize(req))
        self->state.on_event(trace_http_in(ctx.env, std::move(*in), ctx.settings.community_id, ctx.done));
    },
    // -- replay -----------------------------------------------------------------
    [self](http_event_in& in) { self->state.on_event(in); },
  };
}

}  // namespace waggle
