# shellcheck shell=bash
# shellcheck disable=SC2154  # bin, load, admin, logs, out, runs_dir, ...: set by scripts/bench
# The `cluster` scenario of ./scripts/bench (issue 32; docs/benchmarks.md, "A cluster of relay
# nodes"), and the NATS server the `bus` and `cluster` scenarios share. Sourced by scripts/bench.
#
# Real `waggle serve --bus B --node-id cb-I` processes on consecutive ports (CLUSTER_PORT, default
# a free one, then +1, +2) over one database of the bench PostgreSQL (bench_cluster, fresh and
# migrated for every start), nats-server on loopback for --bus nats. Each start: a 3 s warm-up
# publish run, then VACUUM (ANALYZE) and a checkpoint (quiesce), then the measured run.
# - latency: 2 nodes; waggle-load publishes to node 0 at CLUSTER_RATES events/s (10
#   connections) and one subscriber on node 1 times each event from its send to its arrival
#   (one process, one clock). Per run, the drivers one after the other.
# - ingest: 1, 2, 3 nodes; 48 closed-loop connections (1 in flight each) spread over the nodes
#   in turn; accepted events/s (OK received), net commits per event, and the cores each node,
#   PostgreSQL (postmaster and backends), nats-server and the tool used over the window. Per run
#   the node counts in a rotated order; the ratios to 1 node are taken run by run.
# RUNS runs, medians. CLUSTER_BUSES (default postgres caf nats), CLUSTER_INGEST_BUSES (default:
# the same), CLUSTER_RATES (default 100,1000), CLUSTER_CONNECTIONS (default 48), CLUSTER_PARTS
# (default "latency ingest"; a part not named keeps its runs of before in the report).

nats_pid='' nats_url=''

# nats_up: a nats-server on loopback (CLUSTER_NATS_PORT or a free port), once; sets nats_url.
nats_up() {
  if [ -n "$nats_pid" ] && kill -0 "$nats_pid" 2>/dev/null; then return 0; fi
  wg_nats_start "$logs" "${CLUSTER_NATS_PORT:-$(wg_free_port)}"
  nats_pid=$WG_NATS_PID nats_url=$WG_NATS_URL
}

nats_down() {
  [ -n "$nats_pid" ] || return 0
  kill -TERM "$nats_pid" 2>/dev/null || true
  wait "$nats_pid" 2>/dev/null || true
  nats_pid=
}

cluster_pids=() cluster_ports=() cluster_base=

# cluster_base_port: CLUSTER_PORT, or a free port with the two after it free too.
cluster_base_port() {
  local p _
  if [ -n "${CLUSTER_PORT:-}" ]; then echo "$CLUSTER_PORT"; return 0; fi
  for _ in $(seq 1 50); do
    p=$(wg_free_port) || return 1
    wg_port_busy $((p + 1)) || wg_port_busy $((p + 2)) || { echo "$p"; return 0; }
  done
  return 1
}

# cluster_metric PORT NAME: a metric's value on a node's /metrics, labels or not ("" when missing).
cluster_metric() {
  curl -s "http://127.0.0.1:$1/metrics" |
    awk -v m="$2" '{n = $1; sub(/\{.*/, "", n)} n == m {print $2; exit}'
}

