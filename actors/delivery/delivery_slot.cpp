#include "actors/delivery/delivery_slot.hpp"

#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "messages/proto/nip98.hpp"

namespace waggle {

void delivery_slot_state::init(delivery_slot_ptr self_ptr, delivery_supervisor_actor sup,
                               std::shared_ptr<gateway::http_client> client,
                               delivery_slot_settings s, node_env e) {
  self = self_ptr;
  supervisor = std::move(sup);
  http = std::move(client);
  settings = std::move(s);
  env = std::move(e);
}

void delivery_slot_state::on_attempt(delivery_attempt& a) {
  // Its clock reading (the NIP-98 time) and its post_out stay together in a
  // trace, whatever other actors record meanwhile.
  trace_section section{env};
  if (current) {
    // The supervisor gives a slot one job at a time; a second one is a bug
    // there, and sending it back unanswered keeps its row from being lost.
    log::error("delivery_slot", "attempt while busy", {{"slot", std::to_string(settings.index)}});
    self->send(supervisor, delivery_done{settings.index, std::move(a.job), {0, "slot busy"}});
    return;
  }
  current = std::move(a.job);
  gateway::http_post post;
  post.url = current->url;
  post.body = current->body;
  post.timeout = settings.timeout;
  post.headers.emplace_back("Authorization",
                            proto::make_nip98(settings.relay_secret, post.url, "POST", post.body,
                                              env.unix_now()));
  post.headers.emplace_back("X-Waggle-Delivery-Id", current->delivery_id);
  // The slot's output (docs/traces.md): a replay's HTTP client is a stand-in
  // that compares what it is asked to POST with this record. (Guarded: the
  // copy of the job is for the trace only.)
  if (env.trace)
    trace_node_message(env, "post_out", delivery_attempt{*current});
  // Weakly held: a slot stopped mid-request is not kept alive by its client.
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  http->post(std::move(post), [weak](gateway::http_result r) {
    // Redirects are never followed (the listener's URL is configured, not
    // discovered): said so in the log, where the location is not repeated.
    if (r.status >= 300 && r.status < 400 && r.error.empty())
      r.error = "redirect not followed";
    if (auto strong = caf::actor_cast<caf::actor>(weak))
      caf::anon_send(strong, delivery_response_in{{r.status, std::move(r.error)}});
  });
}

void delivery_slot_state::on_response(delivery_response_in& in) {
  trace_section section{env};
  trace_node_message(env, "input", in);
  if (!current)
    return;  // a stale answer (cannot happen: one request per job)
  auto job = std::move(*current);
  current.reset();
  self->send(supervisor, delivery_done{settings.index, std::move(job), std::move(in.response)});
}

delivery_slot_actor::behavior_type
delivery_slot_actor_impl(delivery_slot_ptr self, delivery_supervisor_actor supervisor,
                         std::shared_ptr<gateway::http_client> http,
                         delivery_slot_settings settings, node_env env) {
  self->state.init(self, std::move(supervisor), std::move(http), std::move(settings),
                   std::move(env));
  return {
    [self](delivery_attempt& a) { self->state.on_attempt(a); },
    [self](delivery_response_in& in) { self->state.on_response(in); },
  };
}

}  // namespace waggle
