#include "actors/replay/trace_replay.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>

#include "actors/connection/connection_actor.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "actors/channels/group_actor.hpp"
#include "actors/channels/group_session.hpp"
#include "actors/connection/http_submit_actor.hpp"
#include "actors/ingest/ingest_actor.hpp"
#include "actors/bus/caf_bus_settings.hpp"
#include "actors/replay/bus_replay.hpp"
#include "actors/replay/cluster_replay.hpp"
#include "actors/replay/delivery_replay.hpp"
#include "actors/replay/push_match_check.hpp"
#include "actors/node/node.hpp"
#include "actors/reads/reader_pool.hpp"
#include "actors/reads/reader_session.hpp"
#include "messages/register_types.hpp"
#include "messages/trace_record.hpp"

namespace waggle {

namespace {

using record = trace_record;

std::string string_field(const rapidjson::Value& obj, const char* key) {
  return trace_string_field(obj, key);
}
int64_t int_field(const rapidjson::Value& obj, const char* key, int64_t fallback = 0) {
  return trace_int_field(obj, key, fallback);
}
bool bool_field(const rapidjson::Value& obj, const char* key, bool fallback) {
  return trace_bool_field(obj, key, fallback);
}

// The push matcher is a database connection no replay runs (like a
// session): its inputs and readings are accepted unread, and each batch's
// "match" record is checked by running the pure match again.
const std::string push_matcher_name = "push_matcher";

// Whether the replay runs the actor of a record. It does not run the
// database sessions (stand-ins answer for them) nor the push matcher: a
// reading one of them took (a writer session's clock, checking a push
// lease's expiry) decided only what it answered, which the trace holds, so
// it is accepted unread.
bool runs_in_replay(const std::string& actor) {
  auto starts = [&](const char* prefix) { return actor.rfind(prefix, 0) == 0; };
  // (Nor the bus drivers, "bus" and "bus-*": a node records none of their
  // readings, and a replay runs only the bus probe, "bus_probe".)
  // (Nor the cluster tail and relay, which record none either: what they
  // handed the hub is the hub's input, docs/traces.md "The cluster".)
  return actor != push_matcher_name && actor != "bus" && !starts("bus-") && !starts("writer-")
         && actor != "cluster_tail" && actor != "cluster_relay"
         && !starts("reader-")
         && !starts("group_session") && actor != "delivery_store" && actor != "push_store";
}

// What the header says about a node beyond its node_config, which knows
// these only by URLs the trace does not carry: push (docs/push.md) is on by
// a gateway URL, bounded replica reads by a reader URL.
struct node_switches {
  bool push_enabled = false;  // --push-gateway-url: ingest gates, push actors run
  uint32_t push_slots = 0;
  int64_t push_completion_delay_ms = 0;
  bool note_write_answers = false;  // bounded replica reads (connection_settings)
  // The bus probe (docs/bus.md): spawned when the header names the node.
  std::string bus_node_id;
  int64_t bus_probe_ms = 10000;
  // The cluster (docs/traces.md, "The cluster"): a node on a bus other than
  // inproc ran the clustered hub; its relay attached before the recording
  // started unless the trace holds the attach.
  bool clustered = false;
  bool attach_at_start = false;
  // The trace records where each connection took ingest's answer (traces
  // made before that hand the answer over as ingest gives it).
  bool hold_ingest_answers = false;
};

// The header's settings must describe a node that can exist.
std::string check_config(const node_config& cfg) {
  auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  if (!in(static_cast<int64_t>(cfg.writers), 1, 64) || !in(static_cast<int64_t>(cfg.readers), 1, 64))
    return "the header's writers and readers must be 1 to 64";
  if (!in(static_cast<int64_t>(cfg.group_sessions), 1, 64)
      || !in(static_cast<int64_t>(cfg.max_group_queue_per_community), 1, 1000000)
      || !in(cfg.roster_idle_seconds, 0, 1LL << 30))
    return "the header's group settings are out of range";
  if (!in(static_cast<int64_t>(cfg.delivery_slots), 0, 1000))
    return "the header's delivery_slots must be 0 to 1000";
  if (!in(static_cast<int64_t>(cfg.push_slots), 0, 1000)
      || !in(cfg.push_completion_delay_ms, 0, 1000000))
    return "the header's push settings are out of range";
  if (!in(static_cast<int64_t>(cfg.max_batch), 1, 100000)
      || !in(cfg.commit_delay_us, 0, 1000000)
      || !in(static_cast<int64_t>(cfg.commit_siblings), 2, 32)
      || !in(static_cast<int64_t>(cfg.max_subscriptions), 1, 1000000)
      || !in(static_cast<int64_t>(cfg.max_filters), 1, 1000)
      || !in(static_cast<int64_t>(cfg.max_filter_values), 1, 1000000)
      || !in(cfg.created_at_window, 0, 1LL << 40) || !in(cfg.auth_window, 0, 1LL << 40))
    return "the header's node settings are out of range";
  return {};
}

// The node settings the header carries (trace_node_json), over defaults.
node_config config_from(const rapidjson::Value& node, std::string& relay_pubkey,
                        node_switches& switches) {
  node_config cfg;
  relay_pubkey = string_field(node, "relay_pubkey");
  // Negative numbers stay out of range (checked by check_config), not huge.
  auto size = [&](const char* key, size_t fallback) {
    auto v = int_field(node, key, static_cast<int64_t>(fallback));
    return v < 0 ? size_t{0} : static_cast<size_t>(v);
  };
  cfg.writers = size("writers", cfg.writers);
  cfg.readers = size("readers", cfg.readers);
  // Traces from before these settings: one group session, rosters never stopped.
  cfg.group_sessions = size("group_sessions", 1);
  cfg.max_group_queue_per_community
    = size("max_group_queue_per_community", cfg.max_group_queue_per_community);
  cfg.roster_idle_seconds = static_cast<int>(int_field(node, "roster_idle_seconds", 0));
  cfg.max_batch = size("max_batch", cfg.max_batch);
  cfg.commit_delay_us = int_field(node, "commit_delay_us", cfg.commit_delay_us);
  cfg.commit_siblings = size("commit_siblings", cfg.commit_siblings);
  cfg.created_at_window = int_field(node, "created_at_window", cfg.created_at_window);
  cfg.auth_window = int_field(node, "auth_window", cfg.auth_window);
  cfg.max_subscriptions = size("max_subscriptions", cfg.max_subscriptions);
  cfg.max_filters = size("max_filters", cfg.max_filters);
  cfg.max_filter_values = size("max_filter_values", cfg.max_filter_values);
  cfg.max_subscription_bytes = size("max_subscription_bytes", cfg.max_subscription_bytes);
  // Traces from before these: no history cap, no stall rule (which reads the
  // clock as histories go out, readings such a trace does not have).
  cfg.max_history_bytes_per_connection = size("max_history_bytes_per_connection", 0);
  cfg.history_stall_seconds = static_cast<int>(int_field(node, "history_stall_seconds", 0));
  // Traces from before pages: every history was read at once.
  cfg.history_page_rows = static_cast<uint32_t>(int_field(node, "history_page_rows", 0));
  // Traces from before delivery replayed, or of a node without listeners: 0,
  // no delivery actors.
  cfg.delivery_slots = static_cast<uint32_t>(std::clamp<int64_t>(
    int_field(node, "delivery_slots", 0), 0, std::numeric_limits<uint32_t>::max()));
  cfg.default_limit = static_cast<uint32_t>(int_field(node, "default_limit", cfg.default_limit));
  cfg.max_limit = static_cast<uint32_t>(int_field(node, "max_limit", cfg.max_limit));
  // Traces from before search: off (their REQs with `search` were refused).
  cfg.search = bool_field(node, "search", false);
  // Traces from before replicas: connections read no clock on write answers.
  switches.note_write_answers = bool_field(node, "note_write_answers", false);
  // Traces from before push: push off (ingest runs no gate, no push actors).
  switches.push_enabled = bool_field(node, "push_enabled", false);
  cfg.push_gate_cache = bool_field(node, "push_gate_cache", cfg.push_gate_cache);
  cfg.push_slots = static_cast<uint32_t>(std::clamp<int64_t>(
    int_field(node, "push_slots", 0), 0, std::numeric_limits<uint32_t>::max()));
  cfg.push_completion_delay_ms = int_field(node, "push_completion_delay_ms", 0);
  switches.push_slots = cfg.push_slots;
  // Traces from before the bus probe: none is spawned.
  switches.bus_node_id = string_field(node, "bus_node_id");
  switches.bus_probe_ms = int_field(node, "bus_probe_ms", switches.bus_probe_ms);
  switches.push_completion_delay_ms = cfg.push_completion_delay_ms;
  // Traces from before the cluster: the single-node hub.
  auto bus = string_field(node, "bus");
  switches.clustered = !bus.empty() && bus != "inproc";
  return cfg;
}

// One replay: the node's actors over the player's stand-ins.
class replayer {
 public:
  replayer(const node_config& cfg, node_switches switches, std::string relay_pubkey,
           replay_player_ptr player, replay_options options)
    : cfg_(cfg), switches_(switches), relay_pubkey_(std::move(relay_pubkey)),
      player_(std::move(player)), options_(options) {
    register_types(sys_cfg_);
    sys_cfg_.set("scheduler.policy", caf::atom("testing"));
    sys_cfg_.set("logger.verbosity", caf::atom("quiet"));
    sys_ = std::make_unique<caf::actor_system>(sys_cfg_);
    sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(sys_->scheduler());
    env_.sources.unix_now = [] { return int64_t{0}; };
    env_.sources.random_challenge = [] { return std::string{}; };
    env_.sources.steady_now = [] { return steady_time{}; };
    env_.stats = std::make_shared<waggle::metrics>();
    env_.trace = player_;
    spawn_node();
  }

