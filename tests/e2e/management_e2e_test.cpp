// NIP-86 over the whole node (docs/management.md, must-show 3): every method
// with an owner's signature and its effect as a client sees it; refusals
// (401 without a valid NIP-98, 403 for members, strangers and another
// community's admin) that change nothing; an audit row for each call.

#include <openssl/sha.h>

#include <algorithm>
#include <future>
#include <thread>

#include "db/membership_store.hpp"
#include "tests/e2e/node_fixture.hpp"

namespace waggle::e2e {
namespace {

struct rpc_options {
  std::string u = "http://gamma.test/";
  std::optional<std::string> payload;  // default: the body's hash; "": no payload tag
  bool sign = true;
};

rpc_options unsigned_call() {
  rpc_options o;
  o.sign = false;
  return o;
}
rpc_options with_u(std::string u) {
  rpc_options o;
  o.u = std::move(u);
  return o;
}
rpc_options with_payload(std::string p) {
  rpc_options o;
  o.payload = std::move(p);
  return o;
}

class management_e2e : public node_e2e {
 protected:
  static void SetUpTestSuite() {
    operator_pubkeys_ = {proto::pubkey_of(pgtest::secret(27))};
    node_e2e::SetUpTestSuite();
    auto conn = db_->connect();
    auto gamma = db::add_community(*conn, "gamma.test", "Gamma", community_policy::closed);
    auto delta = db::add_community(*conn, "delta.test", "Delta", community_policy::closed);
    ASSERT_TRUE(gamma && delta);
    gamma_ = gamma->id;
    delta_ = delta->id;
    auto pk = [](int n) { return proto::pubkey_of(pgtest::secret(n)); };
    ASSERT_TRUE(db::add_member(*conn, gamma_, pk(21), member_role::owner, {}));
    ASSERT_TRUE(db::add_member(*conn, gamma_, pk(23), member_role::member, {}));
    ASSERT_TRUE(db::add_member(*conn, delta->id, pk(25), member_role::owner, {}));
    ASSERT_TRUE(pgtest::eventually([] {
      return node_->api().find_community("gamma.test") && node_->api().find_community("delta.test");
    }));
  }

  gateway::http_response rpc(const std::string& sk, const std::string& body,
                             const rpc_options& o = rpc_options{},
                             const std::string& host = "gamma.test") {
    unsigned char digest[32];
    SHA256(reinterpret_cast<const unsigned char*>(body.data()), body.size(), digest);
    std::vector<std::pair<std::string, std::string>> headers{
      {"Host", host}, {"Content-Type", "application/nostr+json+rpc"}};
    if (o.sign) {
      std::vector<proto::tag> tags{{"u", o.u}, {"method", "POST"}};
      auto payload = o.payload.value_or(proto::to_hex(digest, 32));
      if (!payload.empty())
        tags.push_back({"payload", payload});
      auto auth = signed_event(sk, 27235, "", tags);
      headers.emplace_back("Authorization", "Nostr " + base64(auth.raw));
    }
    return gateway::http_request("127.0.0.1", port_, "POST", "/", headers, body);
  }

  // An owner's call: HTTP 200 and no error; returns the result as JSON text.
  std::string ok_call(const std::string& method, const std::string& params = "[]") {
    auto r = rpc(owner, R"({"method":")" + method + R"(","params":)" + params + "}");
    EXPECT_EQ(r.status, 200u) << method << " " << r.body;
    EXPECT_EQ(r.header("Content-Type"), "application/nostr+json+rpc");
    auto d = parse(r.body);
    EXPECT_TRUE(d.IsObject() && d["error"].IsNull()) << method << " " << r.body;
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w{buf};
    if (d.IsObject() && d.HasMember("result"))
      d["result"].Accept(w);
    return buf.GetString();
  }

  bool accepted(const std::string& sk, const proto::event& ev) {
    auto c = login("gamma.test", sk);
    return publish(*c, ev).find(",true,") != std::string::npos;
  }

