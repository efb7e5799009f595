#include "actors/policy/write_policy_plugin.hpp"

#include <algorithm>

#include "actors/support/log.hpp"
#include "messages/proto/write_policy.hpp"

namespace waggle {

namespace {

constexpr auto flush_retry = std::chrono::milliseconds(10);

std::string excerpt(const std::string& s) {
  return s.size() <= 300 ? s : s.substr(0, 300) + "...";
}

}  // namespace

write_policy_state::~write_policy_state() {
  // However the actor ends: no plugin outlives it, no reader thread either.
  if (proc)
    proc->kill();
}

void write_policy_state::init(write_policy_ptr self_ptr, write_policy_settings s, node_env e) {
  self = self_ptr;
  settings = std::move(s);
  env = std::move(e);
  start_child();
}

policy_verdict write_policy_state::fail_verdict() const {
  return unavailable_verdict(settings.fail_open);
}

void write_policy_state::start_child() {
  auto gen = ++generation;
  proc = std::make_unique<plugin_process>();
  write_policy_actor me{self};
  auto st = proc->start(
    settings.path,
    [me, gen](bool is_stderr, std::string line) {
      caf::anon_send(me, policy_output{gen, is_stderr, std::move(line)});
    },
    [me, gen] { caf::anon_send(me, policy_child_gone{gen}); });
  if (!st.ok()) {
    proc.reset();
    return child_failed(st.reason);
  }
  up = true;
  log::info("write_policy", "plugin started",
            {{"path", settings.path}, {"pid", std::to_string(proc->pid())},
             {"restarts", std::to_string(starts++)}});
}

caf::result<policy_verdict> write_policy_state::on_request(const policy_request& req) {
  if (!up || !req.ev)
    return fail_verdict();
  if (waiting.size() >= settings.max_queue) {
    log::debug("write_policy", "queue full", {{"id", req.ev->id}});
    return fail_verdict();
  }
  if (!proc->write(proto::render_policy_request(*req.ev, req.received_at, req.ip))) {
    child_failed("its stdin is closed");
    return fail_verdict();
  }
  auto seq = next_seq++;
  auto promise = self->make_response_promise<policy_verdict>();
  waiting.emplace(seq, waiter{req.ev->id, env.steady_now() + settings.timeout, promise});
  by_id.emplace(req.ev->id, seq);
  schedule_tick();
  return promise;
}

void write_policy_state::on_output(const policy_output& out) {
  if (out.generation != generation)
    return;  // a child already replaced
  if (out.is_stderr) {
    log::warn("write_policy", "plugin stderr", {{"line", excerpt(out.line)}});
    return;
  }
  auto parsed = proto::parse_policy_answer(out.line);
  if (!parsed) {
    // Ignored: the event it was meant for times out.
    log::warn("write_policy", "malformed plugin answer",
              {{"reason", parsed.error().reason}, {"line", excerpt(out.line)}});
    return;
  }
  auto [first, last] = by_id.equal_range(parsed->id);
  if (first == last) {
    log::debug("write_policy", "answer for no waiting event", {{"id", parsed->id}});
    return;
  }
  failures = 0;  // it works: the next restart starts from the shortest backoff
  policy_verdict v{parsed->action, parsed->msg};
  for (auto i = first; i != last; ++i) {
    auto w = waiting.find(i->second);
    if (w != waiting.end()) {
      w->second.promise.deliver(v);
      waiting.erase(w);
    }
  }
  by_id.erase(parsed->id);
}

void write_policy_state::on_gone(const policy_child_gone& msg) {
  if (msg.generation == generation && up)
    child_failed("it exited or closed its stdout");
}

void write_policy_state::on_tick() {
  tick_pending = false;
  if (!up)
    return;
  if (proc->pending_bytes() > 0 && !proc->flush())
    return child_failed("its stdin is closed");
  if (!waiting.empty() && waiting.begin()->second.deadline <= env.steady_now()) {
    // Treated as hung: every event it holds is answered by the fail mode,
    // and a fresh child judges the next ones.
    log::warn("write_policy", "plugin timed out",
              {{"id", waiting.begin()->second.id},
               {"timeout_ms", std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                settings.timeout).count())}});
    return child_failed("it timed out");
  }
  schedule_tick();
}

void write_policy_state::schedule_tick() {
  if (!up)
    return;
  auto now = env.steady_now();
  steady_time want = steady_time::max();
  if (!waiting.empty())
    want = waiting.begin()->second.deadline;
  if (proc->pending_bytes() > 0)
    want = std::min(want, now + flush_retry);
  if (want == steady_time::max() || (tick_pending && tick_at <= want))
    return;
  tick_pending = true;
  tick_at = want;
  auto delay = std::max(want - now, steady_time::duration::zero());
  self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(delay), policy_tick{});
}

void write_policy_state::answer_all(const policy_verdict& v) {
  for (auto& [seq, w] : waiting)
    w.promise.deliver(v);
  waiting.clear();
  by_id.clear();
}

void write_policy_state::child_failed(const std::string& why) {
  std::string pid = proc ? std::to_string(proc->pid()) : "-";
  if (proc) {
    proc->kill();
    proc.reset();
  }
  up = false;
  ++generation;  // whatever the old reader thread still sends is stale
  answer_all(fail_verdict());
  auto delay = std::chrono::milliseconds(std::min(100 << std::min(failures, 6), 5000));
  ++failures;
  log::error("write_policy", "plugin down; restarting",
             {{"reason", why}, {"pid", pid}, {"delay_ms", std::to_string(delay.count())},
              {"fail_mode", settings.fail_open ? "open" : "closed"}});
  self->delayed_send(self, delay, policy_restart{});
}

void write_policy_state::on_restart() {
  if (!up)
    start_child();
}

void write_policy_state::shutdown() {
  if (proc) {
    proc->terminate(settings.shutdown_grace);
    proc.reset();
  }
  up = false;
  answer_all(fail_verdict());
}

write_policy_actor::behavior_type
write_policy_actor_impl(write_policy_ptr self, write_policy_settings settings, node_env env) {
  self->state.init(self, std::move(settings), std::move(env));
  self->set_exit_handler([self](const caf::exit_msg& msg) {
    self->state.shutdown();
    self->quit(msg.reason);
  });
  return {
    // -- requests ---------------------------------------------------------------
    [self](const policy_request& req) -> caf::result<policy_verdict> {
      return self->state.on_request(req);
    },
    // -- the child --------------------------------------------------------------
    [self](const policy_output& out) { self->state.on_output(out); },
    [self](const policy_child_gone& msg) { self->state.on_gone(msg); },
    // -- timers -----------------------------------------------------------------
    [self](policy_tick) { self->state.on_tick(); },
    [self](policy_restart) { self->state.on_restart(); },
  };
}

}  // namespace waggle
