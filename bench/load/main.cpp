// waggle-load: the load tool (docs/benchmarks.md). See usage().

#include <csignal>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bench/load/events.hpp"
#include "bench/load/listeners.hpp"
#include "bench/load/options.hpp"
#include "bench/load/report.hpp"
#include "bench/load/run.hpp"
#include "bench/load/seed.hpp"

using namespace waggle::bench;

namespace {

int run_summarize(const summarize_options& o) {
  std::vector<std::string> texts;
  for (auto& path : o.inputs) {
    std::ifstream in(path);
    if (!in) {
      std::cerr << "waggle-load summarize: cannot read " << path << "\n";
      return 2;
    }
    std::stringstream buf;
    buf << in.rdbuf();
    texts.push_back(buf.str());
  }
  auto s = summarize_runs(texts, o.label);
  if (!s.error.empty()) {
    std::cerr << "waggle-load summarize: " << s.error << "\n";
    return 2;
  }
  if (!o.get.empty()) {
    for (auto& path : o.get) {
      auto m = s.medians.find(path);
      if (m == s.medians.end()) {
        std::cerr << "waggle-load summarize: no numeric result " << path << "\n";
        return 2;
      }
      std::cout << m->second << "\n";
    }
  } else {
    std::cout << s.markdown;
  }
  if (!o.json_path.empty())
    std::ofstream(o.json_path) << s.json;
  if (!o.markdown_path.empty())
    std::ofstream(o.markdown_path) << s.markdown;
  return 0;
}

template <class Options, class Parse, class Run>
int dispatch(std::vector<std::string> args, Parse parse, Run run) {
  auto parsed = parse(std::move(args));
  if (auto* err = std::get_if<std::string>(&parsed)) {
    std::cerr << "waggle-load: " << *err << "\n\n" << usage();
    return 2;
  }
  return run(std::get<Options>(parsed));
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << usage();
    return args.empty() ? 2 : 0;
  }
  auto verb = args[0];
  args.erase(args.begin());
  try {
    if (verb == "run")
      return dispatch<load_options>(args, parse_load_options, run_load);
    if (verb == "seed")
      return dispatch<seed_options>(args, parse_seed_options, run_seed);
    if (verb == "seed-word") {
      if (args.empty()) {
        std::cerr << usage();
        return 2;
      }
      for (auto& a : args) {
        size_t used = 0;
        auto rank = std::stoul(a, &used);
        if (used != a.size() || rank == 0 || rank > topic_words) {
          std::cerr << "waggle-load seed-word: rank " << a << " is not in 1.." << topic_words << "\n";
          return 2;
        }
        std::cout << topic_word(rank) << "\n";
      }
      return 0;
    }
    if (verb == "listener-config")
      return dispatch<listener_config_options>(
        args, parse_listener_config_options, [](const listener_config_options& o) {
          std::cout << listener_config(o.ports) << "\n";
          return 0;
        });
    if (verb == "summarize")
      return dispatch<summarize_options>(args, parse_summarize_options, run_summarize);
  } catch (const std::exception& e) {
    std::cerr << "waggle-load " << verb << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << usage();
  return 2;
}
