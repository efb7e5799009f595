#pragma once

// A strfry-style write-policy plugin in a few lines of Python, written by the
// tests to a scratch directory (docs/write-policy.md). It writes its pid to
// `pid` next to itself, then judges each event by its content:
//   "spam"    reject "no spam"           "shadow"  shadowReject
//   "source"  reject "<sourceType> <sourceInfo> <receivedAt> <type>"
//   "garbage" a malformed answer line and a stderr line (the event times out)
//   "hang"    sleeps for good             "die"     exits
//   anything else: accept

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <unistd.h>

namespace waggle::test {

inline const char* policy_plugin_source = R"PY(
import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "pid.tmp"), "w") as f:
    f.write(str(os.getpid()))
os.rename(os.path.join(here, "pid.tmp"), os.path.join(here, "pid"))
for line in sys.stdin:
    req = json.loads(line)
    ev = req["event"]
    c = ev["content"]
    out = {"id": ev["id"], "action": "accept"}
    if "spam" in c:
        out = {"id": ev["id"], "action": "reject", "msg": "no spam"}
    elif "shadow" in c:
        out["action"] = "shadowReject"
    elif "source" in c:
        out = {"id": ev["id"], "action": "reject", "msg": "%s %s %d %s" % (
            req["sourceType"], req["sourceInfo"], req["receivedAt"], req["type"])}
    elif "garbage" in c:
        print("this is not json", flush=True)
        print("plugin complains on stderr", file=sys.stderr, flush=True)
        continue
    elif "hang" in c:
        time.sleep(3600)
    elif "die" in c:
        sys.exit(3)
    print(json.dumps(out), flush=True)
)PY";

// A scratch directory holding the plugin (made executable).
struct policy_plugin_dir {
  std::filesystem::path dir;
  std::filesystem::path script;

  explicit policy_plugin_dir(const std::string& tag) {
    dir = std::filesystem::temp_directory_path()
          / ("waggle-policy-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    script = dir / "plugin.py";
    std::ofstream out{script};
    out << (std::filesystem::exists("/usr/bin/python3") ? "#!/usr/bin/python3\n"
                                                        : "#!/usr/bin/env python3\n")
        << policy_plugin_source;
    out.close();
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  }
  ~policy_plugin_dir() { std::filesystem::remove_all(dir); }

  // The pid the current plugin wrote, or 0; removes the file, so the next
  // call sees only a restarted plugin.
  int take_pid() const {
    std::ifstream in{dir / "pid"};
    int pid = 0;
    if (in >> pid)
      std::filesystem::remove(dir / "pid");
    return pid;
  }

  // Polls for the pid of a (re)started plugin until `bound`.
  int wait_pid(std::chrono::milliseconds bound = std::chrono::seconds(10)) const {
    auto deadline = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < deadline) {
      if (int pid = take_pid())
        return pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 0;
  }
};

}  // namespace waggle::test
