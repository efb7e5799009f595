#!/usr/bin/env bash
# The export/import round trip of docs/benchmarks.md ("Export and import: a million events"):
# a generated file of signed events imported into an empty community on a fresh database (A),
# exported, that export imported into a second fresh database (B) under another relay key,
# exported again, and the two exports compared. Prints each step's wall time, events/s and
# peak RSS (GNU time), and the load around each step.
#
#   bench/portability/roundtrip.sh ADMIN_URL [EVENTS] [WORKDIR]
#
# ADMIN_URL names a server where the user may CREATE DATABASE; the databases are
# port_bench_a and port_bench_b (dropped at the end). The binaries are those of
# $WAGGLE_BUILD_DIR (default build/release).
set -euo pipefail
admin=${1:?usage: roundtrip.sh ADMIN_URL [EVENTS] [WORKDIR]}
events=${2:-1000000}
work=${3:-/tmp/port-bench}
root=$(cd "$(dirname "$0")/../.." && pwd -P)
bin=${WAGGLE_BUILD_DIR:-$root/build/release}
mkdir -p "$work"
url_of() { printf '%s\n' "${admin%/*}/$1"; }
A=$(url_of port_bench_a)
B=$(url_of port_bench_b)

step() {  # step NAME COMMAND...: runs it under GNU time; its exit code is reported, not fatal
  local name=$1 rc=0
  shift
  echo "== $name (load before: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  /usr/bin/time -f "$name: wall %e s, peak RSS %M KiB, CPU %P" "$@" || rc=$?
  echo "$name: exit $rc" >&2
}

if [ ! -s "$work/events.jsonl" ]; then
  step generate "$bin/waggle-jsonl-gen" --events "$events" --out "$work/events.jsonl"
fi
for db in port_bench_a port_bench_b; do
  psql "$admin" -qXc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
done
"$bin/waggle" migrate --database-url "$A" >/dev/null
"$bin/waggle" migrate --database-url "$B" >/dev/null
"$bin/waggle" community add bench-a.test --policy open --database-url "$A"
"$bin/waggle" community add bench-b.test --policy open --database-url "$B"
rm -f "$work/a.key" "$work/b.key"

step import-a "$bin/waggle" import "$work/events.jsonl" --community bench-a.test \
  --database-url "$A" --relay-key-file "$work/a.key" 2>"$work/import-a.err"
grep -v '^import: [0-9]' "$work/import-a.err" | head -5
step export-a "$bin/waggle" export --database-url "$A" >"$work/export-a.jsonl" 2>"$work/export-a.err"
grep -v '^export: [0-9]' "$work/export-a.err"
step import-b "$bin/waggle" import "$work/export-a.jsonl" --community bench-b.test \
  --database-url "$B" --relay-key-file "$work/b.key" 2>"$work/import-b.err"
grep -v '^import: [0-9]' "$work/import-b.err" | head -5
step export-b "$bin/waggle" export --database-url "$B" >"$work/export-b.jsonl" 2>"$work/export-b.err"
grep -v '^export: [0-9]' "$work/export-b.err"

wc -l "$work/events.jsonl" "$work/export-a.jsonl" "$work/export-b.jsonl"
if diff -q "$work/export-a.jsonl" "$work/export-b.jsonl" >/dev/null; then
  echo "diff: the two exports are identical ($(sha256sum <"$work/export-a.jsonl" | cut -c1-16))"
else
  echo "diff: the exports DIFFER"; diff "$work/export-a.jsonl" "$work/export-b.jsonl" | head -5
fi
psql "$A" -AtXc "SELECT 'A: ' || count(*) || ' rows, ' || pg_size_pretty(pg_database_size(current_database())) FROM events"
psql "$B" -AtXc "SELECT 'B: ' || count(*) || ' rows, ' || pg_size_pretty(pg_database_size(current_database())) FROM events"
for db in port_bench_a port_bench_b; do
  psql "$admin" -qXc "DROP DATABASE IF EXISTS $db WITH (FORCE)"
done
