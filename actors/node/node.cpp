#include "actors/node/node.hpp"

#include <filesystem>
#include <fstream>
#include <thread>

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/rand.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "actors/bus/caf_bus.hpp"
#include "actors/bus/inproc_bus.hpp"
#include "actors/bus/nats_bus.hpp"
#include "actors/fanout/cluster_relay.hpp"
#include "actors/fanout/cluster_tail.hpp"
#include "actors/push/push_gate_relay.hpp"
#include "actors/bus/pg_bus.hpp"
#include "actors/connection/event_admission.hpp"
#include "actors/communities/management_actor.hpp"
#include "actors/node/http_api_actor.hpp"
#include "actors/support/trim_policy.hpp"
#include "actors/reads/heartbeat_ring.hpp"
#include "actors/connection/http_submit_actor.hpp"
#include "gateway/ip_admission.hpp"
#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "messages/proto/nip29.hpp"
#include "messages/proto/nip42.hpp"
#include "messages/register_types.hpp"

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

// Not through node_env: a node's identity is no reading a trace replays.
static std::string random_node_id() {
  unsigned char bytes[8];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1)
    throw std::runtime_error("RAND_bytes failed");
  return proto::to_hex(bytes, sizeof(bytes));
}

// The host name and the port, so a node keeps its id across restarts (its
// peers see a restart, not a new node and a dead one); random when the
// port is ephemeral (0, the tests) or the host name gives nothing usable.
static std::string default_node_id(uint16_t port) {
  if (port == 0)
    return random_node_id();
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0)
    return random_node_id();
  std::string id;
  for (char c : std::string{host}) {
    if (c == '.')
      break;  // the short name: ids are at most 64 characters
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    id += ok ? c : '-';
  }
  if (id.empty())
    return random_node_id();
  id = id.substr(0, 57) + "-" + std::to_string(port);
  return id;
}

node::node(node_config cfg, node_env env)
  : cfg_(std::move(cfg)), env_(std::move(env)) {
  db::relay_signer signer;
  signer.secret = load_or_create_relay_key(cfg_.relay_key_file);
  signer.pubkey = proto::pubkey_of(signer.secret);
  relay_pubkey_ = signer.pubkey;
  subscription_budget_ = std::make_shared<memory_budget>(cfg_.max_subscription_bytes_total);
  negentropy_budget_ = std::make_shared<memory_budget>(cfg_.max_neg_bytes_total);
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
  node_id_ = cfg_.node_id.empty() ? default_node_id(cfg_.port) : cfg_.node_id;
  if (cfg_.bus == "caf")
    configure_caf_bus(*sys_cfg_, caf_bus_settings{}.protocol_version);
  system_ = std::make_unique<caf::actor_system>(*sys_cfg_);
  board_ = std::make_shared<handle_board>();
  snapshot_ = std::make_shared<community_snapshot>();
  // A block made on any node reaches every node's directory (its NOTIFY, or
  // the 2 s refresh): each closes its own connections from the address.
  snapshot_->on_new_block([this](int64_t community_id, const std::string& ip) {
    log::info("node", "closing connections from a blocked address",
              {{"community", std::to_string(community_id)}, {"ip", ip}});
    std::lock_guard guard{conn_mtx_};
    for (const auto& conn : connections_)
      caf::anon_send(conn, address_blocked{community_id, ip});
  });
  read_buckets_ = std::make_shared<shared_read_buckets>(
    bucket_rate{static_cast<double>(cfg_.read_rate_pubkey),
                static_cast<double>(cfg_.read_burst_pubkey)},
    bucket_rate{static_cast<double>(cfg_.read_rate_address),
                static_cast<double>(cfg_.read_burst_address)});
  supervisor_ = system_->spawn(node_supervisor_actor_impl, cfg_, env_, std::move(signer), board_,
                               snapshot_);
  management_settings mgmt{cfg_.database_url, {}};
  mgmt.operator_pubkeys.insert(cfg_.operator_pubkeys.begin(), cfg_.operator_pubkeys.end());
  for (size_t i = 0; i < management_workers; ++i)
    management_.push_back(system_->spawn<caf::detached>(management_actor_impl, mgmt));
  start_bus();
  if (cfg_.bus != "inproc")
    start_cluster();
  trimmer_ = std::thread([this] { trim_loop(); });
}

