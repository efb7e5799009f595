#include "actors/portability/load_actor.hpp"

#include "messages/outcome.hpp"
#include "messages/proto/relay_kinds.hpp"

namespace waggle {

namespace {

// Events admitted per load_next: about 4 ms of signature checks.
constexpr size_t slice = 64;

load_status status_of(ec code) {
  switch (code) {
    case ec::none:
      return load_status::stored;
    case ec::duplicate:
      return load_status::duplicate;
    case ec::unavailable:
    case ec::internal:
    case ec::rate_limited:  // not tried: a queue bound
      return load_status::failed;
    default:
      return load_status::refused;
  }
}

}  // namespace

status oversize_refusal(size_t max_event_bytes) {
  return {ec::invalid, "event is larger than " + std::to_string(max_event_bytes)
                         + " bytes (--max-frame-bytes)"};
}

void load_state::init(load_ptr self_ptr, load_context context) {
  self = self_ptr;
  ctx = std::move(context);
  out.results.resize(ctx.raws.size());
  schedule();
}

void load_state::schedule() {
  if (scheduled_)
    return;
  scheduled_ = true;
  self->send(self, load_next{});
}

void load_state::step() {
  scheduled_ = false;
  auto now = ctx.env.unix_now();
  for (size_t n = 0; n < slice && next_ < ctx.raws.size() && !alone_out_ && !held_; ++n) {
    auto i = next_++;
    bool alone = false;
    auto ev = admit(i, now, alone);
    if (!ev)
      continue;
    if (alone && in_flight_ > 0)
      held_.emplace(i, std::move(ev));  // sent once everything before it answered
    else
      send(i, std::move(ev), alone);
  }
  if (next_ < ctx.raws.size() && !alone_out_ && !held_)
    schedule();
  maybe_finish();
}

event_ptr load_state::admit(size_t i, int64_t now, bool& alone) {
  const auto& raw = ctx.raws[i];
  if (raw.size() > ctx.settings.max_event_bytes) {
    refuse(i, oversize_refusal(ctx.settings.max_event_bytes));
    return nullptr;
  }
  auto parsed = proto::parse_event(raw);
  if (!parsed) {
    refuse(i, parsed.error());
    return nullptr;
  }
  auto ev = std::make_shared<const proto::event>(std::move(*parsed));
  out.results[i].id = ev->id;
  if (auto [first, fresh] = first_of_.emplace(ev->id, i); !fresh) {
    copies_.emplace_back(i, first->second);  // answered with its first copy
    return nullptr;
  }
  if (proto::is_relay_derived(ev->kind)) {
    refuse(i, {ec::restricted, "relay-signed group state is re-derived, not imported (kind "
                                 + std::to_string(ev->kind) + ")"});
    return nullptr;
  }
  static const std::set<std::string> nobody;
  auto admitted = classify_event(*ev, {nobody, now, ctx.settings.policy,
                                       ctx.settings.relay_pubkey, false, true});
  switch (admitted.route) {
    case route::reject:
      refuse(i, admitted.refusal);
      return nullptr;
    case route::membership:
      refuse(i, {ec::restricted, "NIP-43 join and leave requests are answered, never stored: "
                                 "set the members with `waggle community member`"});
      return nullptr;
    case route::group_command:
      out.channels.insert(admitted.channel.value_or(""));
      alone = true;
      return ev;
    case route::ephemeral:  // ingest's writer refuses it: ephemeral events are never stored
    case route::store:
      alone = ev->kind == 5;
      return ev;
  }
  return nullptr;
}

void load_state::send(size_t i, event_ptr ev, bool alone) {
  if (alone)
    alone_out_ = true;
  else
    ++in_flight_;
  request_store(self, ctx.peers, ctx.settings.reply_timeout, ctx.settings.community_id,
                std::move(ev), [this, i, alone](ingest_reply& reply) { on_reply(i, alone, reply); });
}

void load_state::on_reply(size_t i, bool alone, const ingest_reply& reply) {
  auto a = answer_for(reply.outcome, reply.reason);
  auto& r = out.results[i];
  r.status = status_of(code_of(reply.outcome));
  r.reason = a.message;
  if (alone)
    alone_out_ = false;
  else
    --in_flight_;
  if (held_ && in_flight_ == 0 && !alone_out_) {
    auto [j, ev] = std::move(*held_);
    held_.reset();
    send(j, std::move(ev), true);
  }
  if (next_ < ctx.raws.size() && !alone_out_ && !held_)
    schedule();
  maybe_finish();
}

void load_state::refuse(size_t i, const status& st) {
  auto& r = out.results[i];
  r.status = status_of(st.code);
  r.reason = answer_for(st).message;
}

void load_state::maybe_finish() {
  if (next_ < ctx.raws.size() || in_flight_ > 0 || alone_out_ || held_ || !ctx.done)
    return;
  for (auto [copy, first] : copies_) {
    auto& r = out.results[copy];
    const auto& f = out.results[first];
    if (f.status == load_status::stored) {
      r.status = load_status::duplicate;
      r.reason = answer_for(write_outcome::duplicate, "").message;
    } else {
      r.status = f.status;
      r.reason = f.reason;
    }
  }
  auto done = std::move(ctx.done);
  ctx.done = nullptr;
  done(std::move(out));
  self->quit();
}

load_actor::behavior_type load_actor_impl(load_ptr self, load_context ctx) {
  self->state.init(self, std::move(ctx));
  return {
    [self](load_next) { self->state.step(); },
  };
}

}  // namespace waggle
