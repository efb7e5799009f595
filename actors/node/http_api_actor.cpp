#include "actors/node/http_api_actor.hpp"

#include "actors/communities/management_actor.hpp"
#include "actors/delivery/listener_registry.hpp"
#include "actors/support/log.hpp"
#include "db/bus_store.hpp"
#include "db/cluster_store.hpp"
#include "messages/proto/nip98.hpp"

namespace waggle {

void http_api_state::init(http_api_ptr self_ptr, http_api_context context) {
  self = self_ptr;
  ctx = std::move(context);
}

std::string http_api_state::replayed(const proto::nip98_result& auth) {
  if (!ctx.seen)
    return {};
  auto use = ctx.seen->record(auth.token_key, auth.created_at + ctx.auth_window,
                              ctx.env.sources.unix_now());
  if (use == seen_tokens::use::first)
    return {};
  if (use == seen_tokens::use::replayed)
    return std::string{"auth-required: "} + nip98_replayed_reason;
  return "unavailable: too many NIP-98 tokens in use, retry later";
}

void http_api_state::on_manage(manage_call_in& call) {
  auto auth = proto::verify_nip98(call.authorization, "POST", call.host, call.target, call.body,
                                  ctx.env.sources.unix_now(), ctx.auth_window, true);
  if (!auth.ok)
    return finish({401, rpc_error_body(auth.err.message())});
  if (auto refused = replayed(auth); !refused.empty())
    return finish({refused.rfind("auth-required:", 0) == 0 ? uint16_t{401} : uint16_t{503},
                   rpc_error_body(refused)});
  // The management actor ends the call by the deadline (504, rolled back);
  // this actor waits a grace longer, for an answer stuck in its commit.
  auto deadline = std::chrono::steady_clock::now() + ctx.answer_timeout;
  auto deadline_ns
    = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
  self
    ->request(ctx.management, ctx.answer_timeout + manage_answer_grace,
              manage_request{ctx.community_id, auth.pubkey, std::move(call.body), deadline_ns,
                             auth.token_key, auth.created_at + ctx.auth_window})
    .then(
      [this](manage_reply& r) {
        // Like a NIP-43 leave: the removed key's subscriptions end before
        // the admin hears "done" (the watcher's revocation follows later).
        if (!r.revoked.empty())
          self->send(ctx.board->get()->hub, access_revoked{ctx.community_id, r.revoked});
        finish({r.http_status, std::move(r.body)});
      },
      [this](caf::error&) {
        // Its commit began before the deadline and has not ended since: it
        // may still land, so say so, not "nothing changed".
        finish({503, rpc_error_body("unavailable: no answer in time; the call may still be "
                                    "applied, list to check")});
      });
}

void http_api_state::on_listener(listener_call_in& call) {
  // A POST's token must bind its body (payload tag); a GET has none.
  auto auth = proto::verify_nip98(call.authorization, call.list ? "GET" : "POST", call.host,
                                  call.target, call.body, ctx.env.sources.unix_now(),
                                  ctx.auth_window, !call.list);
  if (!auth.ok)
    return finish({401, json_error_body(auth.err.message())});
  if (auto refused = replayed(auth); !refused.empty())
    return finish({refused.rfind("auth-required:", 0) == 0 ? uint16_t{401} : uint16_t{503},
                   json_error_body(refused)});
  if (!ctx.operator_listeners.count(auth.pubkey))
    return finish({403, json_error_body("restricted: " + auth.pubkey
                                        + " is not a configured operator listener")});
  auto registry = ctx.board->get()->listeners;
  if (!registry)
    return finish({503, json_error_body("unavailable: the registry is restarting")});
  self
    ->request(registry, ctx.answer_timeout,
              listener_registration_request{ctx.community_id, auth.pubkey, call.list,
                                            std::move(call.body)})
    .then([this](listener_registration_reply& r) { finish({r.http_status, std::move(r.body)}); },
          [this](caf::error&) {
            finish({503, json_error_body("unavailable: no answer in time; list to check")});
          });
}

void http_api_state::on_cluster(cluster_call_in& call) {
  auto auth = proto::verify_nip98(call.authorization, "GET", call.host, call.target, "",
                                  ctx.env.sources.unix_now(), ctx.auth_window, false);
  if (!auth.ok)
    return finish({401, json_error_body(auth.err.message())});
  if (auto refused = replayed(auth); !refused.empty())
    return finish({refused.rfind("auth-required:", 0) == 0 ? uint16_t{401} : uint16_t{503},
                   json_error_body(refused)});
  if (!ctx.operator_pubkeys.count(auth.pubkey))
    return finish({403, json_error_body("restricted: " + auth.pubkey + " is not an operator")});
  try {
    auto conn = db::bus::open(ctx.database_url, "cluster-api", std::chrono::seconds(5));
    auto nodes = db::cluster::registry_json(*conn, std::chrono::seconds(30));
    // Node ids and driver names are [A-Za-z0-9_-]: nothing to escape.
    finish({200, "{\"node\":\"" + ctx.node_id + "\",\"bus\":\"" + ctx.bus
                   + "\",\"nodes\":" + nodes + "}"});
  } catch (const std::exception& e) {
    // The reason stays in the log: it may name the database's address.
    log::warn("http_api", "GET /cluster could not read the registry", {{"error", e.what()}});
    finish({503, json_error_body("unavailable: the registry cannot be read")});
  }
}

void http_api_state::finish(gateway::http_rpc_reply reply) {
  ctx.done(std::move(reply));
  self->quit();
}

http_api_actor::behavior_type http_api_actor_impl(http_api_ptr self, http_api_context ctx) {
  self->state.init(self, std::move(ctx));
  return {
    // -- calls ------------------------------------------------------------------
    [self](manage_call_in& call) { self->state.on_manage(call); },
    [self](listener_call_in& call) { self->state.on_listener(call); },
    [self](cluster_call_in& call) { self->state.on_cluster(call); },
  };
}

}  // namespace waggle
