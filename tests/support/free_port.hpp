#pragma once

// A TCP port on 127.0.0.1 for a server a test starts (a relay, nats-server,
// pgbouncer). Picked below the kernel's ephemeral range: a port inside it
// (what binding port 0 returns) can be taken between the pick and the
// server's bind by any outgoing connection, and a server restarted on the
// same port finds it held by a client's TIME_WAIT socket for a minute.
// 20000 and up, so never the private PostgreSQL ports of scripts/lib.sh.

#include <cstdint>
#include <fstream>
#include <random>

#include <boost/asio.hpp>

namespace waggle::e2e {

inline uint16_t free_port() {
  int low = 32768;
  if (std::ifstream range{"/proc/sys/net/ipv4/ip_local_port_range"}; !(range >> low))
    low = 32768;
  if (low <= 21000)
    low = 30000;
  std::random_device rd;
  std::uniform_int_distribution<int> pick(20000, low - 1);
  boost::asio::io_context io;
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto port = static_cast<uint16_t>(pick(rd));
    boost::system::error_code ec;
    boost::asio::ip::tcp::acceptor a{io};
    a.open(boost::asio::ip::tcp::v4(), ec);
    a.set_option(boost::asio::socket_base::reuse_address(true), ec);
    a.bind({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
    if (!ec)
      return port;
  }
  return 0;
}

}  // namespace waggle::e2e