# cluster_up BUS N: N nodes on consecutive ports over a fresh bench_cluster; waits until each is
# ready and its cluster tail counts N live nodes (and, caf, it has N-1 peers).
cluster_up() {
  local bus=$1 n=$2 i p args deadline v
  wg_db_drop "$admin" bench_cluster >/dev/null
  wg_db_ensure "$admin" bench_cluster
  db_url=$(wg_pg_url bench_cluster)
  wg_relay_prepare_db "$bin" "$db_url" 127.0.0.1 >/dev/null || wg_die "bench_cluster: migrate failed"
  [ -n "$cluster_base" ] || cluster_base=$(cluster_base_port) || wg_die "no free ports for the nodes"
  cluster_pids=() cluster_ports=()
  for i in $(seq 0 $((n - 1))); do
    p=$((cluster_base + i))
    wg_port_busy "$p" && wg_die "port $p (cluster node $i) is in use"
    args=(--bus "$bus" --node-id "cb-$i")
    [ "$bus" = nats ] && args+=(--nats-url "$nats_url")
    # Every load client comes from 127.0.0.1: no per-address cap or bucket here.
    "$bin" serve --port "$p" --bind 127.0.0.1 --database-url "$db_url" --log-level warn \
      --max-connections-per-ip 0 --new-connections-per-second 0 "${args[@]}" \
      >>"$logs/cluster-$bus-$n-node$i.log" 2>&1 &
    cluster_pids+=("$!")
    cluster_ports+=("$p")
  done
  for i in $(seq 0 $((n - 1))); do
    wg_wait_ready "${cluster_ports[$i]}" 60 "${cluster_pids[$i]}" ||
      wg_die "cluster node $i ($bus) did not start (log: $logs/cluster-$bus-$n-node$i.log)"
  done
  deadline=$((SECONDS + 30))
  for i in $(seq 0 $((n - 1))); do
    until v=$(cluster_metric "${cluster_ports[$i]}" waggle_cluster_nodes) &&
      awk -v v="${v:-0}" -v n="$n" 'BEGIN {exit !(v >= n)}' &&
      { [ "$bus" != caf ] || awk -v v="$(cluster_metric "${cluster_ports[$i]}" waggle_bus_peers)" \
        -v n="$n" 'BEGIN {exit !(v + 0 >= n - 1)}'; }; do
      [ "$SECONDS" -lt "$deadline" ] ||
        wg_die "cluster node $i ($bus, $n nodes) sees ${v:-no} live nodes after 30 s"
      sleep 0.2
    done
  done
}

cluster_down() {
  local p
  for p in "${cluster_pids[@]}"; do wg_relay_stop "$p"; done
  cluster_pids=() cluster_ports=()
}

# cluster_urls FIRST COUNT: "ws://127.0.0.1:P,..." for COUNT nodes from node FIRST.
cluster_urls() {
  local i out=
  for i in $(seq "$1" $(($1 + $2 - 1))); do out+="${out:+,}ws://127.0.0.1:${cluster_ports[$i]}"; done
  echo "$out"
}

# cluster_watch BUS: --cpu-watch's value: each node, PostgreSQL, and nats-server for nats.
cluster_watch() {
  local i out='' pm
  for i in "${!cluster_pids[@]}"; do out+="${out:+,}node$i=${cluster_pids[$i]}"; done
  pm=$(head -1 "$WG_PGDATA/postmaster.pid")
  out+=",postgres=$pm+"
  [ "$1" = nats ] && out+=",nats=$nats_pid"
  echo "$out"
}

# cluster_commits: "transactions-committed write-transactions" so far: bench_cluster's
# xact_commit (read-only transactions included) and the server's next xid (one per transaction
# that wrote; only this scenario writes to this PostgreSQL while it runs).
cluster_commits() {
  "$WAGGLE_PG_BIN/psql" -X -qAt -F ' ' "$admin" -c \
    "SELECT xact_commit, pg_snapshot_xmax(pg_current_snapshot())::text::bigint FROM pg_stat_database WHERE datname = 'bench_cluster'"
}