  std::string nip11_field(const char* key) {
    auto r = gateway::http_request("127.0.0.1", port_, "GET", "/",
                                   {{"Host", "gamma.test"}, {"Accept", "application/nostr+json"}});
    auto d = parse(r.body);
    return d.IsObject() && d.HasMember(key) && d[key].IsString() ? d[key].GetString() : "";
  }

  int64_t audits(const std::string& method, bool ok, int64_t community_id = 0) {
    auto conn = db_->connect();
    pqxx::read_transaction tx(*conn);
    return tx.exec_params("SELECT count(*) FROM community_audit WHERE community_id = $1 "
                          "AND via = 'nip86' AND method = $2 AND ok = $3",
                          community_id ? community_id : gamma_, method, ok)[0][0].as<int64_t>();
  }

  static inline int64_t gamma_ = 0;
  static inline int64_t delta_ = 0;
  const std::string owner = pgtest::secret(21);
  const std::string member = pgtest::secret(23);
  const std::string stranger = pgtest::secret(24);
  const std::string other_owner = pgtest::secret(25);
  const std::string stranger_pk = proto::pubkey_of(pgtest::secret(24));
};

TEST_F(management_e2e, supportedmethods_lists_every_method) {
  auto methods = ok_call("supportedmethods");
  for (auto m : {"banpubkey", "unbanpubkey", "listbannedpubkeys", "allowpubkey", "unallowpubkey",
                 "listallowedpubkeys", "banevent", "unbanevent", "listbannedevents",
                 "changerelayname", "changerelaydescription", "changerelayicon", "allowkind",
                 "disallowkind", "listallowedkinds", "listdisallowedkinds", "blockip",
                 "unblockip", "listblockedips", "supportedmethods"})
    EXPECT_NE(methods.find(std::string("\"") + m + "\""), std::string::npos) << m;
  EXPECT_EQ(audits("supportedmethods", true), 1);
}

TEST_F(management_e2e, pubkey_methods_take_effect_at_once) {
  EXPECT_FALSE(accepted(stranger, signed_event(stranger, 1, "before")));
  ok_call("allowpubkey", R"([")" + stranger_pk + R"(","new hire"])");
  EXPECT_TRUE(accepted(stranger, signed_event(stranger, 1, "allowed now")));
  EXPECT_NE(ok_call("listallowedpubkeys").find(stranger_pk), std::string::npos);

  ok_call("banpubkey", R"([")" + stranger_pk + R"(","spam"])");
  EXPECT_FALSE(accepted(stranger, signed_event(stranger, 1, "banned")));
  auto c = login("gamma.test", stranger);
  auto h = history(*c, "s", R"({"kinds":[1]})");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].rfind("CLOSED:", 0), 0u) << h[0];
  EXPECT_NE(ok_call("listbannedpubkeys").find("\"reason\":\"spam\""), std::string::npos);
  EXPECT_EQ(ok_call("listallowedpubkeys").find(stranger_pk), std::string::npos);  // banned: not a member

  ok_call("unbanpubkey", R"([")" + stranger_pk + R"("])");
  EXPECT_EQ(ok_call("listbannedpubkeys"), "[]");
  ok_call("allowpubkey", R"([")" + stranger_pk + R"("])");
  ok_call("unallowpubkey", R"([")" + stranger_pk + R"("])");
  EXPECT_FALSE(accepted(stranger, signed_event(stranger, 1, "removed")));
  for (auto m : {"allowpubkey", "banpubkey", "unbanpubkey", "unallowpubkey", "listbannedpubkeys"})
    EXPECT_GE(audits(m, true), 1) << m;
}