void node::start_bus() {
  // The bus drivers record nothing: no replay runs them (their connections,
  // peers and timers), and their clock readings would only fill a trace.
  // What the bus brings is recorded where an actor takes it (bus_probe).
  auto env = env_;
  env.trace = nullptr;
  if (cfg_.bus == "postgres") {
    pg_bus_settings s;
    s.database_url = cfg_.database_url;
    s.node_id = node_id_;
    bus_ = system_->spawn(pg_bus_impl, s, env.for_actor("bus"));
  } else if (cfg_.bus == "caf") {
    caf_bus_settings s;
    s.database_url = cfg_.database_url;
    s.node_id = node_id_;
    s.address = cfg_.bus_bind;
    s.port = cfg_.bus_port;
    auto bus = spawn_caf_bus(*system_, s, env);
    if (!bus)
      throw std::runtime_error("the CAF bus did not start: " + system_->render(bus.error()));
    bus_ = *bus;
  } else if (cfg_.bus == "nats") {
    nats_bus_settings s;
    s.url = cfg_.nats_url;
    s.node_id = node_id_;
    auto bus = spawn_nats_bus(*system_, s, env);
    if (!bus)
      throw std::runtime_error("the NATS bus did not start: " + system_->render(bus.error()));
    bus_ = *bus;
  } else {
    bus_ = system_->spawn(inproc_bus_impl, env.for_actor("bus"));
  }
  log::info("node", "bus started", {{"driver", cfg_.bus}, {"node_id", node_id_}});
}

// Cluster fanout (docs/scaling.md): with a bus that reaches other nodes,
// the tail reads what every node commits and the relay rings the others'
// doorbells. Both find the hub through the board, so they follow the
// supervisor's restarts of it.
void node::start_cluster() {
  auto current_hub = [board = board_] { return board->get()->hub; };
  cluster_tail_settings tail_settings;
  tail_settings.database_url = cfg_.database_url;
  tail_settings.node_id = node_id_;
  tail_settings.poll = std::chrono::milliseconds(cfg_.cluster_poll_ms);
  cluster_tail_ = system_->spawn<caf::detached>(cluster_tail_impl, tail_settings, current_hub,
                                                env_.for_actor("cluster_tail"));
  cluster_relay_settings relay_settings;
  relay_settings.node_id = node_id_;
  relay_settings.doorbell = cfg_.cluster_doorbell;
  auto current_group = [board = board_] { return board->get()->group; };
  cluster_relay_ = system_->spawn(cluster_relay_impl, bus_, cluster_tail_, current_hub,
                                  current_group,
                                  relay_settings, env_.for_actor("cluster_relay"));
  if (ingest_settings_for(cfg_).cluster_gate) {
    push_gate_relay_settings gate_settings;
    gate_settings.database_url = cfg_.database_url;
    gate_settings.node_id = node_id_;
    push_gate_relay_ = system_->spawn<caf::detached>(
      push_gate_relay_impl, bus_, [board = board_] { return board->get()->ingest; },
      gate_settings, env_.for_actor("push_gate_relay"));
  }
  log::info("node", "cluster fanout started", {{"node_id", node_id_}});
}

// Once a second, trim_policy decides whether freed heap goes back to the
// system (actors/support/trim_policy.hpp), on this thread, not an actor's: a
// trim of a large heap takes milliseconds, and so may mallinfo2.
void node::trim_loop() {
  trim_policy policy;
  std::unique_lock lock{trim_mtx_};
  while (!trim_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return trim_stop_; })) {
    if (policy.should_trim(subscription_budget_->take_released(), mallinfo2().fordblks)) {
      malloc_trim(0);
      policy.trimmed(mallinfo2().fordblks);
    }
  }
}

node::~node() {
  stop();
}