  ~replayer() {
    for (auto& a : spawned_)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched_->run();
    sys_->await_actors_before_shutdown(false);
  }

  // Feeds one record (inputs) or checks it (outputs). False: diverged.
  bool step(const record& r, replay_outcome& out);
  bool feed_client(const record& r);
  bool feed_node(const record& r);
  bool check_output(const record& r);
  bool feed_delivery(const record& r);
  void feed_bus(const record& r);
  void check_bus_out(const record& r);
  void feed_cluster(const record& r);
  void check_cluster_out(const record& r);
  void check_match(const record& r);
  std::optional<caf::actor> connection_of(const record& r);
  // After the last record: whatever the replay did that the trace did not.
  void check_leftovers();

 private:
  template <class Handle>
  Handle keep(Handle h) {
    spawned_.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  }
  replay_db_stub_actor stub(const std::string& name) {
    auto s = keep(sys_->spawn(replay_db_stub, player_, name));
    stubs_[name] = caf::actor_cast<caf::actor>(s);
    return s;
  }
  void spawn_node();
  void input(const caf::actor& to, caf::message msg) {
    caf::anon_send(to, std::move(msg));
    sched_->run();
  }
  // Strict mode: an output recorded after input `last_fed` was made while
  // replaying an earlier one.
  //
  // An actor's start-up outputs (the delivery supervisor's first claim, the
  // bus probe's subscribes) are caused by no input: the replay makes them as
  // it spawns the actor, before feeding anything, while live another actor's
  // inputs can be recorded ahead of them (the probe's subscriptions answered
  // before the supervisor read its clock). They are in time until their
  // actor has been fed an input of its own.
  void check_made_in_time(const record& r, uint64_t during, const std::string& what) {
    if (during == 0 && !fed_actors_.count(r.actor))
      return;
    if (options_.strict && during != player_->last_fed)
      diverge(r, what + " after the input at seq " + std::to_string(player_->last_fed),
              "already made while replaying seq " + std::to_string(during) + " (too early)");
  }
  void diverge(const record& r, std::string recorded, std::string replayed) {
    if (!player_->divergence)
      player_->divergence = trace_divergence{r.seq, r.actor, r.kind, std::move(recorded),
                                             std::move(replayed)};
  }
  void check_frame(const record& r, const std::string& expected);
  void check_request(const record& r);
  void check_post(const record& r);
  std::map<std::string, uint64_t> last_reading_;  // per actor: the seq of its latest reading
  void ready_reply(const record& r);
  void take_reply(const record& r);

