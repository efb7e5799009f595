#include "bench/load/options.hpp"

#include <functional>
#include <map>
#include <stdexcept>

#include "bench/load/cpu_meter.hpp"
#include "bench/load/ws_conn.hpp"

namespace waggle::bench {

const char* to_string(workload w) {
  switch (w) {
    case workload::publish: return "publish";
    case workload::chat: return "chat";
    case workload::history: return "history";
    case workload::fanout: return "fanout";
    case workload::idle: return "idle";
    case workload::listener_latency: return "listener-latency";
    case workload::listener_burst: return "listener-burst";
    case workload::push: return "push";
  }
  return "?";
}

std::string usage() {
  return R"(usage:
  waggle-load run [options]        drive a relay and report (JSON, markdown)
  waggle-load seed [options]       fill a community with channel history (for --workload history)
  waggle-load seed-word RANK...    the seed's topic word of each rank (1 = most frequent, Zipf's
                                   law over 2,000; rank r is in about 12 %/r of the events)
  waggle-load listener-config --listener-ports P1,P2,...
                                   prints the relay's --operator-listeners value for the
                                   tool's receivers on those ports (listener i on Pi)
  waggle-load summarize FILE...    medians of several runs' JSON [--json F] [--markdown F] [--label L]
                                   [--get PATH]... prints just those medians, e.g. latency_ms/p50

run options:
  --url ws://HOST:PORT       relay (default ws://127.0.0.1:7777); a comma-separated list of
                             a cluster's nodes spreads the connections over them in turn
  --subscriber-url U1,U2,... the subscribers' nodes, in turn (default: those of --url); e.g.
                             --url NODE0 --subscriber-url NODE1 times cross-node deliveries
  --host NAME                Host header, i.e. the community (default: the URL's host:port)
  --workload W               publish | chat | history | fanout | idle | listener-latency |
                             listener-burst | push (default publish)
  --connections N            publishing / querying / idle connections (default 1)
  --in-flight W              closed loop: events or REQs outstanding per connection (default 1)
  --rate R                   open loop: events/s over all connections (default: closed loop)
  --duration S               seconds of load (default 10)
  --events N                 closed loop: events signed before the clock starts
  --channels K               chat, fanout: channels created for the run (default 4)
  --mention-share F          chat: share of posts with a p-tag mention of a member (default 0.2)
  --subscribers M            live subscribers to the channels (fanout; also chat, publish)
  --content-bytes B          content size (default 200)
  --channel-prefix P         history: query the channels `seed` made with this prefix
  --until-age S              history: each REQ has until = the run's start minus S seconds
                             (default: none, head reads)
  --search W1,W2,...         history: NIP-50 REQs {"search":W,"#h":[channel],"limit":50}, the
                             words and channels in turn (`waggle-load seed-word` names the
                             seed's topic words)
  --database-url URL         report net commits per accepted message (pg_stat_database)
  --control-seconds S        idle control window for the commit count (default: the run's)
  --relay-pid PID            report the relay's RSS at the end of the run
  --cpu-watch N1=PID,N2=PID+ report the cores each process used over the measured window
                             ('+': with its children, e.g. the postmaster and its backends),
                             with the tool's own and the machine's busy share (results cpu/)
  --threads T                the tool's io threads for publishers, queriers and idle
                             connections (default 1)
  --receiver-threads N       io threads of the subscribers, each with its own share of
                             the sockets (default: one per core)
  --label TEXT               a name for this run in the report
  --json FILE, --markdown FILE
  --no-progress              no progress line on stderr

operator listeners (the relay started with `listener-config`'s --operator-listeners):
  --listener-ports P1,P2,... serve a receiver on each port and register targets with it
                             (listener-*: one target per listener, mentions round-robin;
                             chat: every member, member j with listener j mod N)
  --stalled-listeners K      the last K receivers read each request and never answer
  --mentions N               listener-latency: 20 (one publisher, spaced --gap-min..--gap-max
                             s apart, uniform); listener-burst: 1000 (closed loop)
  --gap-min S, --gap-max S   listener-latency spacing (default 2.5, 4)
  --delivery-wait S          after the load, wait up to S s for the healthy deliveries (120)

fanout sweep (--workload fanout): one step per subscriber count, each on a fresh channel
  --sweep N1,N2,...          live subscribers of each step, e.g. 10,100,1000,5000 (instead of
                             --subscribers); --rate (default 100) events/s, --step-seconds S
  --drain-wait S             per step: wait up to S s for the last deliveries (default 120;
                             stops early once 5 s pass without one)
  --step-seconds S           length of each step (default 10)
  --knee-p99-ms MS           the knee: first step with delivery p99 above MS (default 20)
  --knee-share F             ... or deliveries/s below F of those offered (default 0.9)

push (the relay started with --push-gateway-url http://127.0.0.1:PORT/wake):
  --push-scenario S          A: one member posts kind 9 to an open channel, nobody holds a lease;
                             B: another member holds a lease matching every message (each owes
                             one wake); idle: only the idle control (commits/s with push on)
  --push-gateway-port PORT   serve the mock push gateway here (answers 200)
  --push-rates R1,R2,...     messages/s of each step (default 5,10,30,50,100)
  --step-seconds S           length of each step and of the idle control (default 60)
  --drain-wait S             per step: wait up to S s for the owed wakes and, with
                             --database-url, for push_match_queue and the outbox to empty (30)

seed options:
  --url, --host (the relay, for creating channels), --database-url URL (required),
  --events N (1000000), --channels K (20), --authors A (50), --content-bytes B (200),
  --channel-prefix P (hist), --threads T (2)
)";
}

namespace {

using setter = std::function<void(const std::string&)>;

std::vector<uint16_t> to_ports(const std::string& v) {
  std::vector<uint16_t> out;
  size_t at = 0;
  while (at <= v.size()) {
    auto comma = v.find(',', at);
    auto item = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    size_t used = 0;
    auto n = std::stoul(item, &used);
    if (used != item.size() || n == 0 || n > 65535)
      throw std::invalid_argument(item);
    out.push_back(static_cast<uint16_t>(n));
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  return out;
}

// "ws://a:1,ws://b:2" -> its URLs; each must be a ws:// URL (ws_conn's parse_ws_url).
std::vector<std::string> to_urls(const std::string& v) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= v.size()) {
    auto comma = v.find(',', at);
    auto item = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!parse_ws_url(item))
      throw std::invalid_argument(item);
    out.push_back(item);
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  return out;
}

std::vector<size_t> to_counts(const std::string& v) {
  std::vector<size_t> out;
  size_t at = 0;
  while (at <= v.size()) {
    auto comma = v.find(',', at);
    auto item = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    size_t used = 0;
    auto n = std::stoull(item, &used);
    if (used != item.size() || n == 0)
      throw std::invalid_argument(item);
    out.push_back(static_cast<size_t>(n));
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  return out;
}

std::vector<double> to_rates(const std::string& v) {
  std::vector<double> out;
  size_t at = 0;
  while (at <= v.size()) {
    auto comma = v.find(',', at);
    auto item = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    size_t used = 0;
    auto r = std::stod(item, &used);
    if (used != item.size() || !(r > 0))
      throw std::invalid_argument(item);
    out.push_back(r);
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  return out;
}

size_t to_size(const std::string& v) {
  size_t used = 0;
  auto n = std::stoull(v, &used);
  if (used != v.size())
    throw std::invalid_argument(v);
  return static_cast<size_t>(n);
}

double to_double(const std::string& v) {
  size_t used = 0;
  auto d = std::stod(v, &used);
  if (used != v.size())
    throw std::invalid_argument(v);
  return d;
}

// Applies --flag value / --flag=value pairs; anything else is an error,
// except positional arguments when `positional` is given.
std::string apply(std::vector<std::string>& args, const std::map<std::string, setter>& flags,
                  const std::map<std::string, std::function<void()>>& switches,
                  std::vector<std::string>* positional = nullptr) {
  for (size_t i = 0; i < args.size(); ++i) {
    auto a = args[i];
    if (auto s = switches.find(a); s != switches.end()) {
      s->second();
      continue;
    }
    std::string value;
    auto eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (flags.count(a)) {
      if (i + 1 >= args.size())
        return a + " needs a value";
      value = args[++i];
    }
    auto f = flags.find(a);
    if (f == flags.end()) {
      if (positional && a.rfind("--", 0) != 0) {
        positional->push_back(a);
        continue;
      }
      return "unknown option " + a;
    }
    try {
      f->second(value);
    } catch (const std::exception&) {
      return "bad value for " + a + ": " + value;
    }
  }
  return "";
}

}  // namespace

std::variant<load_options, std::string> parse_load_options(std::vector<std::string> args) {
  load_options o;
  std::map<std::string, setter> flags{
    {"--url",
     [&](auto& v) {
       o.urls = to_urls(v);
       o.url = o.urls.front();
     }},
    {"--subscriber-url", [&](auto& v) { o.subscriber_urls = to_urls(v); }},
    {"--host", [&](auto& v) { o.host = v; }},
    {"--workload",
     [&](auto& v) {
       static const std::map<std::string, workload> names{{"publish", workload::publish},
                                                          {"chat", workload::chat},
                                                          {"history", workload::history},
                                                          {"fanout", workload::fanout},
                                                          {"idle", workload::idle},
                                                          {"listener-latency", workload::listener_latency},
                                                          {"listener-burst", workload::listener_burst},
                                                          {"push", workload::push}};
       auto w = names.find(v);
       if (w == names.end())
         throw std::invalid_argument(v);
       o.kind = w->second;
     }},
    {"--connections", [&](auto& v) { o.connections = to_size(v); }},
    {"--in-flight", [&](auto& v) { o.in_flight = to_size(v); }},
    {"--rate", [&](auto& v) { o.rate = to_double(v); }},
    {"--duration", [&](auto& v) { o.duration = to_double(v); }},
    {"--events", [&](auto& v) { o.events = to_size(v); }},
    {"--channels", [&](auto& v) { o.channels = to_size(v); }},
    {"--mention-share", [&](auto& v) { o.mention_share = to_double(v); }},
    {"--subscribers", [&](auto& v) { o.subscribers = to_size(v); }},
    {"--content-bytes", [&](auto& v) { o.content_bytes = to_size(v); }},
    {"--channel-prefix", [&](auto& v) { o.channel_prefix = v; }},
    {"--until-age",
     [&](auto& v) {
       o.until_age = to_double(v);
       if (!(o.until_age >= 0))
         throw std::invalid_argument(v);
     }},
    {"--search",
     [&](auto& v) {
       o.search.clear();
       size_t at = 0;
       while (at <= v.size()) {
         auto comma = v.find(',', at);
         auto w = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
         // Words go into JSON unescaped: letters, digits, '-' and '_' only.
         if (w.empty() || w.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") !=
                            std::string::npos)
           throw std::invalid_argument(v);
         o.search.push_back(w);
         if (comma == std::string::npos)
           break;
         at = comma + 1;
       }
     }},
    {"--database-url", [&](auto& v) { o.database_url = v; }},
    {"--control-seconds", [&](auto& v) { o.control_seconds = to_double(v); }},
    {"--relay-pid", [&](auto& v) { o.relay_pid = static_cast<int>(to_size(v)); }},
    {"--cpu-watch",
     [&](auto& v) {
       if (!parse_cpu_watches(v))
         throw std::invalid_argument(v);
       o.cpu_watch = v;
     }},
    {"--threads", [&](auto& v) { o.threads = to_size(v); }},
    {"--receiver-threads", [&](auto& v) { o.receiver_threads = to_size(v); }},
    {"--sweep", [&](auto& v) { o.sweep = to_counts(v); }},
    {"--knee-p99-ms", [&](auto& v) { o.knee_p99_ms = to_double(v); }},
    {"--knee-share", [&](auto& v) { o.knee_share = to_double(v); }},
    {"--label", [&](auto& v) { o.label = v; }},
    {"--json", [&](auto& v) { o.json_path = v; }},
    {"--markdown", [&](auto& v) { o.markdown_path = v; }},
    {"--listener-ports", [&](auto& v) { o.listener_ports = to_ports(v); }},
    {"--stalled-listeners", [&](auto& v) { o.stalled_listeners = to_size(v); }},
    {"--mentions", [&](auto& v) { o.mentions = to_size(v); }},
    {"--gap-min", [&](auto& v) { o.gap_min = to_double(v); }},
    {"--gap-max", [&](auto& v) { o.gap_max = to_double(v); }},
    {"--delivery-wait", [&](auto& v) { o.delivery_wait = to_double(v); }},
    {"--push-scenario",
     [&](auto& v) {
       if (v != "A" && v != "B" && v != "idle")
         throw std::invalid_argument(v);
       o.push_scenario = v;
     }},
    {"--push-rates", [&](auto& v) { o.push_rates = to_rates(v); }},
    {"--step-seconds",
     [&](auto& v) {
       o.step_seconds = to_double(v);
       if (!(o.step_seconds > 0))
         throw std::invalid_argument(v);
     }},
    {"--push-gateway-port",
     [&](auto& v) {
       auto n = to_size(v);
       if (n > 65535)
         throw std::invalid_argument(v);
       o.push_gateway_port = static_cast<uint16_t>(n);
     }},
    {"--drain-wait",
     [&](auto& v) {
       o.drain_wait = to_double(v);
       if (o.drain_wait < 0)
         throw std::invalid_argument(v);
     }},
  };
  auto err = apply(args, flags, {{"--no-progress", [&] { o.progress = false; }}});
  if (!err.empty())
    return err;
  if (o.connections == 0 || o.in_flight == 0 || o.threads == 0)
    return "connections, in-flight and threads must be at least 1";
  if (o.subscriber_urls.empty())
    o.subscriber_urls = o.urls;
  // Push, the sweep and the listeners set up and measure against one relay.
  bool several = o.urls.size() > 1 || o.subscriber_urls != o.urls;
  if (several && (o.kind == workload::push || !o.sweep.empty() || !o.listener_ports.empty()))
    return "several --url or a --subscriber-url go with the plain run only (not push, --sweep "
           "or --listener-ports)";
  if (o.duration <= 0 || o.rate < 0)
    return "duration must be positive and rate not negative";
  if (o.mention_share < 0 || o.mention_share > 1)
    return "mention-share must be within 0..1";
  if ((o.kind == workload::chat || o.kind == workload::fanout) && o.channels == 0)
    return "chat and fanout need at least one channel";
  if (o.sweeping()) {
    if (o.kind != workload::fanout)
      return "--sweep goes with --workload fanout";
    if (o.subscribers)
      return "--sweep names the subscribers of each step: drop --subscribers";
    for (size_t i = 0; i < o.sweep.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (o.sweep[i] == o.sweep[j])
          return "--sweep counts must differ (each names its step)";
    if (o.rate == 0)
      o.rate = 100;
    if (o.step_seconds < 0)
      o.step_seconds = 10;
    if ( !(o.knee_p99_ms > 0) || !(o.knee_share > 0 && o.knee_share <= 1))
      return "the sweep needs a positive --knee-p99-ms and 0 < --knee-share <= 1";
    if (o.drain_wait < 0)
      o.drain_wait = 120;
  }
  if (o.kind == workload::fanout && o.subscribers == 0 && !o.sweeping())
    return "fanout needs --subscribers (or --sweep)";
  if (o.kind == workload::history && o.channel_prefix.empty())
    return "history needs --channel-prefix (the channels `waggle-load seed` filled)";
  if ((o.until_age >= 0 || !o.search.empty()) && o.kind != workload::history)
    return "--until-age and --search go with --workload history";
  bool listener_workload =
    o.kind == workload::listener_latency || o.kind == workload::listener_burst;
  if (listener_workload && !o.listeners())
    return "listener workloads need --listener-ports";
  if (o.listeners() && !listener_workload && o.kind != workload::chat)
    return "--listener-ports goes with chat and the listener workloads";
  if (o.listeners() && o.stalled_listeners >= o.listener_ports.size())
    return "at least one listener must be healthy (--stalled-listeners < ports)";
  if (o.kind == workload::listener_latency) {
    if (o.connections != 1)
      return "listener-latency publishes from one connection";
    if (o.gap_min <= 0 || o.gap_max < o.gap_min)
      return "need 0 < gap-min <= gap-max";
    if (o.mentions == 0)
      o.mentions = 20;
  }
  if (o.kind == workload::listener_burst && o.mentions == 0)
    o.mentions = 1000;
  if (o.delivery_wait < 0)
    return "delivery-wait must not be negative";
  if (o.drain_wait < 0)
    o.drain_wait = 30;
  if (o.step_seconds < 0)
    o.step_seconds = 60;
  if (o.kind == workload::push) {
    if (o.push_scenario.empty())
      return "push needs --push-scenario A, B or idle";
    if (o.push_gateway_port == 0)
      return "push needs --push-gateway-port (the port the relay's --push-gateway-url names)";
    if (o.step_seconds <= 0 || o.drain_wait < 0 || o.push_rates.empty())
      return "push needs a positive --step-seconds, rates and a non-negative --drain-wait";
  } else if (!o.push_scenario.empty()) {
    return "--push-scenario goes with --workload push";
  }
  return o;
}

std::variant<seed_options, std::string> parse_seed_options(std::vector<std::string> args) {
  seed_options o;
  std::map<std::string, setter> flags{
    {"--url", [&](auto& v) { o.url = v; }},
    {"--host", [&](auto& v) { o.host = v; }},
    {"--database-url", [&](auto& v) { o.database_url = v; }},
    {"--events", [&](auto& v) { o.events = to_size(v); }},
    {"--channels", [&](auto& v) { o.channels = to_size(v); }},
    {"--authors", [&](auto& v) { o.authors = to_size(v); }},
    {"--content-bytes", [&](auto& v) { o.content_bytes = to_size(v); }},
    {"--channel-prefix", [&](auto& v) { o.channel_prefix = v; }},
    {"--threads", [&](auto& v) { o.threads = to_size(v); }},
  };
  auto err = apply(args, flags, {});
  if (!err.empty())
    return err;
  if (o.database_url.empty())
    return "seed needs --database-url";
  if (o.channels == 0 || o.authors == 0 || o.threads == 0)
    return "channels, authors and threads must be at least 1";
  return o;
}

std::variant<summarize_options, std::string> parse_summarize_options(
  std::vector<std::string> args) {
  summarize_options o;
  std::map<std::string, setter> flags{
    {"--json", [&](auto& v) { o.json_path = v; }},
    {"--markdown", [&](auto& v) { o.markdown_path = v; }},
    {"--label", [&](auto& v) { o.label = v; }},
    {"--get", [&](auto& v) { o.get.push_back(v); }},
  };
  auto err = apply(args, flags, {}, &o.inputs);
  if (!err.empty())
    return err;
  if (o.inputs.empty())
    return "summarize needs at least one JSON file";
  return o;
}

std::variant<listener_config_options, std::string> parse_listener_config_options(
  std::vector<std::string> args) {
  listener_config_options o;
  std::map<std::string, setter> flags{
    {"--listener-ports", [&](auto& v) { o.ports = to_ports(v); }},
  };
  auto err = apply(args, flags, {});
  if (!err.empty())
    return err;
  if (o.ports.empty())
    return "listener-config needs --listener-ports";
  return o;
}

}  // namespace waggle::bench