# cluster_run NAME LOAD-ARGS...: warm-up, quiesce, then the measured run into $runs_dir/NAME.json
# (exit 1, something missed or refused, is kept as a finding; anything else stops the scenario).
# Also NAME.commits: per accepted event over the run, bench_cluster's committed transactions
# (pg_stat_database.xact_commit, the read-only ones too), then the write transactions (xids).
cluster_run() {
  local name=$1 rc=0 c0 c1 accepted
  shift
  "$load" run --url "$(cluster_urls 0 ${#cluster_ports[@]})" --label warm-up --no-progress \
    --workload publish --connections 10 --in-flight 1 --duration 3 \
    --json "$logs/$name-warm.json" >"$logs/$name-warm.md" 2>&1 ||
    wg_die "$name: warm-up failed (see $logs/$name-warm.md)"
  quiesce "$db_url"
  uptime >"$runs_dir/$name.load"
  sleep 1  # pg_stat_database is flushed up to a second late
  c0=$(cluster_commits)
  "$load" run --label "$name" --no-progress --json "$runs_dir/$name.json" "$@" \
    >"$logs/$name.md" 2>&1 || rc=$?
  [ "$rc" = 0 ] || { [ "$rc" = 1 ] && [ -f "$runs_dir/$name.json" ]; } ||
    wg_die "$name failed (exit $rc): see $logs/$name.md"
  [ "$rc" = 0 ] || wg_log "$name: not clean (see $logs/$name.md); kept as a finding"
  sleep 1.2
  c1=$(cluster_commits)
  accepted=$("$load" summarize "$runs_dir/$name.json" --get accepted)
  read -r -a c0 <<<"$c0"
  read -r -a c1 <<<"$c1"
  awk -v a="$accepted" -v d="$((c1[0] - c0[0]))" -v x="$((c1[1] - c0[1]))" \
    'BEGIN {printf "%.4f %.4f\n", (a > 0 ? d / a : 0), (a > 0 ? x / a : 0)}' >"$runs_dir/$name.commits"
}

run_cluster() {
  local i d n r order rates args parts cbuses_run=()
  : "${CLUSTER_RATES:=100,1000}" "${CLUSTER_CONNECTIONS:=48}"
  read -r -a cbuses <<<"${CLUSTER_BUSES:-postgres caf nats}"
  read -r -a ibuses <<<"${CLUSTER_INGEST_BUSES:-${cbuses[*]}}"
  rates=${CLUSTER_RATES//,/ }
  parts=" ${CLUSTER_PARTS:-latency ingest} "
  [[ $parts == *" latency "* ]] || cbuses_run=()
  [[ $parts == *" latency "* ]] && cbuses_run=("${cbuses[@]}") && rm -f "$runs_dir"/cluster-lat-*
  [[ $parts == *" ingest "* ]] && rm -f "$runs_dir"/cluster-ingest-*
  for d in "${cbuses[@]}" "${ibuses[@]}"; do [ "$d" = nats ] && nats_up; done
  for i in $(seq 1 "$RUNS"); do
    for d in "${cbuses_run[@]}"; do
      wg_log "cluster: latency, $d, run $i of $RUNS ($(cut -d' ' -f1-3 /proc/loadavg))"
      cluster_up "$d" 2
      for r in $rates; do
        cluster_run "cluster-lat-$d-$r-$i" --url "$(cluster_urls 0 1)" \
          --subscriber-url "$(cluster_urls 1 1)" --workload publish --connections 10 --rate "$r" \
          --subscribers 1 --duration "$DURATION" --cpu-watch "$(cluster_watch "$d")"
      done
      cluster_down
    done
    # The node counts in a rotated order each run, so a drift of the machine's load does not
    # always fall on the same count.
    case $((i % 3)) in 1) order="1 2 3" ;; 2) order="2 3 1" ;; 0) order="3 1 2" ;; esac
    [[ $parts == *" ingest "* ]] || continue
    for d in "${ibuses[@]}"; do
      for n in $order; do
        wg_log "cluster: ingest, $d, $n node(s), run $i of $RUNS ($(cut -d' ' -f1-3 /proc/loadavg))"
        cluster_up "$d" "$n"
        args=(--url "$(cluster_urls 0 "$n")" --workload publish --connections "$CLUSTER_CONNECTIONS"
          --in-flight 1 --duration "$DURATION" --cpu-watch "$(cluster_watch "$d")")
        cluster_run "cluster-ingest-$d-$n-$i" "${args[@]}"
        cluster_down
      done
    done
  done
  [[ $parts == *" latency "* ]] && commands+=("cluster-lat-BUS-RATE: waggle serve --bus BUS --node-id cb-0|cb-1 on ports P, P+1 over bench_cluster (fresh; nats: nats-server on loopback); waggle-load run --url ws://127.0.0.1:P --subscriber-url ws://127.0.0.1:P+1 --workload publish --connections 10 --rate RATE --subscribers 1 --duration $DURATION, RATE = $CLUSTER_RATES, BUS = ${cbuses[*]} (x$RUNS, the drivers one after the other in each run; medians)")
  [[ $parts == *" ingest "* ]] && commands+=("cluster-ingest-BUS-N: N = 1, 2, 3 nodes (ports P..P+N-1, bench_cluster fresh each); waggle-load run --url <the N nodes> --workload publish --connections $CLUSTER_CONNECTIONS --in-flight 1 --duration $DURATION, BUS = ${ibuses[*]} (x$RUNS, node counts rotated per run; ratios to 1 node run by run)")
  cluster_report
}

