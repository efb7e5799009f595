#include "actors/node.hpp"

#include <filesystem>
#include <fstream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/rand.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "actors/admission.hpp"
#include "actors/log.hpp"
#include "messages/proto/nip29.hpp"

namespace waggle {

std::string load_or_create_relay_key(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::exists(path)) {
    std::ifstream in{path};
    std::string hex;
    in >> hex;
    if (!proto::is_lower_hex(hex, 64))
      throw std::runtime_error("relay key file is not 64 lowercase hex characters: " + path);
    return hex;
  }
  if (auto dir = fs::path{path}.parent_path(); !dir.empty())
    fs::create_directories(dir);
  unsigned char secret[32];
  if (RAND_bytes(secret, sizeof(secret)) != 1)
    throw std::runtime_error("RAND_bytes failed");
  auto hex = proto::to_hex(secret, sizeof(secret));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    throw std::runtime_error("cannot create relay key file " + path);
  auto line = hex + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok)
    throw std::runtime_error("cannot write relay key file " + path);
  log::info("node", "created relay key", {{"path", path}});
  return hex;
}

node::node(node_config cfg, node_env env)
  : cfg_(std::move(cfg)), env_(std::move(env)) {
  db::relay_signer signer;
  signer.secret = load_or_create_relay_key(cfg_.relay_key_file);
  signer.pubkey = proto::pubkey_of(signer.secret);
  relay_pubkey_ = signer.pubkey;
  sys_cfg_ = std::make_unique<caf::actor_system_config>();
  register_types(*sys_cfg_);
  sys_cfg_->set("logger.verbosity", caf::atom("quiet"));
  // CAF's default is max(cores, 4) workers that poll for work, sleeping 50 us
  // between attempts once the first burst of spinning found nothing. On a
  // small machine that shares its cores with PostgreSQL, the extra workers and
  // the polling take CPU the database needs (docs/benchmarks.md, "CAF
  // scheduler"). One worker per core, and an idle worker goes straight from
  // its short spin to a condition variable that new work notifies.
  auto cores = std::max(1u, std::thread::hardware_concurrency());
  sys_cfg_->set("scheduler.max-threads",
                cfg_.scheduler_threads ? cfg_.scheduler_threads : static_cast<size_t>(cores));
  sys_cfg_->set("work-stealing.moderate-poll-attempts", size_t{0});
  system_ = std::make_unique<caf::actor_system>(*sys_cfg_);
  board_ = std::make_shared<handle_board>();
  snapshot_ = std::make_shared<community_snapshot>();
  supervisor_ = system_->spawn(node_supervisor_impl, cfg_, env_, std::move(signer), board_,
                               snapshot_);
}

node::~node() {
  stop();
}

void node::stop() {
  if (!system_)
    return;
  caf::anon_send_exit(supervisor_, caf::exit_reason::user_shutdown);
  {
    std::lock_guard guard{conn_mtx_};
    for (auto& c : connections_)
      caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
  }
  system_->await_all_actors_done();
  system_.reset();
}

size_t node::open_connections() const {
  std::lock_guard guard{conn_mtx_};
  return connections_.size();
}

gateway::node_api node::api() {
  gateway::node_api api;
  api.find_community = [this](std::string_view host) { return snapshot_->find(host); };
  api.open_connection = [this](const db::community& c, const std::string& host,
                               socket_sink_ptr sink) { return open_connection(c, host, sink); };
  api.submit_event = [this](const db::community& c, std::string json, std::string auth_pubkey,
                            std::function<void(gateway::http_event_reply)> done) {
    submit_event(c, std::move(json), std::move(auth_pubkey), std::move(done));
  };
  api.relay_info = [this](const db::community& c) { return relay_info_json(c); };
  api.ready = [this] { return ready() && !draining_; };
  api.draining = [this] { return draining_.load(); };
  api.stats = env_.stats.get();
  return api;
}

