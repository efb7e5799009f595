#include "bench/load/listeners.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "messages/proto/nip98.hpp"

namespace waggle::bench {

namespace http = boost::beast::http;

keypair listener_key(size_t i) {
  keypair k;
  k.secret = proto::sha256_hex("waggle-load operator listener " + std::to_string(i));
  k.pubkey = proto::pubkey_of(k.secret);
  return k;
}

std::string listener_config(const std::vector<uint16_t>& ports) {
  std::string out;
  for (size_t i = 0; i < ports.size(); ++i)
    out += (i ? "," : "") + listener_key(i).pubkey + "=http://127.0.0.1:" +
           std::to_string(ports[i]) + "/wake";
  return out;
}

namespace {

// One POST, bounded by 30 s (asynchronous: a tcp_stream's deadline bounds
// asynchronous calls only); "" or what failed.
std::string post_registration(const relay_endpoint& relay, const keypair& key,
                              const std::string& body) {
  static const std::string path = "/operator/listener/pubkeys";
  boost::asio::io_context ioc;
  boost::beast::tcp_stream stream{ioc};
  http::request<http::string_body> req{http::verb::post, path, 11};
  req.set(http::field::host, relay.target.host_header);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::authorization,
          proto::make_nip98(key.secret, "http://" + relay.target.host_header + path, "POST", body,
                            unix_now()));
  req.body() = body;
  req.prepare_payload();
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  std::string failure = "registration: no answer within 30 s";
  stream.expires_after(std::chrono::seconds(30));
  stream.async_connect(relay.endpoint, [&](boost::system::error_code ec) {
    if (ec)
      return void(failure = "registration: connect: " + ec.message());
    http::async_write(stream, req, [&](boost::system::error_code ec, size_t) {
      if (ec)
        return void(failure = "registration: write: " + ec.message());
      http::async_read(stream, buf, res, [&](boost::system::error_code ec, size_t) {
        if (ec)
          return void(failure = "registration: read: " + ec.message());
        failure = res.result_int() == 200 ? ""
                                          : "registration refused (" +
                                              std::to_string(res.result_int()) + "): " + res.body();
      });
    });
  });
  ioc.run_for(std::chrono::seconds(31));
  return failure;
}

}  // namespace

std::string register_targets(const relay_endpoint& relay, const keypair& key,
                             const std::vector<std::string>& targets) {
  for (size_t at = 0; at < targets.size(); at += 1000) {
    std::string body = "{\"pubkeys\":[";
    for (size_t k = at; k < std::min(targets.size(), at + 1000); ++k)
      body += (k > at ? ",\"" : "\"") + targets[k] + "\"";
    body += "]}";
    if (auto e = post_registration(relay, key, body); !e.empty())
      return e;
  }
  return "";
}

}  // namespace waggle::bench