# cl_get NAME PATH [DIGITS]: the median over the runs of NAME-<i>.json.
cl_get() {
  printf '%.*f' "${3:-2}" "$("$load" summarize "$runs_dir/$1"-[0-9]*.json --get "$2" 2>/dev/null || echo 0)"
}

# cl_runs NAME PATH [DIGITS]: the value in each run, "a / b / c".
cl_runs() {
  local i out=
  for i in $(seq 1 "$RUNS"); do
    out+="${out:+ / }$(printf '%.*f' "${3:-2}" "$("$load" summarize "$runs_dir/$1-$i.json" --get "$2" 2>/dev/null || echo 0)")"
  done
  echo "$out"
}

# cl_commits NAME: "transactions / write transactions" per accepted event, medians of the runs.
cl_commits() {
  printf '%.3f / %.3f' "$(cut -d' ' -f1 "$runs_dir/$1"-[0-9]*.commits | median_line)" \
    "$(cut -d' ' -f2 "$runs_dir/$1"-[0-9]*.commits | median_line)"
}

# cl_nodes_cores NAME N: median over the runs of the summed cores of the N nodes.
cl_nodes_cores() {
  local i k
  for i in $(seq 1 "$RUNS"); do
    for k in $(seq 0 $(($2 - 1))); do
      "$load" summarize "$runs_dir/$1-$i.json" --get "cpu/node$k"
    done | awk '{s += $1} END {printf "%.4f\n", s}'
  done | median_line | xargs printf '%.2f'
}

