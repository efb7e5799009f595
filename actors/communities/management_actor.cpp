#include "actors/communities/management_actor.hpp"

#include <algorithm>
#include <chrono>
#include <climits>

#include <pqxx/except>
#include <pqxx/transaction>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "actors/communities/call_watchdog.hpp"
#include "actors/communities/management_methods.hpp"
#include "actors/support/log.hpp"
#include "actors/support/seen_tokens.hpp"
#include "db/membership_store.hpp"
#include "db/nip98_tokens.hpp"

namespace waggle {

namespace {

// The longest prefix of at most `limit` bytes that ends on a UTF-8
// character boundary (the audit's columns are text).
size_t utf8_cut(const std::string& text, size_t limit) {
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  return cut;
}

std::string params_text(const rapidjson::Value& params, size_t limit) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  params.Accept(w);
  std::string out{buf.GetString(), buf.GetSize()};
  // The audit keeps what was asked, bounded: a call's params are small. The
  // cut steps back to a UTF-8 character boundary (the column is text).
  if (out.size() > limit)
    out.resize(utf8_cut(out, limit));
  return out;
}

std::string result_body(const std::string& result_json) {
  return "{\"result\":" + result_json + ",\"error\":null}";
}

constexpr size_t allowed_params_bytes = 8192;

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

// A lock wait or a statement the deadline ended (lock_timeout, statement_timeout).
bool is_timeout(const pqxx::sql_error& e) {
  return e.sqlstate() == "55P03" || e.sqlstate() == "57014";
}

manage_reply timed_out() {
  return {504, rpc_error_body("timeout: the call did not finish in time and was rolled back; "
                              "nothing was applied"),
          {}};
}

}  // namespace

std::string rpc_error_body(std::string_view message) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  w.StartObject();
  w.Key("result");
  w.Null();
  w.Key("error");
  w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

void management_state::init(management_ptr self_ptr, management_settings cfg) {
  self = self_ptr;
  settings = std::move(cfg);
  session = std::make_unique<db::session>(settings.database_url, "management",
                                          std::vector<std::string>{}, log::session_report);
  watchdog = std::make_unique<call_watchdog>();
}

