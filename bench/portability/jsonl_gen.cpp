// waggle-jsonl-gen: a file of signed events, one JSON object a line, for the
// `waggle import` / `waggle export` round trip (docs/benchmarks.md,
// "Export and import"). Deterministic for a seed: the same file every time.
//
//   waggle-jsonl-gen --events 1000000 --out events.jsonl [--authors 200] [--members 50] [--seed 1]
//
// What it writes, in created_at order (8 events a second from 2023-11-14):
// a channel `general` created by its owner, its members put one command
// each; then notes (kind 1, some with a far NIP-40 expiration), channel posts
// by members (kind 9, `h`), reactions (kind 7, `e`), replaceable profile and
// contact list updates (kinds 0, 3), addressable articles (30023, 7 `d`
// values an author), deletions of an author's earlier note (kind 5); last,
// one member removed and the channel's name edited. On stderr it says how
// many of them an export after the import holds (replaced versions and
// deleted notes are not live).

#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "messages/proto/event.hpp"

using waggle::proto::event;

namespace {

struct options {
  size_t events = 1'000'000;
  size_t authors = 200;
  size_t members = 50;
  uint64_t seed = 1;
  std::string out;
};

std::string secret_of(uint64_t seed, size_t n) {
  char buf[65];
  std::snprintf(buf, sizeof buf, "%048llx%016llx", static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(n + 1));
  return buf;
}

std::string text(std::mt19937_64& rng, size_t bytes) {
  static const char* words[] = {"the", "deploy", "is", "green", "again", "lunch", "review",
                                "merge", "ticket", "standup", "coffee", "release", "rollback",
                                "ok", "thanks", "see", "docs", "tomorrow"};
  std::string out;
  while (out.size() < bytes) {
    if (!out.empty())
      out += ' ';
    out += words[rng() % (sizeof words / sizeof *words)];
  }
  return out;
}

struct plan {
  std::vector<event> unsigned_events;
  std::vector<size_t> signer;  // author index per event (the owner is 0)
  size_t expected_live = 0;
};

plan make_plan(const options& o) {
  plan p;
  std::mt19937_64 rng{o.seed};
  const int64_t t0 = 1'700'000'000;
  auto add = [&](event ev, size_t author) {
    p.unsigned_events.push_back(std::move(ev));
    p.signer.push_back(author);
  };
  auto make = [](int32_t kind, int64_t at, std::vector<waggle::proto::tag> tags, std::string content) {
    event ev;
    ev.kind = kind;
    ev.created_at = at;
    ev.tags = std::move(tags);
    ev.content = std::move(content);
    return ev;
  };
  // Commands in seconds of their own, before every post they allow: an
  // export orders by created_at, then id.
  int64_t t = t0 - static_cast<int64_t>(o.members) - 10;
  add(make(9007, t++, {{"h", "general"}, {"name", "General"}}, ""), 0);
  for (size_t m = 1; m <= o.members; ++m)
    add(make(9000, t++, {{"h", "general"}, {"p", "@" + std::to_string(m), "member"}}, ""), 0);
  size_t replaced = 0;
  std::map<std::pair<size_t, std::string>, size_t> versions;  // coordinate -> versions
  std::vector<std::vector<size_t>> notes_of(o.authors);       // live note indexes per author
  std::set<size_t> deleted;
  for (size_t i = 0; p.unsigned_events.size() < o.events - 2; ++i) {
    int64_t at = t0 + static_cast<int64_t>(i / 8);
    size_t author = 1 + rng() % (o.authors - 1);
    auto bucket = i % 1000;
    if (bucket < 10) {
      int32_t kind = bucket < 5 ? 0 : 3;
      if (versions[{author, std::to_string(kind)}]++ > 0)
        ++replaced;
      add(make(kind, at, {}, "{\"name\":\"user " + std::to_string(author) + " v" + std::to_string(i) + "\"}"), author);
    } else if (bucket < 20) {
      auto d = "article-" + std::to_string(i % 7);
      if (versions[{author, "30023:" + d}]++ > 0)
        ++replaced;
      add(make(30023, at, {{"d", d}, {"title", "Notes " + std::to_string(i)}}, text(rng, 600)), author);
    } else if (bucket < 120) {
      size_t member = 1 + rng() % o.members;
      add(make(9, at, {{"h", "general"}}, text(rng, 120)), member);
    } else if (bucket < 130 && !notes_of[author].empty()) {
      auto target = notes_of[author].back();
      add(make(7, at, {{"e", "#" + std::to_string(target)}}, "+" + std::to_string(i)), author);
    } else if (bucket == 130 && !notes_of[author].empty()) {
      auto target = notes_of[author].back();
      notes_of[author].pop_back();
      deleted.insert(target);
      add(make(5, at, {{"e", "#" + std::to_string(target)}}, "mistake"), author);
    } else if (bucket < 141) {
      add(make(1, at, {{"expiration", std::to_string(t0 + 20L * 365 * 86400)}}, text(rng, 160)), author);
    } else {
      notes_of[author].push_back(p.unsigned_events.size());
      add(make(1, at, {}, text(rng, 160)), author);
    }
  }
  int64_t last = p.unsigned_events.back().created_at;
  add(make(9001, last + 10, {{"h", "general"}, {"p", "@" + std::to_string(o.members)}}, ""), 0);
  add(make(9002, last + 11, {{"h", "general"}, {"name", "General (archive)"}}, ""), 0);
  p.expected_live = p.unsigned_events.size() - replaced - deleted.size();
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--events") o.events = std::stoull(value);
    else if (flag == "--authors") o.authors = std::stoull(value);
    else if (flag == "--members") o.members = std::stoull(value);
    else if (flag == "--seed") o.seed = std::stoull(value);
    else if (flag == "--out") o.out = value;
    else {
      std::cerr << "waggle-jsonl-gen: unknown option " << flag << "\n";
      return 2;
    }
  }
  if (o.out.empty() || o.events < o.members + 10 || o.members + 1 >= o.authors) {
    std::cerr << "usage: waggle-jsonl-gen --events N --out FILE [--authors A] [--members M] "
                 "[--seed S] (N > M + 10, A > M + 1)\n";
    return 2;
  }
  auto p = make_plan(o);
  std::vector<std::string> secrets, pubkeys;
  for (size_t a = 0; a < o.authors; ++a) {
    secrets.push_back(secret_of(o.seed, a));
    pubkeys.push_back(waggle::proto::pubkey_of(secrets.back()));
  }
  // Placeholders become keys ("@n": member n's pubkey) and ids ("#i": event
  // i's id): an id is known only once its event is signed, and every target
  // comes before its reference, so events are signed in order, in chunks.
  auto& evs = p.unsigned_events;
  auto resolve = [&](event& ev) {
    for (auto& tag : ev.tags)
      if (tag.size() > 1 && !tag[1].empty() && (tag[1][0] == '@' || tag[1][0] == '#')) {
        auto n = std::stoull(tag[1].substr(1));
        tag[1] = tag[1][0] == '@' ? pubkeys[n] : evs[n].id;
      }
  };
  const size_t threads = std::max(1u, std::thread::hardware_concurrency());
  const size_t chunk = 4096;
  for (size_t begin = 0; begin < evs.size(); begin += chunk) {
    size_t end = std::min(evs.size(), begin + chunk);
    // A reference inside the chunk points at an earlier chunk: targets are
    // the author's older notes, at least a chunk back in practice; resolve
    // the rest one by one.
    std::vector<std::thread> pool;
    std::vector<bool> late(end - begin, false);
    for (size_t i = begin; i < end; ++i)
      for (auto& tag : evs[i].tags)
        if (tag.size() > 1 && !tag[1].empty() && tag[1][0] == '#'
            && std::stoull(tag[1].substr(1)) >= begin)
          late[i - begin] = true;
    for (size_t th = 0; th < threads; ++th)
      pool.emplace_back([&, th] {
        for (size_t i = begin + th; i < end; i += threads)
          if (!late[i - begin]) {
            resolve(evs[i]);
            waggle::proto::sign(evs[i], secrets[p.signer[i]]);
          }
      });
    for (auto& t : pool)
      t.join();
    for (size_t i = begin; i < end; ++i)
      if (late[i - begin]) {
        resolve(evs[i]);
        waggle::proto::sign(evs[i], secrets[p.signer[i]]);
      }
  }
  std::FILE* out = std::fopen(o.out.c_str(), "wb");
  if (!out) {
    std::cerr << "waggle-jsonl-gen: cannot write " << o.out << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  for (const auto& ev : evs) {
    std::fwrite(ev.raw.data(), 1, ev.raw.size(), out);
    std::fputc('\n', out);
  }
  if (std::fclose(out) != 0) {
    std::cerr << "waggle-jsonl-gen: cannot write " << o.out << "\n";
    return 1;
  }
  std::cerr << "waggle-jsonl-gen: " << evs.size() << " events in " << o.out << "; "
            << p.expected_live << " live after an import (an export's lines)\n";
  return 0;
}