  node_config cfg_;
  node_switches switches_;
  std::string relay_pubkey_;
  replay_player_ptr player_;
  replay_options options_;
  caf::actor_system_config sys_cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
  node_env env_;
  std::vector<caf::actor> spawned_;
  std::map<std::string, caf::actor> stubs_;
  std::map<std::string, caf::actor> conns_;
  hub_actor hub_;
  ingest_actor ingest_;
  replay_ingest_gate_actor gate_;         // in front of ingest: see replay_ingest_gate
  replay_reader_gate_actor reader_gate_;  // in front of the reader pool: see replay_reader_gate
  reader_pool_actor reader_;
  group_actor group_;
  // The listeners' supervisor (delivery_slots > 0), the push one (push on).
  std::vector<std::unique_ptr<delivery_replay>> deliveries_;
  std::unique_ptr<bus_replay> bus_;  // the bus probe over a stand-in bus, if the node ran one
  std::unique_ptr<cluster_replay> cluster_;  // the stand-in relay under the hub
  std::set<std::string> fed_actors_;  // actors fed an input so far (check_made_in_time)
  delivery_replay* delivery_of(const std::string& actor) const {
    for (auto& d : deliveries_)
      if (d->owns(actor))
        return d.get();
    return nullptr;
  }
};

void replayer::spawn_node() {
  // A clustered node's hub dedupes what its tail brings back and fails a
  // barrier closed without a relay: the replay runs the same hub.
  hub_ = keep(switches_.clustered ? sys_->spawn(clustered_hub_actor_impl, env_.for_actor("hub"))
                                  : sys_->spawn(hub_actor_impl, env_.for_actor("hub")));
  player_->name(hub_.address(), "hub");
  cluster_ = std::make_unique<cluster_replay>(*sys_, player_);
  keep(cluster_->relay());
  if (switches_.attach_at_start)
    caf::anon_send(hub_, cluster_->attach());
  std::vector<writer_session_actor> writers;
  for (size_t i = 0; i < cfg_.writers; ++i)
    writers.push_back(stub("writer-" + std::to_string(i)));
  auto ingest_settings = ingest_settings_for(cfg_);
  ingest_settings.push_enabled = switches_.push_enabled;  // the header's, not a gateway URL
  ingest_ = keep(sys_->spawn(ingest_actor_impl, ingest_settings, std::move(writers), hub_,
                             env_.for_actor("ingest")));
  gate_ = keep(sys_->spawn(replay_ingest_gate, ingest_, player_, switches_.hold_ingest_answers));
  std::vector<reader_session_actor> readers;
  for (size_t i = 0; i < cfg_.readers; ++i)
    readers.push_back(stub("reader-" + std::to_string(i)));
  reader_ = keep(
    sys_->spawn(reader_pool_actor_impl, std::move(readers), env_.for_actor("reader_pool")));
  reader_gate_ = keep(sys_->spawn(replay_reader_gate, reader_, player_));
  std::vector<group_session_actor> sessions;
  for (size_t i = 0; i < cfg_.group_sessions; ++i)
    sessions.push_back(stub(group_session_name(i)));
  // No TTL reaper (its database session is outside the replay; what it
  // archived is an "input" record) and no start-up repair (recording starts
  // after it). Roster idle timers fire only at their "timer" records.
  group_settings settings;
  settings.max_queue_per_community = cfg_.max_group_queue_per_community;
  settings.roster_idle = caf::timespan{std::chrono::seconds(cfg_.roster_idle_seconds)};
  settings.route_rosters = switches_.clustered;
  group_ = keep(sys_->spawn(group_actor_impl, std::move(sessions), hub_, env_.for_actor("group"),
                            std::move(settings)));
  player_->name(ingest_.address(), "ingest");
  player_->name(group_.address(), "group");
  // Live, the delivery child starts right after recording does
  // (node::start_delivery): its first claim is in the trace.
  // The push supervisor after it, as spawn_delivery does; the matcher is
  // not run (push_matcher_name).
  std::vector<delivery_replay_spec> specs;
  if (cfg_.delivery_slots > 0)
    specs.push_back(listener_delivery_spec(cfg_.delivery_slots));
  if (switches_.push_enabled)
    specs.push_back(push_delivery_spec(switches_.push_slots, switches_.push_completion_delay_ms));
  for (auto& spec : specs) {
    auto store = stub(spec.store);
    deliveries_.push_back(
      std::make_unique<delivery_replay>(*sys_, player_, env_, std::move(spec), store));
    keep(deliveries_.back()->supervisor());
  }
  // Live, the bus probe starts right after delivery (node::start_bus_probe):
  // its first subscribes are in the trace.
  if (!switches_.bus_node_id.empty()) {
    bus_ = std::make_unique<bus_replay>(
      *sys_, player_, env_, bus_probe_settings_for(switches_.bus_node_id, switches_.bus_probe_ms));
    keep(bus_->bus());
    keep(bus_->probe());
  }
  sched_->run();
}

void replayer::check_frame(const record& r, const std::string& expected) {
  auto& queue = player_->frames[r.actor];
  if (queue.empty())
    return diverge(r, expected, "(no frame)");
  if (queue.front().text != expected)
    return diverge(r, expected, queue.front().text);
  check_made_in_time(r, queue.front().during, expected);
  queue.pop_front();
}

void replayer::check_request(const record& r) {
  auto& s = player_->stubs[r.actor];
  std::optional<size_t> first_open;
  for (size_t j = 0; j < s.requests.size(); ++j) {
    if (s.matched[j])
      continue;
    if (!first_open)
      first_open = j;
    if (s.requests[j].type == r.type && s.requests[j].same_as(r.msg)) {
      s.matched[j] = true;
      s.order.push_back(j);
      return;
    }
  }
  if (!first_open)
    return diverge(r, r.type + " " + r.msg, "(no request)");
  auto& got = s.requests[*first_open];
  diverge(r, r.type + " " + r.msg, got.type + " " + got.msg);
}

// The session's reply: what it answered to its next request. Delivered
// later, when the requester takes it (reply_in).
void replayer::ready_reply(const record& r) {
  auto& s = player_->stubs[r.actor];
  if (!stubs_.count(r.actor) || s.ready.size() >= s.order.size())
    return diverge(r, "a " + r.type + " from " + r.actor,
                   "no request of the replay started at " + r.actor + " is unanswered");
  auto j = s.order[s.ready.size()];
  if (s.held[j].reply_type != r.type)
    return diverge(r, r.type, "the request waits for a " + s.held[j].reply_type);
  s.ready.push_back({r.seq, r.msg, j});
}

// A replayed actor takes a reply: the oldest ready one that answers a
// request it made, of the type it took.
void replayer::take_reply(const record& r) {
  // The hub's ack of an ephemeral event: the replay runs the hub, whose
  // answer reached the connection when the hub made it (no stand-in holds
  // it), so there is nothing to hand over here; the connection's OK that
  // follows is checked as a frame. (Traces recorded before the hub named
  // itself say "" for it.)
  if (r.type == "hub_ack" && (r.from.empty() || r.from == "hub"))
    return;
  // Ingest's answer to a connection, which the gate holds until now.
  if (r.type == "ingest_reply" && r.from == "ingest") {
    input(caf::actor_cast<caf::actor>(gate_), caf::make_message(caf::atom("answer"), r.actor, r.id));
    return;
  }
  std::string best_stub;
  size_t best_index = 0;
  uint64_t best_seq = 0;
  const std::string* best_msg = nullptr;
  for (auto& [name, s] : player_->stubs) {
    if (!r.from.empty() && name != r.from)
      continue;  // the live actor says which session answered
    while (s.first_undelivered < s.ready.size()
           && s.held[s.ready[s.first_undelivered].held_index].delivered)
      ++s.first_undelivered;
    for (size_t k = s.first_undelivered; k < s.ready.size(); ++k) {
      auto& ready = s.ready[k];
      auto& h = s.held[ready.held_index];
      if (h.delivered || h.requester != r.actor || h.reply_type != r.type)
        continue;
      if (best_stub.empty() || ready.seq < best_seq) {
        best_stub = name;
        best_index = ready.held_index;
        best_seq = ready.seq;
        best_msg = &ready.msg;
      }
      break;  // later ones of this session are newer
    }
  }
  if (best_stub.empty())
    return diverge(r, r.actor + " takes a " + r.type,
                   "no " + r.type + " to a request of " + r.actor + " is waiting");
  auto& s = player_->stubs[best_stub];
  s.held[best_index].delivered = true;
  input(stubs_[best_stub], caf::make_message(caf::atom("deliver"),
                                             static_cast<uint64_t>(best_index), *best_msg));
}

bool replayer::step(const record& r, replay_outcome& out) {
  player_->current_seq = r.seq;
  static const std::set<std::string> fed = {"open",  "frame_in",  "closed",    "drain",
                                            "http_in", "timer",   "input",     "ingest_in",
                                            "reader_in", "reader_idle", "reply_in",
                                            "bus_reply", "cluster_reply"};
  // The matcher's inputs reach nothing the replay runs; nor does the hub's
  // ack of an ephemeral event, which the replay hands over at once (take_reply).
  bool hub_ack = r.kind == "reply_in" && r.type == "hub_ack";
  if (fed.count(r.kind) && r.actor != push_matcher_name && !hub_ack) {
    player_->last_fed = r.seq;
    fed_actors_.insert(r.actor);
  }
  if (feed_client(r) || feed_node(r))
    ++out.inputs;
  else if (check_output(r))
    ++out.checked;
  else
    diverge(r, "a record of kind " + r.kind + (r.type.empty() ? "" : " (" + r.type + ")"),
            "this build does not replay it");
  return !player_->divergence;
}

std::optional<caf::actor> replayer::connection_of(const record& r) {
  if (auto i = conns_.find(r.actor); i != conns_.end())
    return i->second;
  diverge(r, r.kind + " on " + r.actor, "no such connection was opened");
  return std::nullopt;
}

// What clients sent: connections opened and their frames, closes and drains,
// and POST /events. False when `r` is no such record.
bool replayer::feed_client(const record& r) {
  const auto& k = r.kind;
  if (k == "open") {
    auto settings = connection_settings_for(cfg_, relay_pubkey_, r.community, r.host,
                                            r.policy.empty() || r.policy == "open");
    settings.note_write_answers = switches_.note_write_answers;
    auto handle = keep(sys_->spawn(
      connection_actor_impl, settings,
      connection_peers{gate_, hub_, reader_gate_, group_, {}, {}},
      env_.for_actor(r.actor), std::make_shared<replay_sink>(player_, r.actor)));
    conns_[r.actor] = caf::actor_cast<caf::actor>(handle);
    player_->name(handle.address(), r.actor);
    sched_->run();
  } else if (k == "http_in") {
    http_submit_context ctx;
    ctx.settings = connection_settings_for(cfg_, relay_pubkey_, r.community, "");
    ctx.settings.note_write_answers = switches_.note_write_answers;
    ctx.ingest = gate_;
    ctx.hub = hub_;
    ctx.group = group_;
    ctx.env = env_.for_actor(r.actor);
    ctx.done = [player = player_, name = r.actor](gateway::http_event_reply reply) {
      player->produce_frame(name, proto::render_ok(reply.id, reply.accepted, reply.message));
    };
    auto submit = sys_->spawn(http_submit_actor_impl, std::move(ctx));
    player_->name(submit.address(), r.actor);
    input(caf::actor_cast<caf::actor>(submit),
          caf::make_message(http_event_in{r.auth_pubkey, r.text}));
  } else if (k == "frame_in") {
    if (auto c = connection_of(r))
      input(*c, caf::make_message(socket_frame{r.text}));
  } else if (k == "closed") {
    if (auto c = connection_of(r))
      input(*c, caf::make_message(socket_closed{}));
  } else if (k == "drain") {
    if (auto c = connection_of(r))
      input(*c, caf::make_message(drain_request{}));
  } else {
    return false;
  }
  return true;
}

// What the node's own boundaries decided: timers, the reaper's input,
// database replies and the order points (docs/traces.md). False when `r` is
// no such record.
bool replayer::feed_node(const record& r) {
  const auto& k = r.kind;
  if (k == "timer" && r.type == "ingest_tick") {
    input(caf::actor_cast<caf::actor>(ingest_), caf::make_message(ingest_tick{}));
  } else if ((k == "timer" || k == "input") && r.type == "roster_dirty") {
    // The timer is a retry; the input, a change the group actor reported.
    if (auto roster = player_->spawned_actor(r.actor))
      input(*roster, caf::make_message(roster_dirty{k == "timer"}));
    else
      diverge(r, "a roster_dirty of " + r.actor, "no such roster actor was spawned");
  } else if (k == "timer" && r.type == "roster_idle_tick") {
    rapidjson::Document doc;
    doc.Parse(r.msg.data(), r.msg.size());
    roster_idle_tick tick;
    auto roster = player_->spawned_actor(r.actor);
    if (doc.HasParseError() || !trace_codec::decode(doc, tick))
      diverge(r, r.msg, "not a roster_idle_tick");
    else if (!roster)
      diverge(r, "an idle timer of " + r.actor, "no such roster actor was spawned");
    else
      input(*roster, caf::make_message(tick));
  } else if (k == "input" && r.type == "channels_archived") {
    rapidjson::Document doc;
    doc.Parse(r.msg.data(), r.msg.size());
    channels_archived msg;
    if (doc.HasParseError() || !trace_codec::decode(doc, msg))
      diverge(r, r.msg, "not a channels_archived");
    else
      input(caf::actor_cast<caf::actor>(group_), caf::make_message(std::move(msg)));
  } else if (k == "input" && r.type == "roster_requested") {
    rapidjson::Document doc;
    doc.Parse(r.msg.data(), r.msg.size());
    roster_requested msg;
    if (doc.HasParseError() || !trace_codec::decode(doc, msg))
      diverge(r, r.msg, "not a roster_requested");
    else
      input(caf::actor_cast<caf::actor>(group_), caf::make_message(std::move(msg)));
  } else if (k == "input" && r.type == "push_gate_loaded" && r.actor == "ingest") {
    rapidjson::Document doc;
    doc.Parse(r.msg.data(), r.msg.size());
    push_gate_loaded msg;
    if (doc.HasParseError() || !trace_codec::decode(doc, msg))
      diverge(r, r.msg, "not a push_gate_loaded");
    else
      input(caf::actor_cast<caf::actor>(ingest_), caf::make_message(std::move(msg)));
  } else if (k == "reading" && !runs_in_replay(r.actor)) {
    // Accepted unread (runs_in_replay).
  } else if (r.actor == push_matcher_name && (k == "input" || k == "timer")) {
    // Not run: what the matcher decided is its "match" records (check_match)
    // and what it sent, the push supervisor's and ingest's inputs.
  } else if ((k == "input" || k == "timer") && delivery_of(r.actor)) {
    return feed_delivery(r);
  } else if ((k == "input" || k == "timer" || k == "bus_reply") && bus_replay::owns(r.actor)) {
    feed_bus(r);
  } else if ((k == "input" || k == "cluster_reply") && cluster_replay::owns(r.actor, k, r.type)) {
    feed_cluster(r);
  } else if (k == "db_reply") {
    ready_reply(r);
  } else if (k == "ingest_in") {
    input(caf::actor_cast<caf::actor>(gate_), caf::make_message(caf::atom("forward"), r.from, r.id));
  } else if (k == "reader_in") {
    input(caf::actor_cast<caf::actor>(reader_gate_),
          caf::make_message(caf::atom("forward"), r.from, r.type));
  } else if (k == "reader_idle") {
    // The pool heard a session was idle here, between the same reads as
    // live: it deals the next read to the same session, in the same order.
    uint64_t index = 0;
    try {
      index = std::stoull(r.type);
    } catch (const std::exception&) {
      diverge(r, "a reader_idle", "no session index");
      return true;
    }
    input(caf::actor_cast<caf::actor>(reader_gate_), caf::make_message(caf::atom("idle"), index));
  } else if (k == "reply_in") {
    take_reply(r);
  } else if (k == "reading") {
    last_reading_[r.actor] = r.seq;
    // Handed out while the actors ran; here we only check it was taken.
    if (auto during = player_->taken_during(r.seq))
      check_made_in_time(r, *during, "read " + r.what + " = " + r.value);
    else
      diverge(r, "read " + r.what + " = " + r.value, "(no reading)");
  } else {
    return false;
  }
  return true;
}

// A delivery supervisor's or slot's input or timer. False: not one this
// build feeds (left to the caller's "does not replay it").
bool replayer::feed_delivery(const record& r) {
  std::string error;
  if (auto in = delivery_of(r.actor)->input_of(r.actor, r.kind, r.type, r.msg, error)) {
    input(in->to, std::move(in->msg));
    return true;
  }
  if (error.empty())
    return false;
  diverge(r, "a " + r.type + " to " + r.actor, error);
  return true;
}

// The bus probe's input, timer or bus answer (bus_replay).
void replayer::feed_bus(const record& r) {
  if (!bus_)
    return diverge(r, "a " + r.kind + " of the bus probe", "the header names no bus node");
  std::string error;
  if (r.kind == "bus_reply") {
    if (auto msg = bus_->reply_of(r.n, r.type, r.msg, error))
      input(bus_->bus(), std::move(*msg));
    else
      diverge(r, "answer " + std::to_string(r.n) + ": " + r.type + " " + r.msg, error);
  } else if (auto msg = bus_->input_of(r.kind, r.type, r.msg, error)) {
    input(bus_->probe(), std::move(*msg));
  } else {
    diverge(r, "a " + r.type + " to the bus probe", error);
  }
}

// What the hub took from the cluster's tail and relay, or the relay's answer
// to its request n (cluster_replay).
void replayer::feed_cluster(const record& r) {
  std::string error;
  if (r.kind == "cluster_reply") {
    if (auto msg = cluster_->reply_of(r.n, r.type, r.msg, error))
      input(cluster_->relay(), std::move(*msg));
    else
      diverge(r, "answer " + std::to_string(r.n) + ": " + r.type + " " + r.msg, error);
    return;
  }
  if (r.type != "access_revoked" && r.type != "channel_revoked" && !switches_.clustered)
    return diverge(r, "a " + r.type + " to the hub",
                   "the header says the node was not clustered (its bus was inproc)");
  if (auto msg = cluster_->input_of(r.type, r.msg, error))
    input(caf::actor_cast<caf::actor>(hub_), std::move(*msg));
  else
    diverge(r, "a " + r.type + " to the hub", error);
}

// What the hub sent the relay: its message n, as recorded, in time.
void replayer::check_cluster_out(const record& r) {
  auto expected = std::to_string(r.n) + ": " + r.type + " " + r.msg;
  std::string replayed;
  auto during = cluster_->match_out(r.n, r.type, r.msg, replayed);
  if (!during)
    return diverge(r, expected, replayed);
  check_made_in_time(r, *during, expected);
}

// What the probe sent the bus: its request n, as recorded, in time.
void replayer::check_bus_out(const record& r) {
  auto expected = std::to_string(r.n) + ": " + r.type + " " + r.msg;
  if (!bus_)
    return diverge(r, expected, "(no bus probe)");
  std::string replayed;
  auto during = bus_->match_out(r.n, r.type, r.msg, replayed);
  if (!during)
    return diverge(r, expected, replayed);
  check_made_in_time(r, *during, expected);
}

// What the node produced: frames, closes, HTTP answers, database requests,
// POSTs and the matcher's decisions.
bool replayer::check_output(const record& r) {
  const auto& k = r.kind;
  if (k == "frame_out" || k == "close_out" || k == "http_out")
    check_frame(r, r.text);
  else if (k == "db_request")
    check_request(r);
  else if (k == "post_out" && delivery_of(r.actor))
    check_post(r);
  else if (k == "bus_out" && bus_replay::owns(r.actor))
    check_bus_out(r);
  else if (k == "cluster_out" && cluster_replay::owns(r.actor, k, r.type))
    check_cluster_out(r);
  else if (k == "match" && r.actor == push_matcher_name)
    check_match(r);
  else
    return false;
  return true;
}

// A matcher batch: the pure match, run again on the loads the batch saw,
// must decide the same wakes.
void replayer::check_match(const record& r) {
  auto check = check_push_match(r.msg);
  if (!check.ok)
    diverge(r, check.recorded, check.replayed);
}

// A slot's POST: made by some slot of the replay (slots run on their own
// threads live, so records of two slots may come in either order).
void replayer::check_post(const record& r) {
  auto expected = delivery_replay::expected_post(r.msg);
  if (!expected)
    return diverge(r, r.msg, "not a delivery_attempt");
  std::string replayed;
  auto during = delivery_of(r.actor)->match_post(*expected, replayed);
  if (!during)
    return diverge(r, *expected, replayed);
  // The slot reads the clock (its NIP-98 signature) and posts in one handler
  // that takes no trace section, so live another actor's input can be
  // recorded between the two (a writer reply ingest takes while the push
  // wake goes out). Strict mode checks the reading; the POST is in time when
  // the replay made it with that reading, in the same input.
  if (auto i = last_reading_.find(r.actor); i != last_reading_.end())
    if (auto reading = player_->taken_during(i->second); reading && *reading == *during)
      return;
  check_made_in_time(r, *during, *expected);
}

void replayer::check_leftovers() {
  sched_->run();
  if (player_->divergence)
    return;
  record end;  // seq 0: after the last record
  for (auto& [conn, queue] : player_->frames)
    if (!queue.empty()) {
      end.actor = conn;
      end.kind = "frame_out";
      return diverge(end, "(no frame)", queue.front().text);
    }
  if (!player_->gate_held.empty()) {
    end.actor = "node";
    end.kind = "gate";
    return diverge(end, "(not taken)", player_->gate_held.begin()->first);
  }
  for (auto& d : deliveries_)
    if (auto extra = d->unmatched_post()) {
      end.actor = "delivery";
      end.kind = "post_out";
      return diverge(end, "(no POST)", *extra);
    }
  if (bus_)
    if (auto extra = bus_->unmatched_out()) {
      end.actor = "bus_probe";
      end.kind = "bus_out";
      return diverge(end, "(no bus request)", *extra);
    }
  if (auto extra = cluster_->unmatched_out()) {
    end.actor = "hub";
    end.kind = "cluster_out";
    return diverge(end, "(nothing sent to the relay)", *extra);
  }
  for (auto& [name, s] : player_->stubs)
    for (size_t j = 0; j < s.requests.size(); ++j)
      if (!s.matched[j]) {
        end.actor = name;
        end.kind = "db_request";
        auto& extra = s.requests[j];
        return diverge(end, "(no request)", extra.type + " " + extra.msg);
      }
}

}  // namespace

std::string replay_outcome::summary() const {
  if (!error.empty())
    return "cannot replay: " + error;
  if (divergence)
    return divergence->to_string();
  return "identical: " + std::to_string(records) + " records, " + std::to_string(inputs)
         + " inputs fed, " + std::to_string(checked) + " outputs matched"
         + (torn_tail ? " (the last line was torn and left out)" : "");
}

replay_outcome replay_trace(std::istream& in, replay_options options) {
  replay_outcome out;
  auto file = read_trace(in);
  if (!file.error.empty()) {
    out.error = file.error;
    return out;
  }
  out.torn_tail = file.torn_tail;
  auto& header = file.header;
  auto& records = file.records;
  for (auto& r : records)
    if (r.kind == "close_out")
      r.text = replay_sink::close_text(r.close_code, r.close_reason);
  if (int_field(header, "waggle_trace") != trace_format_version) {
    out.error = "trace format " + string_field(header, "waggle_trace") + "; this build reads "
                + std::to_string(trace_format_version);
    return out;
  }
  if (string_field(header, "mode") != "full") {
    out.error = "a sampled trace holds only its connections' own frames and readings, not the "
                "node's database replies, so it cannot be replayed through the node";
    return out;
  }
  if (!header.HasMember("node") || !header["node"].IsObject()) {
    out.error = "the header has no node settings";
    return out;
  }
  std::string relay_pubkey;
  node_switches switches;
  auto cfg = config_from(header["node"], relay_pubkey, switches);
  if (auto bad = check_config(cfg); !bad.empty()) {
    out.error = bad;
    return out;
  }
  if (!switches.bus_node_id.empty()
      && (!bus_valid_node_id(switches.bus_node_id) || switches.bus_probe_ms < 100
          || switches.bus_probe_ms > 3'600'000)) {
    out.error = "the header's bus_node_id or bus_probe_ms is not one a node could have";
    return out;
  }
  // A relay that attached while the node was recorded is in the trace; one
  // that attached before the recording started is attached at the start.
  switches.attach_at_start
    = switches.clustered && std::none_of(records.begin(), records.end(), [](const record& r) {
        return r.actor == "hub" && r.kind == "input" && r.type == "cluster_attach";
      });
  switches.hold_ingest_answers
    = std::any_of(records.begin(), records.end(), [](const record& r) {
        return r.kind == "reply_in" && r.type == "ingest_reply" && r.from == "ingest";
      });
  auto player = std::make_shared<replay_player>();
  if (std::any_of(records.begin(), records.end(), [](const record& r) {
        return r.kind == "input" && r.type == "roster_dirty";
      }))
    player->fed_inputs.insert("roster_dirty");
  for (auto& r : records)
    if (r.kind == "reading" && runs_in_replay(r.actor))
      player->add_reading(r.actor, {r.seq, r.what, r.value});
  out.records = records.size();
  {
    replayer replay{cfg, switches, relay_pubkey, player, options};
    for (auto& r : records)
      if (!replay.step(r, out))
        break;
    if (!player->divergence)
      replay.check_leftovers();
  }
  out.divergence = player->divergence;
  out.identical = !out.divergence;
  return out;
}

replay_outcome replay_trace_file(const std::string& path, replay_options options) {
  std::ifstream in{path};
  if (!in) {
    replay_outcome out;
    out.error = "cannot open " + path;
    return out;
  }
  return replay_trace(in, options);
}

}  // namespace waggle