TEST_F(management_e2e, banevent_hides_the_event_and_refuses_it_again) {
  auto ev = signed_event(member, 1, "to be banned");
  ASSERT_TRUE(accepted(member, ev));
  ok_call("banevent", R"([")" + ev.id + R"(","off-topic"])");
  auto c = login("gamma.test", member);
  EXPECT_EQ(history(*c, "e", R"({"ids":[")" + ev.id + R"("]})"), std::vector<std::string>{});
  EXPECT_FALSE(accepted(member, ev));
  EXPECT_NE(ok_call("listbannedevents").find(ev.id), std::string::npos);
  ok_call("unbanevent", R"([")" + ev.id + R"("])");
  EXPECT_EQ(ok_call("listbannedevents"), "[]");
  // Unbanning does not restore.
  EXPECT_EQ(history(*c, "e2", R"({"ids":[")" + ev.id + R"("]})"), std::vector<std::string>{});
  EXPECT_EQ(audits("banevent", true), 1);
}

TEST_F(management_e2e, relay_info_changes_show_in_nip11) {
  ok_call("changerelayname", R"(["Gamma Renamed"])");
  ok_call("changerelaydescription", R"(["The gamma team"])");
  ok_call("changerelayicon", R"(["https://gamma.test/icon.png"])");
  EXPECT_TRUE(pgtest::eventually([&] { return nip11_field("name") == "Gamma Renamed"; }));
  EXPECT_TRUE(pgtest::eventually([&] { return nip11_field("description") == "The gamma team"; }));
  EXPECT_TRUE(pgtest::eventually([&] { return nip11_field("icon") == "https://gamma.test/icon.png"; }));
  EXPECT_EQ(audits("changerelayicon", true), 1);
}

TEST_F(management_e2e, nip11_lists_86_everywhere_and_43_where_not_open) {
  auto nips = [&](const std::string& host) {
    auto r = gateway::http_request("127.0.0.1", port_, "GET", "/",
                                   {{"Host", host}, {"Accept", "application/nostr+json"}});
    std::vector<int> out;
    auto d = parse(r.body);
    for (auto& v : d["supported_nips"].GetArray())
      out.push_back(v.GetInt());
    return out;
  };
  auto gamma = nips("gamma.test");
  auto alpha = nips("alpha.test");  // open
  EXPECT_TRUE(std::is_sorted(gamma.begin(), gamma.end()));
  EXPECT_NE(std::find(gamma.begin(), gamma.end(), 43), gamma.end());
  EXPECT_NE(std::find(gamma.begin(), gamma.end(), 86), gamma.end());
  EXPECT_EQ(std::find(alpha.begin(), alpha.end(), 43), alpha.end());
  EXPECT_NE(std::find(alpha.begin(), alpha.end(), 86), alpha.end());
}

TEST_F(management_e2e, kind_rules_refuse_other_kinds) {
  ok_call("disallowkind", "[7]");
  EXPECT_FALSE(accepted(member, signed_event(member, 7, "+")));
  EXPECT_TRUE(accepted(member, signed_event(member, 42, "any other kind")));
  ok_call("allowkind", "[1]");
  EXPECT_TRUE(accepted(member, signed_event(member, 1, "allowed kind")));
  EXPECT_FALSE(accepted(member, signed_event(member, 42, "not on the allow list")));
  EXPECT_EQ(ok_call("listallowedkinds"), "[1]");
  EXPECT_EQ(ok_call("listdisallowedkinds"), "[7]");
  auto conn = db_->connect();
  pqxx::work tx(*conn);
  tx.exec_params("DELETE FROM community_kinds WHERE community_id = $1", gamma_);
  tx.commit();
}

TEST_F(management_e2e, blockip_refuses_the_address_at_the_gateway) {
  ok_call("blockip", R"(["10.1.2.3","abuse"])");
  EXPECT_NE(ok_call("listblockedips").find("\"ip\":\"10.1.2.3\""), std::string::npos);
  ok_call("unblockip", R"(["10.1.2.3"])");
  EXPECT_EQ(ok_call("listblockedips"), "[]");
  ok_call("blockip", R"(["::ffff:127.0.0.1"])");  // stored and compared as IPv4
  EXPECT_TRUE(pgtest::eventually([&] {
    gateway::ws_client c;
    return !c.connect("127.0.0.1", port_, "gamma.test") && c.rejected_status() == 403u;
  }));
  EXPECT_EQ(rpc(owner, R"({"method":"listblockedips","params":[]})").status, 403u);
  EXPECT_EQ(gateway::http_request("127.0.0.1", port_, "POST", "/events", {{"Host", "gamma.test"}}, "{}").status, 403u);
  // Other communities do not block it.
  gateway::ws_client beta;
  EXPECT_TRUE(beta.connect("127.0.0.1", port_, "delta.test"));
  {  // Unblocking from a blocked address is the operator's job (psql or another address).
    auto conn = db_->connect();
    pqxx::work tx(*conn);
    tx.exec_params("DELETE FROM community_blocked_ips WHERE community_id = $1", gamma_);
    tx.commit();
  }
  EXPECT_TRUE(pgtest::eventually([&] {
    gateway::ws_client c;
    return c.connect("127.0.0.1", port_, "gamma.test");
  }));
}

TEST_F(management_e2e, refused_callers_change_nothing) {
  const std::string allow = R"({"method":"allowpubkey","params":[")" + stranger_pk + R"("]})";
  const std::string list = R"({"method":"listallowedpubkeys","params":[]})";
  for (const auto& body : {allow, list}) {
    EXPECT_EQ(rpc(member, body).status, 403u);
    EXPECT_NE(rpc(member, body).body.find("restricted:"), std::string::npos);
    EXPECT_EQ(rpc(stranger, body).status, 403u);
    EXPECT_EQ(rpc(other_owner, body).status, 403u);  // delta's owner, not gamma's
    EXPECT_EQ(rpc(owner, body, unsigned_call()).status, 401u);
    EXPECT_EQ(rpc(owner, body, with_u("http://delta.test/")).status, 401u);
    EXPECT_EQ(rpc(owner, body, with_payload(std::string(64, '0'))).status, 401u);
    EXPECT_EQ(rpc(owner, body, with_payload("")).status, 401u);
  }
  // delta's owner manages delta, not gamma.
  EXPECT_EQ(rpc(other_owner, list, with_u("http://delta.test/"), "delta.test").status, 200u);
  EXPECT_EQ(ok_call("listallowedpubkeys").find(stranger_pk), std::string::npos);
  EXPECT_FALSE(accepted(stranger, signed_event(stranger, 1, "still out")));
  EXPECT_EQ(audits("allowpubkey", false), 4);  // refused after NIP-98: audited too; 401s not
}

TEST_F(management_e2e, bad_calls_are_errors_that_change_nothing) {
  auto call = [&](const std::string& body) { return rpc(owner, body); };
  auto r = call(R"({"method":"banpubkey","params":["nothex"]})");
  EXPECT_EQ(r.status, 200u);
  EXPECT_NE(r.body.find("invalid:"), std::string::npos) << r.body;
  r = call(R"({"method":"blockip","params":["999.1.1.1"]})");
  EXPECT_NE(r.body.find("not an IP address"), std::string::npos) << r.body;
  r = call(R"({"method":"allowkind","params":[70000]})");
  EXPECT_NE(r.body.find("invalid:"), std::string::npos) << r.body;
  r = call(R"({"method":"nosuchmethod","params":[]})");
  EXPECT_NE(r.body.find("unknown method"), std::string::npos) << r.body;
  EXPECT_EQ(call("not json").status, 400u);
  EXPECT_EQ(ok_call("listblockedips"), "[]");
  EXPECT_EQ(ok_call("listallowedkinds"), "[]");
}

// Must-show 1 through NIP-86: allowpubkey lets a key in at once, and
// unallowpubkey ends its open subscription with CLOSED and refuses its next
// frame.
TEST_F(management_e2e, unallowpubkey_ends_open_subscriptions) {
  const auto newcomer = pgtest::secret(26);
  const auto newcomer_pk = proto::pubkey_of(newcomer);
  auto c = login("gamma.test", newcomer);
  ASSERT_EQ(history(*c, "early", R"({"kinds":[1]})"),
            std::vector<std::string>{"CLOSED:restricted: not a member of this community"});
  ok_call("allowpubkey", R"([")" + newcomer_pk + R"("])");
  auto ok = publish(*c, signed_event(newcomer, 1, "in"));
  EXPECT_NE(ok.find(",true,"), std::string::npos) << ok;
  auto live = history(*c, "live", R"({"kinds":[1]})");
  ASSERT_FALSE(live.empty());
  ASSERT_EQ(live.back().rfind("CLOSED:", 0), std::string::npos) << live.back();

  ok_call("unallowpubkey", R"([")" + newcomer_pk + R"("])");
  std::optional<std::string> closed;
  while (auto f = c->read_text(5s))
    if (f->find("\"live\"") != std::string::npos) {
      closed = f;
      break;
    }
  ASSERT_TRUE(closed) << "the subscription was not ended";
  EXPECT_EQ(*closed, R"(["CLOSED","live","restricted: not a member of this community"])");
  auto refused = publish(*c, signed_event(newcomer, 1, "still here?"));
  // The removed key was dropped from the connection's AUTH: it must sign in again.
  EXPECT_NE(refused.find(",false,\"auth-required:"), std::string::npos) << refused;
}

// Must-show 3 as a table: every method, with valid params, from each caller
// that must be refused (a member, a stranger, another community's owner:
// 403, audited; no signature, a wrong `u`, a wrong or missing payload hash:
// 401, not audited) changes nothing; then the owner's call of each succeeds
// and leaves exactly one ok audit row. On a community of its own, so the
// kind rules it sets do not reach the other tests.
TEST_F(management_e2e, every_method_refuses_every_wrong_caller_and_audits_the_owner) {
  int64_t epsilon = 0;
  {
    auto conn = db_->connect();
    auto c = db::add_community(*conn, "epsilon.test", "Epsilon", community_policy::closed);
    ASSERT_TRUE(c);
    epsilon = c->id;
    ASSERT_TRUE(db::add_member(*conn, epsilon, proto::pubkey_of(owner), member_role::owner, {}));
    ASSERT_TRUE(db::add_member(*conn, epsilon, proto::pubkey_of(member), member_role::member, {}));
  }
  ASSERT_TRUE(pgtest::eventually([] { return node_->api().find_community("epsilon.test").has_value(); }));
  const std::string pk_a = proto::pubkey_of(pgtest::secret(31));
  const std::string pk_b = proto::pubkey_of(pgtest::secret(32));
  const std::string id(64, 'e');
  const std::vector<std::pair<std::string, std::string>> calls{
    {"supportedmethods", "[]"},
    {"banpubkey", R"([")" + pk_b + R"(","spam"])"},
    {"unbanpubkey", R"([")" + pk_b + R"("])"},
    {"listbannedpubkeys", "[]"},
    {"allowpubkey", R"([")" + pk_a + R"(","hire"])"},
    {"unallowpubkey", R"([")" + pk_a + R"("])"},
    {"listallowedpubkeys", "[]"},
    {"banevent", R"([")" + id + R"(","off topic"])"},
    {"unbanevent", R"([")" + id + R"("])"},
    {"listbannedevents", "[]"},
    {"changerelayname", R"(["Epsilon Team"])"},
    {"changerelaydescription", R"(["About us"])"},
    {"changerelayicon", R"(["https://epsilon.test/icon.png"])"},
    {"allowkind", "[1]"},
    {"disallowkind", "[2]"},
    {"listallowedkinds", "[]"},
    {"listdisallowedkinds", "[]"},
    {"blockip", R"(["192.0.2.7","abuse"])"},
    {"unblockip", R"(["192.0.2.7"])"},
    {"listblockedips", "[]"},
  };
  ASSERT_EQ(calls.size(), 20u);
  const std::string u = "http://epsilon.test/";
  auto call = [&](const std::string& sk, const std::string& method, const std::string& params,
                  rpc_options o) {
    return rpc(sk, R"({"method":")" + method + R"(","params":)" + params + "}", o, "epsilon.test");
  };
  auto state = [&] {  // everything a method can change, read from the tables
    auto conn = db_->connect();
    pqxx::read_transaction tx(*conn);
    std::string out;
    for (auto q : {"SELECT encode(pubkey, 'hex') || coalesce(reason, '') FROM community_banned_pubkeys",
                   "SELECT encode(pubkey, 'hex') || role || (removed_at IS NULL) FROM community_members",
                   "SELECT encode(event_id, 'hex') FROM community_banned_events",
                   "SELECT kind::text || allowed FROM community_kinds",
                   "SELECT host(ip) FROM community_blocked_ips",
                   "SELECT name || '|' || description || '|' || icon || policy FROM communities"}) {
      std::string sql = std::string(q) + (std::string(q).find("FROM communities") != std::string::npos
                                            ? " WHERE id = $1"
                                            : " WHERE community_id = $1");
      for (const auto& row : tx.exec_params(sql + " ORDER BY 1", epsilon))
        out += row[0].c_str() + std::string("\n");
      out += "--\n";
    }
    return out;
  };
  const auto before = state();
  for (const auto& [method, params] : calls) {
    for (const auto& sk : {member, stranger, other_owner}) {
      auto r = call(sk, method, params, with_u(u));
      EXPECT_EQ(r.status, 403u) << method << " " << r.body;
      EXPECT_NE(r.body.find("\"error\":\"restricted:"), std::string::npos) << method << " " << r.body;
    }
    rpc_options unsigned_opts = unsigned_call();
    rpc_options wrong_u = with_u("http://gamma.test/");
    rpc_options wrong_hash = with_payload(std::string(64, '0'));
    wrong_hash.u = u;
    rpc_options no_hash = with_payload("");
    no_hash.u = u;
    for (const auto& o : {unsigned_opts, wrong_u, wrong_hash, no_hash}) {
      auto r = call(owner, method, params, o);
      EXPECT_EQ(r.status, 401u) << method << " " << r.body;
      EXPECT_EQ(r.header("WWW-Authenticate"), "Nostr") << method;
    }
    EXPECT_EQ(audits(method, false, epsilon), 3) << method;
    EXPECT_EQ(audits(method, true, epsilon), 0) << method;
  }
  EXPECT_EQ(state(), before) << "a refused call changed something";

  for (const auto& [method, params] : calls) {
    auto r = call(owner, method, params, with_u(u));
    EXPECT_EQ(r.status, 200u) << method << " " << r.body;
    EXPECT_NE(r.body.find("\"error\":null"), std::string::npos) << method << " " << r.body;
    EXPECT_EQ(audits(method, true, epsilon), 1) << method;
  }
  EXPECT_NE(state(), before);
}

// An operator key (--operator-pubkeys) manages every community of the node
// without being a member of any; its calls are audited under its key.
TEST_F(management_e2e, an_operator_key_manages_any_community) {
  const auto op = pgtest::secret(27);
  auto r = rpc(op, R"({"method":"listallowedpubkeys","params":[]})");
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_NE(r.body.find(proto::pubkey_of(owner)), std::string::npos) << r.body;
  auto d = rpc(op, R"({"method":"supportedmethods","params":[]})", with_u("http://delta.test/"),
               "delta.test");
  EXPECT_EQ(d.status, 200u) << d.body;
  // Being an operator does not make the key a member.
  EXPECT_FALSE(accepted(op, signed_event(op, 1, "operators manage, they do not post")));
  auto conn = db_->connect();
  pqxx::read_transaction tx(*conn);
  EXPECT_EQ(tx.exec_params("SELECT count(*) FROM community_audit WHERE caller = decode($1, 'hex') "
                           "AND ok",
                           proto::pubkey_of(op))[0][0]
              .as<int64_t>(),
            2);
}

// Red-team findings, each red before its fix: a deep body crashed the node
// (recursive parse), a bad UTF-8 byte or a cut inside a character made the
// audit INSERT fail (so the call was neither applied nor audited), and an
// admin could remove the community's owner.
TEST_F(management_e2e, hostile_bodies_are_refused_and_audited_and_the_node_lives) {
  auto deep = rpc(stranger, R"({"method":"supportedmethods","params":)" + std::string(60000, '['));
  EXPECT_EQ(deep.status, 400u) << deep.body;
  auto bad_byte = rpc(stranger, "{\"method\":\"ban\xff\",\"params\":[]}");
  EXPECT_EQ(bad_byte.status, 400u) << bad_byte.body;
  EXPECT_EQ(gateway::http_request("127.0.0.1", port_, "GET", "/healthz").status, 200u);
  // \x01 is audited as \u0001 (6 bytes): the 8192-byte cut falls inside an "é".
  std::string desc = std::string(1364, '\x01') + "a" + "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w{sb};
  w.StartObject();
  w.Key("method");
  w.String("changerelaydescription");
  w.Key("params");
  w.StartArray();
  w.String(desc.data(), static_cast<rapidjson::SizeType>(desc.size()));
  w.EndArray();
  w.EndObject();
  const auto before = audits("changerelaydescription", true);
  auto r = rpc(owner, sb.GetString());
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(audits("changerelaydescription", true), before + 1);
}

TEST_F(management_e2e, an_admin_cannot_remove_or_ban_an_owner) {
  const auto admin = pgtest::secret(22);
  {
    auto conn = db_->connect();
    ASSERT_TRUE(db::add_member(*conn, gamma_, proto::pubkey_of(admin), member_role::admin, {}));
  }
  const auto owner_pk = proto::pubkey_of(owner);
  for (auto m : {"unallowpubkey", "banpubkey"}) {
    auto r = rpc(admin, std::string(R"({"method":")") + m + R"(","params":[")" + owner_pk + R"("]})");
    EXPECT_EQ(r.status, 200u) << m;
    EXPECT_NE(r.body.find("\"error\":\"restricted: only an owner"), std::string::npos) << m << r.body;
  }
  auto conn = db_->connect();
  pqxx::nontransaction tx(*conn);
  auto role = db::role_of(tx, gamma_, owner_pk);
  EXPECT_TRUE(role && *role == member_role::owner);
  // An admin still manages members.
  auto r = rpc(admin, R"({"method":"allowpubkey","params":[")" + proto::pubkey_of(pgtest::secret(33)) + R"("]})");
  EXPECT_NE(r.body.find("\"error\":null"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace waggle::e2e

namespace waggle::e2e {
namespace {

// A stranger may be refused as fast as they can sign: each refusal wrote an
// audit row with up to 8 KB of params (about 3.7 MB/s under a flood). Now a
// refusal's row keeps 256 bytes of params, and a community gets at most 100
// such rows at once and 2 a second after (docs/management.md, "Audit").
TEST_F(management_e2e, a_strangers_refusals_are_audited_small_and_bounded) {
  auto conn = db_->connect();
  auto zeta = db::add_community(*conn, "zeta.test", "Zeta", community_policy::closed);
  ASSERT_TRUE(zeta);
  ASSERT_TRUE(pgtest::eventually([] { return node_->api().find_community("zeta.test").has_value(); }));
  const std::string body
    = R"({"method":"allowpubkey","params":[")" + stranger_pk + R"(",")" + std::string(8000, 'x') + R"("]})";
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 150; ++i)
    ASSERT_EQ(rpc(stranger, body, with_u("http://zeta.test/"), "zeta.test").status, 403u);
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  pqxx::read_transaction tx(*conn);
  auto r = tx.exec_params("SELECT count(*), coalesce(max(octet_length(params)), 0) FROM community_audit "
                          "WHERE community_id = $1",
                          zeta->id)[0];
  EXPECT_LE(r[0].as<int64_t>(), 100 + static_cast<int64_t>(2 * seconds) + 1) << seconds << " s";
  EXPECT_GE(r[0].as<int64_t>(), 100);
  EXPECT_LE(r[1].as<int64_t>(), 256);
}

// NIP-98 tokens were replayable within the auth window: a captured ban,
// undone by the owner, could be sent again. Now the second use is a 401 and
// leaves no audit row.
TEST_F(management_e2e, a_nip98_token_is_good_once) {
  const std::string body = R"({"method":"changerelaydescription","params":["once"]})";
  unsigned char digest[32];
  SHA256(reinterpret_cast<const unsigned char*>(body.data()), body.size(), digest);
  auto auth = signed_event(owner, 27235, "",
                           {{"u", "http://gamma.test/"}, {"method", "POST"},
                            {"payload", proto::to_hex(digest, 32)}});
  auto send = [&] {
    return gateway::http_request("127.0.0.1", port_, "POST", "/",
                                 {{"Host", "gamma.test"},
                                  {"Content-Type", "application/nostr+json+rpc"},
                                  {"Authorization", "Nostr " + base64(auth.raw)}},
                                 body);
  };
  const auto before = audits("changerelaydescription", true);
  EXPECT_EQ(send().status, 200u);
  auto again = send();
  EXPECT_EQ(again.status, 401u) << again.body;
  EXPECT_NE(again.body.find("already used"), std::string::npos) << again.body;
  EXPECT_EQ(audits("changerelaydescription", true), before + 1);
}

// A call stuck behind a lock: it used to hold the node's one management actor
// (every community's calls waited), and to commit after its caller had been
// answered 503. Now the call's own deadline ends it: 504, rolled back, the
// change never lands; and a call of another community is answered meanwhile.
TEST_F(management_e2e, a_call_stuck_on_a_lock_ends_by_its_deadline_without_holding_up_others) {
  ASSERT_NE(gamma_ % 4, delta_ % 4) << "the two communities must have different workers";
  auto holder = db_->connect();
  auto name_of_gamma = [&] {
    auto conn = db_->connect();
    pqxx::read_transaction tx(*conn);
    return tx.exec_params("SELECT name FROM communities WHERE id = $1", gamma_)[0][0].as<std::string>();
  };
  const auto name_before = name_of_gamma();
  pqxx::work lock(*holder);
  lock.exec_params("SELECT 1 FROM communities WHERE id = $1 FOR UPDATE", gamma_);
  std::promise<gateway::http_response> stuck;
  auto stuck_answer = stuck.get_future();
  std::thread caller([&] { stuck.set_value(rpc(owner, R"({"method":"changerelayname","params":["Stuck"]})")); });
  // The call waits on the row lock before the other community's call is made.
  ASSERT_TRUE(pgtest::eventually([&] {
    auto conn = db_->connect();
    pqxx::read_transaction tx(*conn);
    return tx.exec("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                   "AND datname = current_database()")[0][0]
             .as<int64_t>() > 0;
  }));
  auto t0 = std::chrono::steady_clock::now();
  auto other = rpc(other_owner, R"({"method":"listallowedpubkeys","params":[]})",
                   with_u("http://delta.test/"), "delta.test");
  auto other_took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(other.status, 200u) << other.body;
  EXPECT_LT(other_took, std::chrono::seconds(2));
  ASSERT_EQ(stuck_answer.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  caller.join();
  auto r = stuck_answer.get();
  EXPECT_EQ(r.status, 504u) << r.body;
  EXPECT_NE(r.body.find("nothing was applied"), std::string::npos) << r.body;
  lock.abort();  // the lock goes; nothing may commit now
  // Before, the change committed the moment the lock went.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(name_of_gamma(), name_before);
}

}  // namespace
}  // namespace waggle::e2e