caf::actor node::open_connection(const db::community& c, const std::string& host,
                                 socket_sink_ptr sink) {
  auto handles = board_->get();
  connection_settings settings;
  settings.community_id = c.id;
  settings.host = host;
  settings.policy.created_at_window = cfg_.created_at_window;
  settings.policy.auth_window = cfg_.auth_window;
  settings.limits.max_filters = cfg_.max_filters;
  settings.limits.max_values = cfg_.max_filter_values;
  settings.limits.default_limit = cfg_.default_limit;
  settings.limits.max_limit = cfg_.max_limit;
  settings.max_subscriptions = cfg_.max_subscriptions;
  settings.relay_pubkey = relay_pubkey_;
  auto conn = system_->spawn(
    connection_actor_impl, settings,
    connection_peers{handles->ingest, handles->hub, handles->reader, handles->group}, env_,
    std::move(sink));
  auto handle = caf::actor_cast<caf::actor>(conn);
  {
    std::lock_guard guard{conn_mtx_};
    connections_.insert(handle);
  }
  handle->attach_functor([this, handle] {
    std::lock_guard guard{conn_mtx_};
    connections_.erase(handle);
  });
  if (draining_)
    caf::anon_send(conn, drain_request{});
  return handle;
}

void node::submit_event(const db::community& c, std::string json, std::string auth_pubkey,
                        std::function<void(gateway::http_event_reply)> done) {
  auto handles = board_->get();
  admission_policy policy;
  policy.created_at_window = cfg_.created_at_window;
  policy.auth_window = cfg_.auth_window;
  // A one-shot actor, so parsing and signature checks run on scheduler
  // threads (the body arrives as a message), never on the io thread.
  auto worker = system_->spawn([handles, policy, community_id = c.id, env = env_,
                                relay_pubkey = relay_pubkey_,
                                auth_pubkey = std::move(auth_pubkey),
                                done = std::move(done)](caf::event_based_actor* self) {
    return caf::behavior{
      [=](socket_frame& frame) {
        auto parsed = proto::parse_event(frame.text);
        if (!parsed) {
          done({"", false, parsed.error().message()});
          return self->quit();
        }
        auto ev = std::make_shared<const proto::event>(std::move(*parsed));
        namespace nip29 = proto::nip29;
        auto channel = nip29::channel_of(*ev);
        auto st = admit_event(*ev, {auth_pubkey}, env.unix_now(), policy);
        if (st.ok() && !channel)
          st = channel.error();
        if (st.ok() && nip29::is_group_state(ev->kind) && ev->pubkey != relay_pubkey)
          st = {ec::restricted, "group state (kinds 39000-39003) is signed by the relay"};
        if (st.ok() && proto::is_ephemeral(ev->kind) && channel && *channel)
          st = {ec::restricted, "ephemeral channel events are accepted over WebSocket only"};
        if (!st.ok()) {
          if (env.stats)
            env.stats->count_rejected(std::string{prefix_of(st.code)});
          done({ev->id, false, st.message()});
          return self->quit();
        }
        if (nip29::is_group_command(ev->kind)) {
          self->request(handles->group, std::chrono::seconds(30), group_request{community_id, ev})
            .then(
              [=](ingest_reply& reply) {
                auto answer = answer_for(reply.outcome, reply.reason);
                done({ev->id, answer.accepted, answer.message});
                self->quit();
              },
              [=](caf::error&) {
                done({ev->id, false, "error: group actor unavailable"});
                self->quit();
              });
          return;
        }
        if (proto::is_ephemeral(ev->kind)) {
          self->send(handles->hub, committed_events{{db::ingest_item{community_id, ev}}});
          done({ev->id, true, ""});
          return self->quit();
        }
        self->request(handles->ingest, std::chrono::seconds(30), ingest_request{community_id, ev})
          .then(
            [=](ingest_reply& reply) {
              auto answer = answer_for(reply.outcome, reply.reason);
              if (env.stats && reply.outcome == db::write_outcome::stored)
                ++env.stats->events_accepted;
              done({ev->id, answer.accepted, answer.message});
              self->quit();
            },
            [=](caf::error&) {
              done({ev->id, false, "error: ingest unavailable"});
              self->quit();
            });
      },
    };
  });
  caf::anon_send(worker, socket_frame{std::move(json)});
}

