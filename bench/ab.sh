#!/usr/bin/env bash
# Side-by-side runs of two relay builds on this machine, alternating run by run, so a busy or a
# quiet spell of a shared machine falls on both (the fanout and ack figures of issue 33 in
# docs/benchmarks.md). Each run gets a fresh database and a fresh relay of the build, started as
# ./scripts/bench starts its relays (one open community, no per-address caps).
#
#   bench/ab.sh OLD_BUILD_DIR NEW_BUILD_DIR MODE [RUNS]
#     MODE fanout:N   N subscribers on one channel, 100 events/s, 10 s (waggle-load)
#          sweep      waggle-load's fanout sweep 10,100,500,1000,2000 at 100 events/s
#          ack        1 and 50 events in flight on one socket, by waggle-load (10 s each) and by
#                     the Node.js client bench/node/ws_bench.mjs (10 s and 5 s)
#          listeners  OK-to-listener latency of 30 spaced mentions to one operator listener
#                     (waggle-load's listener-latency workload; MENTIONS overrides the 30)
#   PERF=1 records the relay with `perf record -e cpu-clock -g` for 8 s of each fanout run.
# The instrument is OLD_BUILD_DIR's waggle-load for both sides, or with INSTRUMENT=each each
# side's own (to compare two builds of the tool on one relay: two build dirs that hold the same
# waggle and different waggle-load). Runs default to 3; the summary
# lines go to stdout, the tool's reports to $WAGGLE_DATA_DIR/ab/ (default /tmp/waggle-ab).
# Uses the private PostgreSQL of ./scripts/pg "run" (WAGGLE_PG_PORT, default 15433).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

[ $# -ge 3 ] || wg_die "usage: $0 OLD_BUILD_DIR NEW_BUILD_DIR fanout:N|sweep|ack|listeners [RUNS]"
old=$(cd "$1" && pwd); new=$(cd "$2" && pwd); mode=$3; runs=${4:-3}
out=${WAGGLE_AB_DIR:-/tmp/waggle-ab}
mkdir -p "$out"
load=$old/waggle-load
case ${INSTRUMENT:-old} in old | each) ;; *) wg_die "INSTRUMENT is old or each" ;; esac
wg_data_dir_init
wg_pg_select run
wg_pg_start
admin=$(wg_pg_url postgres)
relay_pid=
cleanup() { if [ -n "$relay_pid" ]; then wg_relay_stop "$relay_pid"; fi; }
trap cleanup EXIT

# relay_up BUILD [ARGS...]: a relay of BUILD on a free port over a fresh database, with ARGS;
# sets port, relay_pid.
relay_up() {
  local bin=$1/waggle db=ab_$$ url
  shift
  wg_db_drop "$admin" "$db" >/dev/null
  wg_db_ensure "$admin" "$db"
  url=$(wg_pg_url "$db")
  wg_relay_prepare_db "$bin" "$url" 127.0.0.1 >/dev/null
  port=$(wg_free_port)
  "$bin" serve --port "$port" --bind 127.0.0.1 --database-url "$url" --log-level warn \
    --max-connections-per-ip 0 --new-connections-per-second 0 "$@" >>"$out/relay.log" 2>&1 &
  relay_pid=$!
  wg_wait_ready "$port" 60 "$relay_pid" || wg_die "relay did not start (log: $out/relay.log)"
}
relay_down() { wg_relay_stop "$relay_pid"; relay_pid=; }

field() { grep -F "$2" "$1" | head -1 | cut -d'|' -f3 | xargs; }