cluster_report() {
  local d r n name ratio per
  read -r -a cbuses <<<"${CLUSTER_BUSES:-postgres caf nats}"
  read -r -a ibuses <<<"${CLUSTER_INGEST_BUSES:-${cbuses[*]}}"
  {
    echo "Load average (1, 5, 15 min) before each run (the machine is shared):" \
      "$(for f in "$runs_dir"/cluster-*.load; do printf '%s %s; ' "$(basename "$f" .load)" "$(sed 's/.*load average: //' "$f")"; done)"
    echo
    echo "**Cross-node publish-to-receive** (2 nodes: waggle-load publishes to node 0 over 10 connections, one subscriber on node 1; send to receipt: from the EVENT's send to its arrival on node 1; after the OK: from node 0's OK reaching the publisher to the arrival on node 1, the doorbell and node 1's read without the commit; one process, one clock; medians of $RUNS runs of $DURATION s; ms):"
    echo
    echo "| driver | events/s offered | accepted/s | send to receipt p50 / p90 / p99 / max | p99 per run | after the OK p50 / p99 | ack (send to OK) p50 / p99 | delivered / expected (missed) | cores: node 0 / node 1 / PostgreSQL / nats-server / tool | machine busy |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for d in "${cbuses[@]}"; do
      for r in ${CLUSTER_RATES//,/ }; do
        name=cluster-lat-$d-$r
        printf '| %s | %s | %s | %s / %s / %s / %s | %s | %s / %s | %s / %s | %s / %s (%s) | %s / %s / %s / %s / %s | %s %% |\n' \
          "$d" "$r" "$(cl_get "$name" per_s 0)" \
          "$(cl_get "$name" fanout/latency_ms/p50)" "$(cl_get "$name" fanout/latency_ms/p90)" \
          "$(cl_get "$name" fanout/latency_ms/p99)" "$(cl_get "$name" fanout/latency_ms/max)" \
          "$(cl_runs "$name" fanout/latency_ms/p99)" \
          "$(cl_get "$name" fanout/after_ok_ms/p50)" "$(cl_get "$name" fanout/after_ok_ms/p99)" \
          "$(cl_get "$name" latency_ms/p50)" "$(cl_get "$name" latency_ms/p99)" \
          "$(cl_get "$name" fanout/delivered 0)" "$(cl_get "$name" fanout/expected 0)" "$(cl_get "$name" fanout/missed 0)" \
          "$(cl_get "$name" cpu/node0)" "$(cl_get "$name" cpu/node1)" "$(cl_get "$name" cpu/postgres)" \
          "$([ "$d" = nats ] && cl_get "$name" cpu/nats || echo -)" "$(cl_get "$name" cpu/tool)" \
          "$(awk -v v="$(cl_get "$name" cpu/machine_busy 3)" 'BEGIN {printf "%.0f", 100 * v}')"
      done
    done
    echo
    echo "**Ingest of the cluster** ($CLUSTER_CONNECTIONS connections, 1 event in flight each, spread over the nodes in turn; one database; medians of $RUNS runs of $DURATION s; the ratio to 1 node is taken run by run, the node counts rotated per run; per accepted event over the run: transactions, bench_cluster's pg_stat_database.xact_commit, read-only ones included (the tails' reads, the registry), and write transactions, xids handed out):"
    echo
    echo "| driver | nodes | accepted events/s | per run | over 1 node (per run) | ack p50 / p99 (ms) | transactions / write transactions per event | cores: nodes (sum) / PostgreSQL / nats-server / tool | machine busy |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for d in "${ibuses[@]}"; do
      for n in 1 2 3; do
        name=cluster-ingest-$d-$n
        ratio=- per=
        if [ "$n" != 1 ]; then
          per=$(for i in $(seq 1 "$RUNS"); do
            printf '%s %s\n' "$("$load" summarize "$runs_dir/$name-$i.json" --get per_s)" \
              "$("$load" summarize "$runs_dir/cluster-ingest-$d-1-$i.json" --get per_s)"
          done | awk '{printf "%.3f\n", ($2 > 0 ? $1 / $2 : 0)}')
          ratio="$(median_line <<<"$per") ($(paste -sd/ <<<"$per" | sed 's#/# / #g'))"
        fi
        printf '| %s | %s | %s | %s | %s | %s / %s | %s | %s / %s / %s / %s | %s %% |\n' \
          "$d" "$n" "$(cl_get "$name" per_s 0)" "$(cl_runs "$name" per_s 0)" "$ratio" \
          "$(cl_get "$name" latency_ms/p50)" "$(cl_get "$name" latency_ms/p99)" "$(cl_commits "$name")" \
          "$(cl_nodes_cores "$name" "$n")" "$(cl_get "$name" cpu/postgres)" \
          "$([ "$d" = nats ] && cl_get "$name" cpu/nats || echo -)" "$(cl_get "$name" cpu/tool)" \
          "$(awk -v v="$(cl_get "$name" cpu/machine_busy 3)" 'BEGIN {printf "%.0f", 100 * v}')"
      done
    done
  } >"$out/cluster.md"
  # The tables in docs/benchmarks.md, between its cluster markers.
  local doc=$WAGGLE_ROOT/docs/benchmarks.md
  if grep -q '^<!-- cluster-results:begin -->$' "$doc" && grep -q '^<!-- cluster-results:end -->$' "$doc"; then
    awk -v f="$out/cluster.md" '
      /^<!-- cluster-results:end -->$/ {skip = 0}
      !skip {print}
      /^<!-- cluster-results:begin -->$/ {while ((getline l < f) > 0) print l; skip = 1}' "$doc" >"$doc.new" &&
      mv "$doc.new" "$doc"
  fi
  cat "$out/cluster.md"
}