void node::stop() {
  if (trimmer_.joinable()) {
    {
      std::lock_guard guard{trim_mtx_};
      trim_stop_ = true;
    }
    trim_cv_.notify_all();
    trimmer_.join();
  }
  if (!system_)
    return;
  caf::anon_send_exit(supervisor_, caf::exit_reason::user_shutdown);
  for (auto& worker : management_)
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(bus_probe_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(cluster_relay_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(cluster_tail_, caf::exit_reason::user_shutdown);
  if (push_gate_relay_)
    caf::anon_send_exit(push_gate_relay_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(bus_, caf::exit_reason::user_shutdown);
  {
    std::lock_guard guard{conn_mtx_};
    for (auto& c : connections_)
      caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
  }
  system_->await_all_actors_done();
  // The board's handles are strong references, and a detached actor's thread
  // (the membership actor's, the write-policy plugin's) waits for its actor to be
  // destroyed before the actor system can be.
  board_->set({});
  management_.clear();  // strong handles, like the board's
  bus_probe_ = nullptr;
  cluster_relay_ = nullptr;
  cluster_tail_ = nullptr;
  push_gate_relay_ = nullptr;
  bus_ = nullptr;
  system_.reset();
}

size_t node::open_connections() const {
  std::lock_guard guard{conn_mtx_};
  return connections_.size();
}

gateway::node_api node::api() {
  gateway::node_api api;
  api.find_community = [this](std::string_view host) { return snapshot_->find(host); };
  api.open_connection = [this](const community& c, const std::string& host,
                               const std::string& remote_ip, socket_sink_ptr sink) {
    return open_connection(c, host, remote_ip, sink);
  };
  api.submit_event = [this](const community& c, gateway::http_event_request request,
                            std::function<void(gateway::http_event_reply)> done) {
    submit_event(c, std::move(request), std::move(done));
  };
  api.manage = [this](const community& c, gateway::http_event_request request,
                      std::function<void(gateway::http_rpc_reply)> done) {
    manage(c, std::move(request), std::move(done));
  };
  api.cluster = [this](const community& c, gateway::http_event_request request,
                       std::function<void(gateway::http_rpc_reply)> done) {
    cluster_info(c, std::move(request), std::move(done));
  };
  api.listener_registration = [this](const community& c, gateway::http_event_request request,
                                     std::function<void(gateway::http_rpc_reply)> done) {
    listener_registration(c, std::move(request), std::move(done));
  };
  api.relay_info = [this](const community& c) {
    return proto::relay_info_json(relay_info_for(cfg_, relay_pubkey_, c));
  };
  api.ready = [this] { return ready() && !draining_; };
  api.draining = [this] { return draining_.load(); };
  api.watch = std::make_shared<gateway_observer>(env_.stats);
  return api;
}

proto::filter_limits filter_limits_for(const node_config& cfg) {
  proto::filter_limits lim;
  lim.max_filters = cfg.max_filters;
  lim.max_values = cfg.max_filter_values;
  lim.default_limit = cfg.default_limit;
  lim.max_limit = cfg.max_limit;
  lim.search = cfg.search;
  lim.max_search_ranked = cfg.search_max_ranked;
  lim.search_timeout_ms = cfg.search_timeout_ms;
  return lim;
}

connection_settings connection_settings_for(const node_config& cfg,
                                            const std::string& relay_pubkey,
                                            int64_t community_id, const std::string& host,
                                            bool community_open) {
  connection_settings settings;
  settings.community_id = community_id;
  settings.community_open = community_open;
  settings.host = host;
  settings.policy.created_at_window = cfg.created_at_window;
  settings.policy.auth_window = cfg.auth_window;
  settings.limits = filter_limits_for(cfg);
  settings.max_subscriptions = cfg.max_subscriptions;
  settings.max_subscription_bytes = cfg.max_subscription_bytes;
  settings.max_history_bytes = cfg.max_history_bytes_per_connection;
  settings.history_stall = std::chrono::seconds(cfg.history_stall_seconds);
  settings.history_page_rows = cfg.history_page_rows;
  settings.note_write_answers = cfg.bounded_replica_reads();
  settings.max_auth_keys = cfg.max_auth_keys;
  settings.read_timeout = std::chrono::milliseconds(cfg.read_timeout_ms);
  settings.reads.max_in_flight = cfg.max_reads_in_flight;
  settings.reads.ipv6_prefix = cfg.ipv6_prefix;
  settings.reads.per_connection = {static_cast<double>(cfg.read_rate_connection),
                                   static_cast<double>(cfg.read_burst_connection)};
  settings.refusals.per_second = static_cast<double>(cfg.refusal_rate);
  settings.refusals.burst = static_cast<double>(cfg.refusal_burst);
  settings.refusals.max_pause = std::chrono::milliseconds(cfg.refusal_max_pause_ms);
  settings.relay_pubkey = relay_pubkey;
  settings.write_policy.timeout = std::chrono::milliseconds(cfg.write_policy_timeout_ms);
  settings.write_policy.fail_open = cfg.write_policy_fail == "open";
  settings.sync_pubkeys = {cfg.sync_pubkeys.begin(), cfg.sync_pubkeys.end()};
  settings.negentropy.enabled = cfg.negentropy;
  settings.negentropy.max_sessions = cfg.max_neg_sessions;
  settings.negentropy.max_items = cfg.max_neg_items;
  // An answer's hex, in its NEG-MSG frame, fits the frame size clients are
  // told (NIP-11 max_message_length), as theirs must fit ours.
  // 600 bytes of room: the frame's verbs and a 64-character id escaped six
  // bytes a character. Below about 9 KB a frame cannot hold the smallest
  // answer the protocol allows (docs/negentropy.md).
  settings.negentropy.frame_size_limit = std::max(
    proto::negentropy::min_frame_size_limit, cfg.max_frame_bytes > 600 ? (cfg.max_frame_bytes - 600) / 2 : 0);
  return settings;
}

write_policy_settings write_policy_settings_for(const node_config& cfg) {
  write_policy_settings settings;
  settings.path = cfg.write_policy;
  settings.max_queue = cfg.write_policy_queue;
  settings.timeout = std::chrono::milliseconds(cfg.write_policy_timeout_ms);
  settings.fail_open = cfg.write_policy_fail == "open";
  return settings;
}

ingest_settings ingest_settings_for(const node_config& cfg) {
  ingest_settings settings;
  settings.max_batch = cfg.max_batch;
  settings.commit_delay = std::chrono::microseconds(cfg.commit_delay_us);
  settings.commit_siblings = cfg.commit_siblings;
  settings.push_enabled = !cfg.push_gateway_url.empty();
  settings.push_gate_cache = cfg.push_gate_cache;
  // With the cache off too: such a node gates everything itself, but the
  // others' caches learn of its leases only by its asking, and their leases
  // wait for its answer (a cluster moving to the cache node by node).
  settings.cluster_gate = cfg.bus != "inproc" && settings.push_enabled;
  return settings;
}

db::lease_settings lease_settings_for(const node_config& cfg) {
  db::lease_settings s;
  s.quota = static_cast<int>(cfg.push_lease_quota);
  // Push off: leases are kept, but no history is matched for them.
  s.backfill = std::chrono::seconds(cfg.push_gateway_url.empty() ? 0 : cfg.push_backfill_seconds);
  s.created_at_window = std::chrono::seconds(cfg.created_at_window);
  return s;
}

std::string trace_node_json(const node_config& cfg, const std::string& relay_pubkey,
                            const std::string& bus_node_id) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  auto num = [&](const char* key, int64_t v) {
    w.Key(key);
    w.Int64(v);
  };
  w.StartObject();
  w.Key("relay_pubkey");
  w.String(relay_pubkey.c_str());
  num("writers", static_cast<int64_t>(cfg.writers));
  num("readers", static_cast<int64_t>(cfg.readers));
  num("max_batch", static_cast<int64_t>(cfg.max_batch));
  num("commit_delay_us", cfg.commit_delay_us);
  num("commit_siblings", static_cast<int64_t>(cfg.commit_siblings));
  num("created_at_window", cfg.created_at_window);
  num("auth_window", cfg.auth_window);
  num("max_subscriptions", static_cast<int64_t>(cfg.max_subscriptions));
  num("max_filters", static_cast<int64_t>(cfg.max_filters));
  num("max_filter_values", static_cast<int64_t>(cfg.max_filter_values));
  num("default_limit", cfg.default_limit);
  num("max_limit", cfg.max_limit);
  w.Key("search");
  w.Bool(cfg.search);
  num("max_subscription_bytes", static_cast<int64_t>(cfg.max_subscription_bytes));
  num("group_sessions", static_cast<int64_t>(cfg.group_sessions));
  num("max_group_queue_per_community", static_cast<int64_t>(cfg.max_group_queue_per_community));
  num("roster_idle_seconds", cfg.roster_idle_seconds);
  num("max_history_bytes_per_connection",
      static_cast<int64_t>(cfg.max_history_bytes_per_connection));
  num("history_stall_seconds", cfg.history_stall_seconds);
  num("history_page_rows", cfg.history_page_rows);
  // Whether connections read the clock on every write answer (bounded
  // replica reads); the replay has no replica, so the flag travels alone.
  w.Key("note_write_answers");
  w.Bool(cfg.bounded_replica_reads());
  // 0: no delivery actors (no --operator-listeners), and none in the replay.
  num("delivery_slots",
      cfg.operator_listeners.empty() ? 0 : static_cast<int64_t>(cfg.delivery_slots));
  // Push (docs/push.md): whether ingest gates batches and the push actors
  // run. Not the gateway URL: the wakes' URL is in what the matcher sends.
  const bool push = !cfg.push_gateway_url.empty();
  w.Key("push_enabled");
  w.Bool(push);
  w.Key("push_gate_cache");
  w.Bool(cfg.push_gate_cache);
  num("push_slots", push ? static_cast<int64_t>(cfg.push_slots) : 0);
  num("push_completion_delay_ms", push ? cfg.push_completion_delay_ms : 0);
  // The bus driver: on any but inproc the node was clustered, and a replay
  // spawns the clustered hub (docs/traces.md, "The cluster").
  w.Key("bus");
  w.String(cfg.bus.c_str());
  // The bus probe (docs/bus.md): its subjects are named after the node.
  if (!bus_node_id.empty()) {
    w.Key("bus_node_id");
    w.String(bus_node_id.c_str());
    num("bus_probe_ms", cfg.bus_probe_ms);
  }
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

connection_actor node::open_connection(const community& c, const std::string& host_header,
                                       const std::string& remote_ip, socket_sink_ptr sink) {
  auto handles = board_->get();
  // The gateway hands the Host as sent: its port is what a NIP-42 relay tag
  // that names a port must match.
  const std::string host = normalize_host(host_header);
  auto settings = connection_settings_for(cfg_, relay_pubkey_, c.id, host,
                                          c.policy == community_policy::open);
  settings.host_port = proto::nip42::port_of_host(host_header);
  settings.remote_ip = remote_ip;
  settings.subscription_budget = subscription_budget_;
  settings.negentropy_budget = negentropy_budget_;
  settings.reads.shared = read_buckets_;
  settings.still_open = [snapshot = snapshot_, host] {
    auto now = snapshot->find(host);
    return now && now->policy == community_policy::open;
  };
  auto name = "conn-" + std::to_string(++connections_opened_);
  auto env = env_.for_actor(name);
  settings.policy_name = std::string(name_of(c.policy));
  // The connection actor records its own `open`, when it starts (docs/traces.md).
  if (env.trace && env.trace->wants_connection(name))
    sink = std::make_shared<traced_sink>(std::move(sink), env.trace, name);
  auto conn = system_->spawn(
    connection_actor_impl, settings,
    connection_peers{handles->ingest, handles->hub, handles->reader, handles->group,
                     handles->membership, handles->policy},
    std::move(env), std::move(sink));
  // Named for the trace's life, not the connection's: a read or an event it
  // sent can reach the pool or ingest after it closed.
  if (env_.trace)
    env_.trace->spawned(name, caf::actor_cast<caf::actor>(conn));
  {
    std::lock_guard guard{conn_mtx_};
    connections_.insert(conn);
  }
  conn->attach_functor([this, conn] {
    std::lock_guard guard{conn_mtx_};
    connections_.erase(conn);
  });
  if (draining_)
    caf::anon_send(conn, drain_request{});
  return conn;
}

std::shared_ptr<node::submit_slot> node::submit_slot::take(const std::shared_ptr<submit_slots>& slots,
                                                          const node_config& cfg, int64_t community,
                                                          const std::string& ip) {
  std::lock_guard guard{slots->mtx};
  auto over = [](size_t cap, size_t n) { return cap != 0 && n >= cap; };
  auto c = slots->by_community.find(community);
  auto a = slots->by_address.find(ip);
  if (over(cfg.max_http_submits, slots->total)
      || over(cfg.max_http_submits_per_community, c == slots->by_community.end() ? 0 : c->second)
      || over(cfg.max_http_submits_per_ip, a == slots->by_address.end() ? 0 : a->second))
    return nullptr;
  ++slots->total;
  ++slots->by_community[community];
  ++slots->by_address[ip];
  return std::make_shared<submit_slot>(slots, community, ip);
}

node::submit_slot::~submit_slot() {
  {
    std::lock_guard guard{slots->mtx};
    --slots->total;
    if (auto i = slots->by_community.find(community); --i->second == 0)
      slots->by_community.erase(i);
    if (auto i = slots->by_address.find(ip); --i->second == 0)
      slots->by_address.erase(i);
  }
  if (stats)
    --stats->http_submits_in_flight;
}

void node::submit_event(const community& c, gateway::http_event_request request,
                        std::function<void(gateway::http_event_reply)> done) {
  // Each POST is an actor until answered, and needs no key to be made: one
  // client's or one community's flood must not take the node's memory, nor
  // the others' turn.
  auto slot = submit_slot::take(submits_, cfg_, c.id,
                                gateway::address_key(request.remote_ip, cfg_.ipv6_prefix));
  if (!slot) {
    if (env_.stats)
      ++env_.stats->http_submits_refused;
    done({{}, false, "rate-limited: too many POST /events in flight, retry later", 503});
    return;
  }
  if (env_.stats) {
    ++env_.stats->http_submits_in_flight;
    slot->stats = env_.stats;
  }
  auto handles = board_->get();
  http_submit_context ctx;
  ctx.settings = connection_settings_for(cfg_, relay_pubkey_, c.id, "",
                                        c.policy == community_policy::open);
  ctx.settings.remote_ip = request.remote_ip;
  ctx.policy = handles->policy;
  ctx.ingest = handles->ingest;
  ctx.hub = handles->hub;
  ctx.group = handles->group;
  ctx.reader = handles->reader;
  ctx.membership = handles->membership;
  auto name = "http-" + std::to_string(++http_requests_);
  ctx.env = env_.for_actor(name);
  ctx.done = std::move(done);
  ctx.seen = seen_tokens_;
  auto trace = ctx.env.trace;
  auto worker = system_->spawn(http_submit_actor_impl, std::move(ctx));
  // The slot goes back when the actor ends (or, should anything above have
  // thrown, when `slot` goes out of scope here).
  worker->attach_functor([slot = std::move(slot)] {});
  if (trace)
    trace->spawned(name, caf::actor_cast<caf::actor>(worker));
  caf::anon_send(worker, http_request_in{std::move(request.authorization), std::move(request.host),
                                         std::move(request.target), std::move(request.body)});
}

void node::manage(const community& c, gateway::http_event_request request,
                  std::function<void(gateway::http_rpc_reply)> done) {
  auto worker = spawn_http_api(c, "manage-", std::move(done));
  caf::anon_send(worker, manage_call_in{std::move(request.authorization), std::move(request.host),
                                        std::move(request.target), std::move(request.body)});
}

void node::listener_registration(const community& c, gateway::http_event_request request,
                                 std::function<void(gateway::http_rpc_reply)> done) {
  auto worker = spawn_http_api(c, "listener-", std::move(done));
  caf::anon_send(worker, listener_call_in{request.method == "GET", std::move(request.authorization),
                                          std::move(request.host), std::move(request.target),
                                          std::move(request.body)});
}

void node::cluster_info(const community& c, gateway::http_event_request request,
                        std::function<void(gateway::http_rpc_reply)> done) {
  auto worker = spawn_http_api(c, "cluster-", std::move(done), true);
  caf::anon_send(worker, cluster_call_in{std::move(request.authorization), std::move(request.host),
                                         std::move(request.target)});
}

http_api_actor node::spawn_http_api(const community& c, const std::string& name_prefix,
                                    std::function<void(gateway::http_rpc_reply)> done,
                                    bool detached) {
  http_api_context ctx;
  ctx.community_id = c.id;
  ctx.auth_window = cfg_.auth_window;
  ctx.management = management_[static_cast<uint64_t>(c.id) % management_.size()];
  ctx.seen = seen_tokens_;
  ctx.board = board_;
  ctx.operator_listeners = cfg_.operator_listeners;
  ctx.env = env_.for_actor(name_prefix + std::to_string(++http_requests_));
  ctx.done = std::move(done);
  ctx.operator_pubkeys.insert(cfg_.operator_pubkeys.begin(), cfg_.operator_pubkeys.end());
  ctx.database_url = cfg_.database_url;
  ctx.node_id = node_id_;
  ctx.bus = cfg_.bus;
  if (detached)
    return system_->spawn<caf::detached>(http_api_actor_impl, std::move(ctx));
  return system_->spawn(http_api_actor_impl, std::move(ctx));
}

proto::relay_info relay_info_for(const node_config& cfg, const std::string& relay_pubkey,
                                 const community& c) {
  proto::relay_info info;
  // A community's own text (NIP-86 changerelay*) over the node's defaults.
  info.name = c.name.empty() ? cfg.relay_name : c.name;
  info.description = c.description.empty() ? cfg.relay_description : c.description;
  info.icon = c.icon;
  info.pubkey = relay_pubkey;
  info.nip43 = c.policy != community_policy::open;
  info.search = cfg.search;
  info.negentropy = cfg.negentropy;
  info.max_message_length = cfg.max_frame_bytes;
  info.max_subscriptions = cfg.max_subscriptions;
  info.max_filters = cfg.max_filters;
  info.max_limit = cfg.max_limit;
  info.default_limit = cfg.default_limit;
  info.max_subscription_bytes = cfg.max_subscription_bytes;
  info.max_subscription_bytes_total = cfg.max_subscription_bytes_total;
  info.max_history_bytes_per_connection = cfg.max_history_bytes_per_connection;
  info.max_auth_keys = cfg.max_auth_keys;
  info.created_at_window = cfg.created_at_window;
  info.max_reads_in_flight = cfg.max_reads_in_flight;
  info.read_tokens_per_second = cfg.read_rate_connection;
  info.read_token_burst = cfg.read_burst_connection;
  if (!cfg.read_database_urls.empty()) {
    // The heartbeat ring's window (actors/reads/heartbeat_ring) bounds a
    // covered page's lag; a head read may be as old as its own max age.
    info.replica_stale_removals_seconds =
      std::max<int64_t>(heartbeat_ring::default_window.count(),
                        (cfg.replica_read_max_age_ms + 999) / 1000);
  }
  return info;
}

bus_probe_settings bus_probe_settings_for(const std::string& node_id, int64_t probe_ms) {
  bus_probe_settings s;
  s.node_id = node_id;
  s.interval = std::chrono::milliseconds(probe_ms);
  s.deadline = std::min<caf::timespan>(std::chrono::seconds(5), s.interval);
  return s;
}

void node::start_bus_probe() {
  if (bus_probe_)
    return;
  bus_probe_ = system_->spawn(bus_probe_impl, bus_,
                              bus_probe_settings_for(node_id_, cfg_.bus_probe_ms),
                              env_.for_actor("bus_probe"));
}

void node::start_delivery() {
  if (delivery_enabled(cfg_))
    caf::anon_send(supervisor_, restart_child{static_cast<uint8_t>(child::delivery)});
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
  std::vector<connection_actor> conns;
  {
    std::lock_guard guard{conn_mtx_};
    conns.assign(connections_.begin(), connections_.end());
  }
  for (auto& c : conns)
    caf::anon_send(c, drain_request{});
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (open_connections() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace waggle
