#pragma once

// The operator listeners' queue as a delivery_source (docs/delivery.md):
// rows of db/operator_outbox.hpp for the listeners this node routes, each
// turned into a POST to its listener's URL with the body
// {"v":1,"delivery_id","listener","target","community","event"}.

#include <map>
#include <string>
#include <vector>

#include "actors/delivery/delivery_store.hpp"
#include "db/operator_outbox.hpp"

namespace waggle {

class listener_source : public delivery_source {
 public:
  // listener key (64 hex) -> URL. Empty: claims nothing.
  explicit listener_source(std::map<std::string, std::string> listeners,
                           db::claim_settings settings = {});
  delivery_claim_reply claim(pqxx::connection& conn, const delivery_claim_request& req) override;
  delivery_completion complete(pqxx::connection& conn,
                               const delivery_complete_request& req) override;
  std::vector<std::string> session_setup() const override {
    return db::claim_session_setup();
  }

 private:
  std::map<std::string, std::string> urls_;
  std::vector<std::string> keys_;
  db::claim_settings settings_;
};

// The JSON body a listener receives (the event verbatim, as stored).
std::string listener_delivery_body(const db::claimed_delivery& row);

}  // namespace waggle
