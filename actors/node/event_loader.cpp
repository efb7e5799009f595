#include "actors/node/event_loader.hpp"

#include <atomic>
#include <future>
#include <stdexcept>

#include <caf/scoped_actor.hpp>

#include "actors/node/node.hpp"
#include "db/community_store.hpp"
#include "db/migrate.hpp"

namespace waggle {

result<community> find_community(pqxx::connection& conn, const std::string& host) {
  auto all = db::load_communities(conn);
  std::string hosts;
  for (const auto& c : all)
    hosts += (hosts.empty() ? "" : ", ") + c.host;
  if (host.empty()) {
    if (all.size() == 1)
      return all.front();
    return status{ec::invalid, all.empty() ? std::string{"the database holds no community"}
                                           : "the database holds several communities (" + hosts
                                               + "): name one with --community HOST"};
  }
  auto wanted = normalize_host(host);
  for (auto& c : all)
    if (c.host == wanted)
      return c;
  return status{ec::invalid, "no community " + wanted + " in this database ("
                               + (hosts.empty() ? std::string{"it holds none"} : "it holds " + hosts)
                               + "; add it with `waggle community add`)"};
}

event_loader::event_loader(loader_config cfg) : cfg_(std::move(cfg)) {
  {
    pqxx::connection conn{cfg_.node.database_url};
    if (!db::migrations_current(conn, db::embedded_migrations()))
      throw std::runtime_error("the database's migrations are not current: run `waggle migrate`");
    auto c = find_community(conn, cfg_.community);
    if (!c)
      throw std::runtime_error(c.error().reason);
    community_id_ = c->id;
  }
  node_ = std::make_unique<node>(cfg_.node, cfg_.env);
  if (auto st = node_->start_checks(); !st.ok()) {
    node_->stop();
    throw std::runtime_error("the relay's start-up checks failed: " + st.reason);
  }
}

event_loader::~event_loader() {
  if (!node_)
    return;
  settle();  // a failure was the caller's to see; here there is no one to tell
  node_->stop();
}

const std::string& event_loader::relay_pubkey() const { return node_->relay_pubkey(); }

std::vector<load_result> event_loader::load(std::vector<std::string> raw_events) {
  // The current handles: the supervisor replaces a restarted ingest or group
  // actor on the board, and each load takes whatever is there now.
  auto handles = node_->handles();
  load_context ctx;
  ctx.settings.community_id = community_id_;
  ctx.settings.relay_pubkey = node_->relay_pubkey();
  ctx.settings.policy = {cfg_.node.created_at_window, cfg_.node.auth_window};
  ctx.settings.max_event_bytes = cfg_.node.max_frame_bytes;
  ctx.settings.reply_timeout = cfg_.reply_timeout;
  ctx.peers = {handles->ingest, handles->group};
  ctx.env = cfg_.env.for_actor("load");
  ctx.raws = std::move(raw_events);
  // Answered once: by the actor, or, should it end without answering (an
  // exception in a handler), by its end.
  auto answered = std::make_shared<std::promise<load_outcome>>();
  auto once = std::make_shared<std::atomic<bool>>(false);
  auto outcome = answered->get_future();
  ctx.done = [answered, once](load_outcome out) {
    if (!once->exchange(true))
      answered->set_value(std::move(out));
  };
  auto worker = node_->system().spawn(load_actor_impl, std::move(ctx));
  worker->attach_functor([answered, once] {
    if (!once->exchange(true))
      answered->set_exception(
        std::make_exception_ptr(std::runtime_error("the load actor ended without an answer")));
  });
  auto out = outcome.get();
  unsettled_.insert(out.channels.begin(), out.channels.end());
  return std::move(out.results);
}

status event_loader::settle() {
  caf::scoped_actor self{node_->system()};
  status first_error;
  for (auto i = unsettled_.begin(); i != unsettled_.end();) {
    status st{ec::unavailable, "group actor unavailable"};
    if (auto group = node_->handles()->group)
      self->request(group, cfg_.reply_timeout,
                    roster_publish_request{community_id_, *i, cfg_.env.unix_now()})
        .receive([&](roster_publish_reply& reply) { st = reply.err; },
                 [&](caf::error& err) { st = {ec::unavailable, caf::to_string(err)}; });
    if (st.ok()) {
      i = unsettled_.erase(i);
      continue;
    }
    if (first_error.ok())
      first_error = {st.code, "group state of channel " + *i + " not published: " + st.reason};
    ++i;
  }
  return first_error;
}

}  // namespace waggle
