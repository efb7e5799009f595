#include "actors/node/portability_cli.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>

#include <pqxx/connection>

#include "actors/node/cli_args.hpp"
#include "actors/node/event_loader.hpp"
#include "actors/support/log.hpp"
#include "db/event_export.hpp"

namespace waggle {

namespace {

using steady = std::chrono::steady_clock;

int usage_error(const std::string& what) {
  std::cerr << "waggle: " << what << "\n"
            << "usage:\n"
               "  waggle export [--community HOST] [--since TS] [--until TS] [--database-url URL]\n"
               "  waggle import FILE|- --community HOST [--batch N] [--database-url URL]\n"
               "                [any `waggle serve` option: --relay-key-file, --writers, ...]\n"
               "docs/portability.md has the format, what is re-derived and the exit codes.\n";
  return 2;
}


std::optional<int64_t> integer(const std::string& text) {
  try {
    size_t used = 0;
    auto v = std::stoll(text, &used);
    if (used == text.size())
      return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

double seconds_since(steady::time_point start) {
  return std::chrono::duration<double>(steady::now() - start).count();
}

std::string rate(uint64_t n, double seconds) {
  return std::to_string(static_cast<uint64_t>(seconds > 0 ? n / seconds : 0)) + " events/s";
}

// ---- import's reader ------------------------------------------------------------

// Lines of a file or stdin, each at most `max` bytes: a longer one is never
// held whole, only reported (its bytes are skipped up to its newline).
class line_reader {
 public:
  line_reader(std::FILE* in, size_t max) : in_(in), max_(max) {}

  struct line {
    uint64_t number = 0;  // 1-based
    std::string text;
    bool oversize = false;
  };

  // False at the end of the input.
  bool next(line& out) {
    out.text.clear();
    out.oversize = false;
    bool any = false;
    for (;;) {
      if (pos_ == len_) {
        len_ = std::fread(buf_, 1, sizeof buf_, in_);
        pos_ = 0;
        if (len_ == 0) {
          if (std::ferror(in_))
            throw std::runtime_error(std::string{"cannot read the input: "} + std::strerror(errno));
          if (!any)
            return false;
          break;  // a last line without its newline
        }
      }
      any = true;
      auto* start = buf_ + pos_;
      auto* nl = static_cast<char*>(std::memchr(start, '\n', len_ - pos_));
      size_t take = nl ? static_cast<size_t>(nl - start) : len_ - pos_;
      if (!out.oversize) {
        if (out.text.size() + take > max_ + 1) {  // +1: a '\r' before the newline
          out.oversize = true;
          out.text.clear();
          out.text.shrink_to_fit();
        } else {
          out.text.append(start, take);
        }
      }
      pos_ += take;
      if (nl) {
        ++pos_;
        break;
      }
    }
    out.number = ++lines_;
    if (!out.text.empty() && out.text.back() == '\r')
      out.text.pop_back();
    if (out.text.size() > max_)
      out.oversize = true;
    return true;
  }

 private:
  std::FILE* in_;
  size_t max_;
  char buf_[1 << 16];
  size_t pos_ = 0;
  size_t len_ = 0;
  uint64_t lines_ = 0;
};

bool blank(const std::string& s) {
  return s.find_first_not_of(" \t\r") == std::string::npos;
}

struct import_counts {
  uint64_t lines = 0, stored = 0, duplicates = 0, refused = 0;
  uint64_t handled() const { return stored + duplicates + refused; }  // blank lines aside
};

}  // namespace

// ---- export ---------------------------------------------------------------------

int run_export(std::vector<std::string> args) {
  auto host = take_flag(args, "--community").value_or("");
  auto since_text = take_flag(args, "--since");
  auto until_text = take_flag(args, "--until");
  const char* env_url = std::getenv("WAGGLE_DATABASE_URL");
  auto url = take_flag(args, "--database-url").value_or(env_url ? env_url : "");
  if (!args.empty())
    return usage_error("export: unexpected argument " + args.front());
  if (url.empty())
    return usage_error("export: no database: set WAGGLE_DATABASE_URL or --database-url");
  db::export_range range;
  if (since_text && !(range.since = integer(*since_text)))
    return usage_error("export: --since is a unix time in seconds");
  if (until_text && !(range.until = integer(*until_text)))
    return usage_error("export: --until is a unix time in seconds");

  pqxx::connection conn{url};
  auto c = find_community(conn, host);
  if (!c) {
    std::cerr << "waggle export: " << c.error().reason << "\n";
    return 1;
  }
  static char out_buf[1 << 20];
  std::setvbuf(stdout, out_buf, _IOFBF, sizeof out_buf);
  auto start = steady::now();
  auto last_report = start;
  bool write_failed = false;
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch()).count();
  auto counts = db::export_events(
    conn, c->id, range, now, 2000,
    [&](std::string_view raw) {
      if (std::fwrite(raw.data(), 1, raw.size(), stdout) != raw.size()
          || std::fputc('\n', stdout) == EOF)
        write_failed = true;
    },
    [&](const db::export_counts& so_far) {
      if (write_failed)
        throw std::runtime_error(std::string{"cannot write to stdout: "} + std::strerror(errno));
      if (steady::now() - last_report < std::chrono::seconds(1))
        return;
      last_report = steady::now();
      std::cerr << "export: " << so_far.events << " events, "
                << rate(so_far.events, seconds_since(start)) << "\n";
    });
  if (std::fflush(stdout) != 0 || write_failed) {
    std::cerr << "waggle export: cannot write to stdout: " << std::strerror(errno) << "\n";
    return 1;
  }
  auto took = seconds_since(start);
  std::fprintf(stderr,
               "export: %s: %llu events in %.1f s (%s); %llu relay-signed group state "
               "events left out (an importing relay derives its own)\n",
               c->host.c_str(), static_cast<unsigned long long>(counts.events), took,
               rate(counts.events, took).c_str(),
               static_cast<unsigned long long>(counts.relay_derived));
  return 0;
}

// ---- import ---------------------------------------------------------------------

int run_import(std::vector<std::string> args) {
  auto host = take_flag(args, "--community");
  auto batch_text = take_flag(args, "--batch").value_or("1000");
  if (args.empty() || args.front().rfind("--", 0) == 0)
    return usage_error("import: name the file to read (- for stdin)");
  auto path = args.front();
  args.erase(args.begin());
  if (!host || host->empty())
    return usage_error("import: --community HOST is required");
  auto batch = integer(batch_text);
  // A batch's lines are held until every one of them is answered.
  if (!batch || *batch < 1 || *batch > 100'000)
    return usage_error("import: --batch is a number of lines within 1..100000");

  loader_config cfg;
  // The rest are the node's own options, read as `waggle serve` reads them
  // (and from the same WAGGLE_* variables): the same key, the same limits.
  if (auto st = parse_serve_config(cfg.node, args); !st.ok())
    return usage_error("import: " + st.reason);
  if (cfg.node.database_url.empty())
    return usage_error("import: no database: set WAGGLE_DATABASE_URL or --database-url");
  if (!cfg.node.write_policy.empty())
    return usage_error("import: --write-policy is not applied to an import (docs/portability.md)");
  cfg.community = *host;
  cfg.node.port = 0;  // no gateway; a random node id
  // Not a cluster member: it takes no barriers and owns no rosters for
  // others. Clustered nodes read its commits as they read any node's.
  cfg.node.bus = "inproc";
  log::set_level(log::level::warn);

  std::FILE* in = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (!in) {
    std::cerr << "waggle import: cannot open " << path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  auto close_in = [&] {
    if (in != stdin)
      std::fclose(in);
  };
  import_counts n;
  auto start = steady::now();
  auto last_report = start;
  try {
    event_loader loader{cfg};
    line_reader reader{in, cfg.node.max_frame_bytes};
    std::vector<line_reader::line> lines;
    line_reader::line l;
    bool more = true;
    while (more) {
      lines.clear();
      std::vector<std::string> raws;
      while (raws.size() < static_cast<size_t>(*batch) && (more = reader.next(l))) {
        ++n.lines;
        if (blank(l.text) && !l.oversize)
          continue;
        if (!l.oversize)
          raws.push_back(std::move(l.text));
        lines.push_back(std::move(l));
      }
      auto results = loader.load(std::move(raws));
      size_t r = 0;
      for (const auto& line : lines) {
        if (line.oversize) {
          ++n.refused;
          std::cerr << "line " << line.number << ": "
                    << oversize_refusal(cfg.node.max_frame_bytes).message() << "\n";
          continue;
        }
        const auto& res = results[r++];
        switch (res.status) {
          case load_status::stored: ++n.stored; break;
          case load_status::duplicate: ++n.duplicates; break;
          case load_status::refused:
            ++n.refused;
            std::cerr << "line " << line.number << ": " << res.reason << "\n";
            break;
          case load_status::failed:
            std::cerr << "line " << line.number << ": " << res.reason << "\n"
                      << "waggle import: stopped at line " << line.number
                      << ": the relay could not store it. Nothing after it is certain to be "
                         "loaded; running the same import again is safe (what was stored is "
                         "skipped as duplicate).\n";
            close_in();
            return 1;
        }
      }
      if (steady::now() - last_report >= std::chrono::seconds(1)) {
        last_report = steady::now();
        std::cerr << "import: " << n.lines << " lines, " << n.stored << " stored, "
                  << n.duplicates << " duplicates, " << n.refused << " refused, "
                  << rate(n.handled(), seconds_since(start)) << "\n";
      }
    }
    if (auto st = loader.settle(); !st.ok()) {
      std::cerr << "waggle import: " << st.reason << "\n";
      close_in();
      return 1;
    }
    auto took = seconds_since(start);
    std::printf("import: %s: %llu lines read, %llu stored, %llu duplicates, %llu refused in "
                "%.1f s (%s); group state derived and signed by relay %s\n",
                normalize_host(*host).c_str(), static_cast<unsigned long long>(n.lines),
                static_cast<unsigned long long>(n.stored),
                static_cast<unsigned long long>(n.duplicates),
                static_cast<unsigned long long>(n.refused), took,
                rate(n.handled(), took).c_str(), loader.relay_pubkey().c_str());
  } catch (const std::exception& e) {
    std::cerr << "waggle import: " << e.what() << "\n";
    close_in();
    return 1;
  }
  close_in();
  return n.refused ? 3 : 0;
}

}  // namespace waggle