std::string node::relay_info_json(const db::community& c) const {
  using namespace rapidjson;
  StringBuffer buf;
  Writer<StringBuffer> w{buf};
  w.StartObject();
  w.Key("name");
  w.String(cfg_.relay_name + (c.name.empty() ? "" : " — " + c.name));
  w.Key("description");
  w.String(cfg_.relay_description);
  w.Key("pubkey");
  w.String(relay_pubkey_);
  w.Key("supported_nips");
  w.StartArray();
  for (int nip : {1, 9, 11, 29, 42, 45, 98})
    w.Int(nip);
  w.EndArray();
  w.Key("software");
  w.String("waggle");
  w.Key("version");
  w.String("0.1.0");
  w.Key("limitation");
  w.StartObject();
  w.Key("max_message_length");
  w.Uint64(cfg_.max_frame_bytes);
  w.Key("max_subscriptions");
  w.Uint64(cfg_.max_subscriptions);
  w.Key("max_filters");
  w.Uint64(cfg_.max_filters);
  w.Key("max_limit");
  w.Uint(cfg_.max_limit);
  w.Key("default_limit");
  w.Uint(cfg_.default_limit);
  w.Key("max_subid_length");
  w.Uint64(proto::max_subscription_id_len);
  w.Key("auth_required");
  w.Bool(true);
  w.Key("restricted_writes");
  w.Bool(true);
  w.Key("created_at_lower_limit");
  w.Int64(cfg_.created_at_window);
  w.Key("created_at_upper_limit");
  w.Int64(cfg_.created_at_window);
  w.EndObject();
  w.EndObject();
  return buf.GetString();
}

status node::start_checks() {
  using namespace std::chrono;
  auto deadline = steady_clock::now() + seconds(cfg_.startup_timeout_seconds);
  caf::scoped_actor self{*system_};
  // Retries while the database is unreachable (ec::unavailable) until the
  // deadline; any other failure is final.
  auto until_available = [&](auto&& attempt) -> status {
    for (;;) {
      status st = attempt();
      if (st.code != ec::unavailable || steady_clock::now() >= deadline)
        return st;
      std::this_thread::sleep_for(milliseconds(500));
    }
  };
  // The supervisor publishes its children's handles asynchronously (and
  // again after a restart): read them on every attempt.
  auto probe = [&](auto pick) {
    return until_available([&]() -> status {
      status st{ec::unavailable, "no answer"};
      auto target = pick(*board_->get());
      if (!target)
        return st;
      self->request(target, seconds(30), fence_probe_request{})
        .receive([&](fence_probe_reply& reply) { st = reply.err; },
                 [&](caf::error& err) { st = {ec::unavailable, caf::to_string(err)}; });
      return st;
    });
  };
  if (auto st = probe([](const node_handles& h) { return h.ingest; }); !st.ok())
    return st;
  if (auto st = probe([](const node_handles& h) { return h.group; }); !st.ok())
    return st;
  // Rosters that differ from channel_members (a crash between a change and
  // its publication, an old node's capped snapshot): republish before serving.
  return until_available([&]() -> status {
    status st{ec::unavailable, "no answer"};
    auto group = board_->get()->group;
    if (!group)
      return st;
    self->request(group, seconds(120), roster_repair_request{env_.unix_now()})
      .receive(
        [&](roster_repair_reply& reply) {
          st = reply.err;
          if (st.ok() && reply.repaired > 0)
            log::warn("node", "repaired stale roster snapshots",
                      {{"count", std::to_string(reply.repaired)}});
        },
        [&](caf::error& err) { st = {ec::unavailable, caf::to_string(err)}; });
    return st;
  });
}

void node::drain(std::chrono::milliseconds bound) {
  draining_ = true;
  std::vector<caf::actor> conns;
  {
    std::lock_guard guard{conn_mtx_};
    conns.assign(connections_.begin(), connections_.end());
  }
  for (auto& c : conns)
    caf::anon_send(caf::actor_cast<connection_actor>(c), drain_request{});
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (open_connections() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace waggle
