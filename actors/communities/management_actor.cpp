#include "actors/communities/management_actor.hpp"

#include <pqxx/except>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "actors/communities/management_methods.hpp"
#include "actors/support/log.hpp"
#include "db/membership_store.hpp"

namespace waggle {

namespace {

std::string params_text(const rapidjson::Value& params) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  params.Accept(w);
  std::string out{buf.GetString(), buf.GetSize()};
  // The audit keeps what was asked, bounded: a call's params are small. The
  // cut steps back to a UTF-8 character boundary (the column is text).
  if (out.size() > 8192) {
    size_t cut = 8192;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80)
      --cut;
    out.resize(cut);
  }
  return out;
}

std::string result_body(const std::string& result_json) {
  return "{\"result\":" + result_json + ",\"error\":null}";
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
    method.resize(64);
  try {
    auto* conn = session->get();
    if (!conn)
      return {503, rpc_error_body("unavailable: database unavailable"), {}};
    pqxx::work tx(*conn);
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
    const auto args = params_text(params);
    if (!allowed) {
      const std::string why = "restricted: only this community's owners and admins may manage it";
      db::audit(tx, req.community_id, req.caller, "nip86", method, args, false, why);
      tx.commit();
      return {403, rpc_error_body(why), {}};
    }
    auto out = run_management_method(tx, {req.community_id, req.caller, owner_rights}, method, params);
    db::audit(tx, req.community_id, req.caller, "nip86", method, args, out.ok,
              out.ok ? "" : out.error);
    tx.commit();
    if (!out.ok)
      return {200, rpc_error_body(out.error), {}};
    return {200, result_body(out.result_json), out.revoked};
  } catch (const pqxx::broken_connection&) {
    session->reset();
    return {503, rpc_error_body("unavailable: database unavailable"), {}};
  } catch (const std::exception& e) {
    log::error("management", "call failed", {{"method", method}, {"error", e.what()}});
    return {500, rpc_error_body("error: internal error"), {}};
  }
}

management_actor::behavior_type management_actor_impl(management_ptr self,
                                                      management_settings cfg) {
  self->state.init(self, std::move(cfg));
  return {
    [self](const manage_request& req) { return self->state.on_request(req); },
  };
}

}  // namespace waggle