one_run() {
  local side=$1 build=$2 i=$3 tag pg_pid
  tag=$side-$i
  if [ "${INSTRUMENT:-old}" = each ]; then load=$build/waggle-load; fi
  if [ "$mode" = listeners ]; then
    relay_up "$build" --operator-listeners "$("$load" listener-config --listener-ports "$listener_port")"
  else
    relay_up "$build"
  fi
  pg_pid=$(head -1 "$WG_PGDATA/postmaster.pid")
  case $mode in
    fanout:*)
      local perf_pid=
      if [ "${PERF:-0}" = 1 ]; then
        (sleep 1; perf record -q -e cpu-clock -F 999 -g -p "$relay_pid" -o "$out/$tag.perf" -- sleep 8) &
        perf_pid=$!
      fi
      "$load" run --url "ws://127.0.0.1:$port" --workload fanout --subscribers "${mode#fanout:}" \
        --rate 100 --duration 10 --cpu-watch "relay=$relay_pid,postgres=$pg_pid+" \
        --json "$out/$tag.json" --markdown "$out/$tag.md" >"$out/$tag.out" 2>&1 || true
      if [ -n "$perf_pid" ]; then wait "$perf_pid"; fi
      echo "$tag: delivery p50/p99/max $(field "$out/$tag.md" 'fanout delivery p50') ms;" \
        "ack $(field "$out/$tag.md" 'ack latency') ms; $(field "$out/$tag.md" 'missed')"
      ;;
    sweep)
      "$load" run --url "ws://127.0.0.1:$port" --workload fanout --sweep 10,100,500,1000,2000 \
        --rate 100 --step-seconds 10 --json "$out/$tag.json" --markdown "$out/$tag.md" \
        >"$out/$tag.out" 2>&1 || true
      echo "$tag:"; grep '^| [0-9]' "$out/$tag.md"
      ;;
    ack)
      local k node_args
      for k in 1 50; do
        "$load" run --url "ws://127.0.0.1:$port" --workload publish --connections 1 --in-flight "$k" \
          --duration 10 --json "$out/$tag-wl-$k.json" --markdown "$out/$tag-wl-$k.md" \
          >"$out/$tag-wl-$k.out" 2>&1 || true
        echo "$tag waggle-load in-flight $k: $(field "$out/$tag-wl-$k.md" 'accepted events/s')/s," \
          "ack p50/p90/p99/max $(field "$out/$tag-wl-$k.md" 'ack latency') ms"
        # Node signs in JavaScript, about 1,000 events a second a core: enough for the run and
        # no more (1 in flight takes under 1,000/s; 50 in flight runs 5 s).
        if [ "$k" = 1 ]; then node_args=(--duration 10 --events 12000); else node_args=(--duration 5 --events 30000); fi
        node "$WAGGLE_ROOT/bench/node/ws_bench.mjs" ack --url "ws://127.0.0.1:$port" --in-flight "$k" \
          "${node_args[@]}" >"$out/$tag-node-$k.json" 2>"$out/$tag-node-$k.err" || true
        echo "$tag node ws in-flight $k: $(cat "$out/$tag-node-$k.json")"
      done
      ;;
    listeners)
      "$load" run --url "ws://127.0.0.1:$port" --workload listener-latency \
        --listener-ports "$listener_port" --mentions "${MENTIONS:-30}" --json "$out/$tag.json" \
        --markdown "$out/$tag.md" --no-progress >"$out/$tag.out" 2>&1 || true
      echo "$tag: OK to listener p50/p90/p99/max $(field "$out/$tag.md" 'OK to listener receipt') ms;" \
        "delivered, missed, repeated $(field "$out/$tag.md" 'listener deliveries') of $(field "$out/$tag.md" 'events sent') sent"
      ;;
    *) wg_die "unknown mode $mode" ;;
  esac
  relay_down
}

listener_port=$(wg_free_port)
[ -d "$WAGGLE_ROOT/bench/node/node_modules" ] ||
  (cd "$WAGGLE_ROOT/bench/node" && npm ci --no-audit --no-fund --loglevel=error)
echo "# $(date -u +%FT%TZ) $mode, $runs runs; old $old, new $new; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$runs"); do
  one_run old "$old" "$i"
  one_run new "$new" "$i"
done