manage_reply management_state::on_request(const manage_request& req) {
  rapidjson::Document doc;
  // Iterative (a deep body cannot exhaust the stack) and UTF-8-checked (the
  // method and params go into the audit row, a text column).
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(
    req.body.data(), req.body.size());
  if (doc.HasParseError() || !doc.IsObject())
    return {400, rpc_error_body("invalid: the body is not a JSON-RPC object"), {}};
  auto m = doc.FindMember("method");
  if (m == doc.MemberEnd() || !m->value.IsString())
    return {400, rpc_error_body("invalid: method must be a string"), {}};
  rapidjson::Value empty(rapidjson::kArrayType);
  auto p = doc.FindMember("params");
  if (p != doc.MemberEnd() && !p->value.IsArray())
    return {400, rpc_error_body("invalid: params must be an array"), {}};
  const rapidjson::Value& params = p == doc.MemberEnd() ? empty : p->value;
  std::string method{m->value.GetString(), m->value.GetStringLength()};
  if (method.size() > 64)
    method.resize(utf8_cut(method, 64));
  // The time the call may still take before its commit must have begun.
  const int64_t margin_ns
    = std::chrono::duration_cast<std::chrono::nanoseconds>(settings.commit_margin).count();
  auto left_ms = [&]() -> int64_t {
    return req.deadline_steady_ns == 0 ? INT64_MAX
                                       : (req.deadline_steady_ns - margin_ns - steady_ns()) / 1000000;
  };
  if (left_ms() <= 0)
    return timed_out();  // it waited its whole time behind other calls
  try {
    auto* conn = session->get();
    if (!conn)
      return {503, rpc_error_body("unavailable: database unavailable"), {}};
    pqxx::work tx(*conn);
    // Disarmed on every way out; a call that commits disarms first.
    struct disarm_at_exit {
      call_watchdog& w;
      ~disarm_at_exit() { w.disarm(); }
    } disarm{*watchdog};
    if (req.deadline_steady_ns != 0) {
      watchdog->arm(*conn, call_watchdog::clock::time_point{std::chrono::nanoseconds{
                             req.deadline_steady_ns - margin_ns}});
      // Every lock wait and statement ends before the deadline: a call stuck
      // behind a lock gives its worker back instead of holding it.
      auto ms = std::to_string(std::max<int64_t>(left_ms(), 1));
      tx.exec("SET LOCAL lock_timeout = " + ms + "; SET LOCAL statement_timeout = " + ms);
    }
    auto exists = tx.exec_params("SELECT 1 FROM communities WHERE id = $1", req.community_id);
    if (exists.empty())
      return {404, rpc_error_body("invalid: unknown community"), {}};
    bool owner_rights = settings.operator_pubkeys.count(req.caller) > 0;
    bool allowed = owner_rights;
    if (!allowed) {
      auto role = db::role_of(tx, req.community_id, req.caller);
      allowed = role && *role != member_role::member;
      owner_rights = role && *role == member_role::owner;
    }
    if (!allowed) {
      const std::string why = "restricted: only this community's owners and admins may manage it";
      // Anyone with a key can be refused, as fast as they can sign: the row
      // is small and the rows a community gets this way are bounded.
      if (audit_refusal(req.community_id)) {
        db::audit(tx, req.community_id, req.caller, "nip86", method,
                  params_text(params, settings.refused_params_bytes), false, why);
        if (!watchdog->disarm() || left_ms() <= 0)
          return timed_out();
        tx.commit();
      }
      return {403, rpc_error_body(why), {}};
    }
    // Good once in the cluster: another node may have taken this token
    // (seen_tokens is per node). Only for an allowed caller: a refusal
    // changes nothing, so its replay has nothing to repeat.
    if (!req.token.empty() && !db::use_nip98_token(tx, req.token, req.token_expires_at))
      return {401, rpc_error_body(std::string{"auth-required: "} + nip98_replayed_reason), {}};
    const auto args = params_text(params, allowed_params_bytes);
    auto out = run_management_method(tx, {req.community_id, req.caller, owner_rights}, method, params);
    db::audit(tx, req.community_id, req.caller, "nip86", method, args, out.ok,
              out.ok ? "" : out.error);
    // The last moment a commit may begin: past it, the caller may have
    // stopped waiting, and a change must not land after its 504.
    if (!watchdog->disarm() || left_ms() <= 0)
      return timed_out();
    tx.commit();
    if (!out.ok)
      return {200, rpc_error_body(out.error), {}};
    return {200, result_body(out.result_json), out.revoked};
  } catch (const pqxx::broken_connection&) {
    session->reset();
    return {503, rpc_error_body("unavailable: database unavailable"), {}};
  } catch (const pqxx::in_doubt_error&) {
    // The connection went during COMMIT: the change may have landed.
    session->reset();
    return {503, rpc_error_body("unavailable: the database connection was lost while "
                                "committing; the call may have been applied, list to check"),
            {}};
  } catch (const pqxx::sql_error& e) {
    if (is_timeout(e))
      return timed_out();
    log::error("management", "call failed", {{"method", method}, {"error", e.what()}});
    return {500, rpc_error_body("error: internal error"), {}};
  } catch (const std::exception& e) {
    log::error("management", "call failed", {{"method", method}, {"error", e.what()}});
    return {500, rpc_error_body("error: internal error"), {}};
  }
}

bool management_state::audit_refusal(int64_t community_id) {
  auto now = bucket_clock::now();
  if (refusal_buckets.size() > 4096)
    std::erase_if(refusal_buckets,
                  [&](const auto& kv) { return kv.second.full(now, settings.refusal_audits); });
  if (refusal_buckets[community_id].take(1, now, settings.refusal_audits))
    return true;
  // Counted and logged now and then, never one line per refusal.
  if (refusals_unaudited++ % 1000 == 0)
    log::warn("management", "refused calls beyond the audit rate are not written",
              {{"community", std::to_string(community_id)},
               {"unaudited", std::to_string(refusals_unaudited)}});
  return false;
}

management_actor::behavior_type management_actor_impl(management_ptr self,
                                                      management_settings cfg) {
  self->state.init(self, std::move(cfg));
  return {
    [self](const manage_request& req) { return self->state.on_request(req); },
  };
}

}  // namespace waggle
