# shellcheck shell=bash
# Shared logic of ./scripts/run, ./scripts/test, ./scripts/pg and tests/faults/fault_check.
# Source it; it defines functions and defaults and runs nothing by itself.
#
# Environment (all optional):
#   WAGGLE_DATA_DIR      where local state lives (default: <checkout>/.waggle)
#   WAGGLE_PORT          relay port of ./scripts/run (default 7777)
#   WAGGLE_PG_PORT       port of the private PostgreSQL of ./scripts/run (default 15433)
#   WAGGLE_TEST_PG_PORT  port of the private PostgreSQL of ./scripts/test (default 15434)
#   WAGGLE_TEST_STANDBY_PORT  port of its streaming standby (default WAGGLE_TEST_PG_PORT + 10)
#   WAGGLE_DISK_PG_PORT  port of the throwaway PostgreSQL of the disk-full fault, on its own
#                        small filesystem (default WAGGLE_TEST_PG_PORT + 2)
#   WAGGLE_STANDBY_PORT  port of the standby of the run cluster, WAGGLE_REPLICAS=1 (default
#                        WAGGLE_PG_PORT + 10)
#   WAGGLE_DATABASE_URL  ./scripts/run uses this database and starts no PostgreSQL
#   WAGGLE_BUILD_DIR     build tree (default: <checkout>/build/release)
#   WAGGLE_BUILD_JOBS    parallel compile jobs (default 2)
#   WAGGLE_SKIP_BUILD=1  use the build tree as it is (built by hand, or a stand-in)
#   WAGGLE_SANITIZE      address|thread: wg_build configures a sanitizer build (./scripts/test
#                        --sanitize sets it, with WAGGLE_BUILD_DIR=build/<name>)

WAGGLE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
: "${WAGGLE_DATA_DIR:=$WAGGLE_ROOT/.waggle}"
: "${WAGGLE_PORT:=7777}"
: "${WAGGLE_PG_PORT:=15433}"
: "${WAGGLE_TEST_PG_PORT:=15434}"
: "${WAGGLE_TEST_STANDBY_PORT:=$((WAGGLE_TEST_PG_PORT + 10))}"
: "${WAGGLE_STANDBY_PORT:=$((WAGGLE_PG_PORT + 10))}"
: "${WAGGLE_DISK_PG_PORT:=$((WAGGLE_TEST_PG_PORT + 2))}"
: "${WAGGLE_BUILD_DIR:=$WAGGLE_ROOT/build/release}"
: "${WAGGLE_BUILD_JOBS:=2}"
WAGGLE_PG_BIN=${WAGGLE_PG_BIN:-/usr/lib/postgresql/15/bin}
WAGGLE_PG_SUPERUSER=postgres   # the database superuser role initdb creates (trust auth, loopback only)

wg_log() { printf '[waggle] %s\n' "$*" >&2; }

# Every early exit says what failed. Under `set -e` a failing command ends the script; this
# names it and where, instead of the silent exit 1 a bare errexit gives. Scripts without -e
# (scripts/test records failures as stages) are not interrupted, so nothing is printed for them.
# errtrace (set -E) carries the trap into functions; in command substitutions errexit is off,
# and the command that used the substitution reports.
wg_on_err() {
  local rc=$?
  case $- in *e*) ;; *) return 0 ;; esac
  printf '[waggle] ERROR: exit %s from: %s (%s line %s)\n' "$rc" "$BASH_COMMAND" \
    "${BASH_SOURCE[1]:-?}" "${BASH_LINENO[0]:-?}" >&2
}
set -E
trap wg_on_err ERR
wg_die() { printf '[waggle] ERROR: %s\n' "$*" >&2; exit 1; }
wg_is_root() { [ "$(id -u)" -eq 0 ]; }

# --- Packages -------------------------------------------------------------------------------
WAGGLE_APT_PACKAGES=(build-essential cmake ninja-build ccache pkg-config libcaf-dev libpqxx-dev
  rapidjson-dev libboost1.81-dev libsecp256k1-dev libssl-dev libgtest-dev libbenchmark-dev
  postgresql-15 postgresql-client-15 gnuplot-nox pgbouncer shellcheck libnats-dev nats-server
  clang libclang-rt-14-dev)

wg_node_ok() {
  command -v node >/dev/null 2>&1 &&
    node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' 2>/dev/null
}

# wg_missing_packages PKG...: prints, one a line, each PKG that is not installed and configured.
# dpkg-query exits 1 when it has never heard of a name (a fresh machine has never seen
# libcaf-dev), so its status is not an answer: the abbreviated state of each package is. "ii"
# is installed and configured; anything else (unknown, unpacked, half-configured, removed with
# its config files left) is missing. DPKG_ADMINDIR, when set, names another dpkg database
# (the install-check test uses one).
wg_missing_packages() {
  local p state
  for p in "$@"; do
    state=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) || state=
    [ "${state:0:2}" = ii ] || printf '%s\n' "$p"
  done
}

# Installs whatever is missing; prints nothing when everything is there.
wg_install_deps() {
  local pkgs=("${WAGGLE_APT_PACKAGES[@]}") missing=()
  if wg_node_ok; then
    command -v npm >/dev/null 2>&1 || pkgs+=(npm)
  else
    pkgs+=(nodejs npm)
  fi
  mapfile -t missing < <(wg_missing_packages "${pkgs[@]}")
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  if ! wg_is_root; then
    command -v sudo >/dev/null 2>&1 ||
      wg_die "missing packages: ${missing[*]} (not root and no sudo: install them, then re-run)"
    sudo=(sudo)
  fi
  wg_log "installing: ${missing[*]}"
  # A package left unpacked but not configured (an interrupted install) is finished first:
  # apt-get refuses to install anything while dpkg has pending work.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive dpkg --configure -a ||
    wg_die "dpkg --configure -a failed"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq ||
    wg_die "apt-get update failed"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null || wg_die "apt-get install ${missing[*]} failed"
  wg_node_ok || wg_die "node >= 18 is required (found: $(node --version 2>/dev/null || echo none))"
}

# --- Build ----------------------------------------------------------------------------------
# wg_build [TARGET...]: configure once (Release, Ninja), then build incrementally.
wg_build() {
  local dir=$WAGGLE_BUILD_DIR
  if [ "${WAGGLE_SKIP_BUILD:-0}" = 1 ]; then
    wg_log "WAGGLE_SKIP_BUILD=1: using $dir as it is"
    return 0
  fi
  local args=(-DCMAKE_BUILD_TYPE=Release)
  # A sanitizer build keeps its debug info: its reports name lines.
  [ -n "${WAGGLE_SANITIZE:-}" ] &&
    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DWAGGLE_SANITIZE=$WAGGLE_SANITIZE")
  if [ "${WAGGLE_SANITIZE:-}" = thread ]; then
    # TSan needs CAF instrumented too (scripts/caf-tsan says why); the tree links that build.
    local caf
    caf=$("$WAGGLE_ROOT/scripts/caf-tsan") || return 1
    args+=("-DCAF_INCLUDE=$caf/include" "-DCAF_CORE=$(wg_caf_lib "$caf" core)"
      "-DCAF_IO=$(wg_caf_lib "$caf" io)")
    # Also a tree configured before against Debian's uninstrumented CAF.
    grep -q "^CAF_CORE:FILEPATH=$caf/" "$dir/CMakeCache.txt" 2>/dev/null || rm -f "$dir/build.ninja"
  fi
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S "$WAGGLE_ROOT" -B "$dir" -G Ninja "${args[@]}" >/dev/null || return 1
  fi
  local targets=()
  [ $# -gt 0 ] && targets=(--target "$@")
  cmake --build "$dir" -j "$WAGGLE_BUILD_JOBS" "${targets[@]}"
}

wg_binary() { printf '%s/waggle\n' "$WAGGLE_BUILD_DIR"; }

# wg_caf_lib PREFIX core|io: the shared library of that CAF module under an install prefix.
wg_caf_lib() { find "$1" -name "libcaf_$2.so" \( -type f -o -type l \) -print -quit; }

# --- Private PostgreSQL ---------------------------------------------------------------------
# wg_pg_select run|test: chooses the cluster of ./scripts/run ("$WAGGLE_DATA_DIR/pg", port
# $WAGGLE_PG_PORT) or of ./scripts/test ("$WAGGLE_DATA_DIR/pg-test", port $WAGGLE_TEST_PG_PORT),
# or its fallback under /var/tmp (see below). Sets WG_PG_NAME, WG_PG_PORT, WG_PGDATA,
# WG_PG_SOCKDIR, WG_PG_OSUSER. Creates nothing but $WAGGLE_DATA_DIR.
#
# As root, initdb refuses to run, so the cluster belongs to a system user: `postgres` (created
# by the postgresql-15 package) or, where that is missing, `waggle-pg`. That user must be able
# to reach the data directory; when the checkout sits under a path it cannot traverse (a
# root-only 0700 parent), the cluster goes to /var/tmp/waggle-<hash of the path>/NAME instead.
#
# The streaming standbys (wg_standby_start) are clusters too: `standby` (alias `test-standby`,
# port $WAGGLE_TEST_STANDBY_PORT, "$WAGGLE_DATA_DIR/pg-test-standby") of `test`, and
# `run-standby` (port $WAGGLE_STANDBY_PORT, "$WAGGLE_DATA_DIR/pg-standby") of `run`. For them
# WG_PG_STANDBY=1 and WG_PG_PRIMARY names the primary; 0 and empty otherwise.
wg_pg_select() {
  local sub name=$1
  WG_PG_STANDBY=0 WG_PG_PRIMARY=
  case $1 in
    run) WG_PG_PORT=$WAGGLE_PG_PORT sub=pg ;;
    test) WG_PG_PORT=$WAGGLE_TEST_PG_PORT sub=pg-test ;;
    standby | test-standby)
      WG_PG_PORT=$WAGGLE_TEST_STANDBY_PORT sub=pg-test-standby name=standby
      WG_PG_STANDBY=1 WG_PG_PRIMARY=test ;;
    run-standby) WG_PG_PORT=$WAGGLE_STANDBY_PORT sub=pg-standby WG_PG_STANDBY=1 WG_PG_PRIMARY=run ;;
    # The disk-full fault's cluster: pg-disk is the mount point of its small filesystem.
    disk) WG_PG_PORT=$WAGGLE_DISK_PG_PORT sub=pg-disk/data ;;
    *) wg_die "wg_pg_select: unknown cluster '$1' (run, test, standby, run-standby, disk)" ;;
  esac
  WG_PG_NAME=$name
  local dir=$WAGGLE_DATA_DIR/$sub hash
  hash=$(printf '%s' "$(wg_abspath "$WAGGLE_DATA_DIR")" | sha256sum | cut -c1-12)
  local fallback=/var/tmp/waggle-$hash/$sub
  WG_PG_OSUSER=$(id -un)
  if wg_is_root; then
    if [ -f "$dir/PG_VERSION" ]; then
      WG_PGDATA=$dir
    elif [ -f "$fallback/PG_VERSION" ]; then
      WG_PGDATA=$fallback
    else
      WG_PG_OSUSER=$(wg_pg_pick_osuser) || exit 1
      if runuser -u "$WG_PG_OSUSER" -- test -x "$WAGGLE_DATA_DIR" 2>/dev/null; then
        WG_PGDATA=$dir
      else
        WG_PGDATA=$fallback
      fi
    fi
    [ -e "$WG_PGDATA" ] && WG_PG_OSUSER=$(stat -c %U "$WG_PGDATA")
  else
    WG_PGDATA=$dir
  fi
  # A unix socket path is limited to 107 bytes; keep it in the data dir when it fits.
  WG_PG_SOCKDIR=$WG_PGDATA
  if [ $((${#WG_PGDATA} + 20)) -gt 100 ]; then
    WG_PG_SOCKDIR=/tmp/waggle-sock-$(printf '%s' "$WG_PGDATA" | sha256sum | cut -c1-12)
  fi
}

# shellcheck disable=SC2174  # only the deepest directory (the data dir) needs 755
wg_abspath() { (mkdir -p -m 755 "$1" && cd "$1" && pwd -P); }

wg_pg_pick_osuser() {
  if id -u postgres >/dev/null 2>&1; then
    echo postgres
  else
    id -u waggle-pg >/dev/null 2>&1 ||
      useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
        --comment "waggle private PostgreSQL" waggle-pg ||
      wg_die "could not create system user waggle-pg"
    echo waggle-pg
  fi
}

# Runs a PostgreSQL server tool as the cluster's owner (from /, which that user can read).
wg_pg_as_owner() {
  if wg_is_root; then
    (cd / && runuser -u "$WG_PG_OSUSER" -- "$@")
  else
    "$@"
  fi
}

wg_pg_ctl() { wg_pg_as_owner "$WAGGLE_PG_BIN/pg_ctl" -D "$WG_PGDATA" "$@"; }

# 0 when this cluster's postmaster is running.
wg_pg_running() { wg_pg_ctl status >/dev/null 2>&1; }

wg_port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wg_nats_start DIR PORT: a nats-server on loopback, its config and log in DIR; sets WG_NATS_PID
# and WG_NATS_URL. A bus payload is up to 1 MiB, so max_payload is 2 MiB (docs/bus.md, "NATS").
wg_nats_start() {
  local dir=$1 port=$2 deadline
  command -v nats-server >/dev/null ||
    wg_die "nats-server is not installed (Debian's nats-server; WAGGLE_APT_PACKAGES in scripts/lib.sh)"
  wg_port_busy "$port" && wg_die "port $port (nats-server) is in use"
  mkdir -p "$dir"
  printf 'max_payload: 2097152\n' >"$dir/nats.conf"
  nats-server -c "$dir/nats.conf" -a 127.0.0.1 -p "$port" -l "$dir/nats.log" >/dev/null 2>&1 &
  WG_NATS_PID=$!
  deadline=$((SECONDS + 10))
  until wg_port_busy "$port"; do
    kill -0 "$WG_NATS_PID" 2>/dev/null || wg_die "nats-server did not start (log: $dir/nats.log)"
    [ "$SECONDS" -lt "$deadline" ] || wg_die "nats-server does not accept on $port after 10 s"
    sleep 0.1
  done
  WG_NATS_URL=nats://127.0.0.1:$port
  wg_log "nats-server $(nats-server --version 2>/dev/null | head -1) on $WG_NATS_URL (pid $WG_NATS_PID)"
}

wg_pg_init() {
  [ -f "$WG_PGDATA/PG_VERSION" ] && return 0
  [ "$WG_PG_STANDBY" = 1 ] && wg_die "no standby in $WG_PGDATA (wg_standby_start makes one)"
  wg_log "creating PostgreSQL 15 cluster in $WG_PGDATA (owner: $WG_PG_OSUSER)"
  if wg_is_root; then
    mkdir -p "$(dirname "$WG_PGDATA")"
    chmod a+rx "$(dirname "$WG_PGDATA")"
  fi
  mkdir -p "$WG_PGDATA"
  chmod 700 "$WG_PGDATA"
  wg_is_root && chown "$WG_PG_OSUSER:" "$WG_PGDATA"
  wg_pg_as_owner "$WAGGLE_PG_BIN/initdb" -D "$WG_PGDATA" --username="$WAGGLE_PG_SUPERUSER" \
    --auth=trust --encoding=UTF8 --locale=C.UTF-8 --data-checksums --no-instructions \
    >"$WAGGLE_DATA_DIR/initdb-$WG_PG_NAME.log" 2>&1 || {
      cat "$WAGGLE_DATA_DIR/initdb-$WG_PG_NAME.log" >&2
      wg_die "initdb failed for $WG_PGDATA"
    }
  # Trust, but only over the unix socket (0700 directory) and loopback TCP.
  wg_pg_write_file pg_hba.conf <<'EOF'
# Written by scripts/lib.sh: a private development cluster, reachable from this machine only.
# TYPE  DATABASE     USER  ADDRESS        METHOD
local   all          all                  trust
host    all          all   127.0.0.1/32   trust
local   replication  all                  trust
host    replication  all   127.0.0.1/32   trust
EOF
  echo "include_if_exists = 'waggle.conf'" | wg_pg_write_file -a postgresql.conf
}

# wg_pg_write_file [-a] NAME: writes (-a: appends) stdin to NAME in the data dir, as its owner.
wg_pg_write_file() {
  local append=()
  [ "$1" = -a ] && { append=(-a); shift; }
  wg_pg_as_owner tee "${append[@]}" "$WG_PGDATA/$1" >/dev/null
}

# (Re)writes the settings the scripts own; read at every start.
wg_pg_write_conf() {
  wg_pg_write_file waggle.conf <<EOF
# Written by scripts/lib.sh at every start; edit the script, not this file.
listen_addresses = '127.0.0.1'
port = $WG_PG_PORT
unix_socket_directories = '$WG_PG_SOCKDIR'
unix_socket_permissions = 0700
max_connections = 200
shared_buffers = 256MB
# The relay's OK means durable: never trade these away.
fsync = on
synchronous_commit = on
full_page_writes = on
wal_level = replica
max_wal_senders = 10
timezone = 'UTC'
log_timezone = 'UTC'
log_line_prefix = '%m [%p] %q%u@%d '
EOF
  # WAL kept for the test standby while a replica test has it stopped (no slot: a standby
  # deleted by hand must never pin WAL forever; one that falls further behind is re-made by
  # wg_standby_start). Not on the run cluster: the benchmarks' WAL recycling stays as it was.
  if [ "$WG_PG_NAME" = test ]; then
    echo "wal_keep_size = 256MB" | wg_pg_write_file -a waggle.conf
  fi
  # The test clusters (never the run cluster, which the benchmarks use) do not fsync: every
  # PostgreSQL-backed test process drops its database at exit, and DROP DATABASE waits for a
  # checkpoint, 1.5-5 s with fsync on against 0.1-0.4 s off, measured on this 2-core machine:
  # most of the suite's time. What the tests prove does not rest on fsync: the durability
  # stages kill the relay and restart PostgreSQL (-m fast), where the kernel keeps every
  # write; a power cut cannot be staged here. Commits still wait for their WAL write
  # (synchronous_commit stays on), so acknowledgement order is what production sees.
  case $WG_PG_NAME in
    test | standby) echo "fsync = off" | wg_pg_write_file -a waggle.conf ;;
  esac
  [ "${WG_PG_STANDBY:-0}" = 1 ] || return 0
  wg_pg_write_file -a waggle.conf <<'EOF'
# A hot standby for replica tests (scripts/lib.sh, wg_standby_start).
hot_standby = on
# Replica tests force recovery conflicts: a standby query in the way of replay is cancelled
# after 500 ms, and the primary never hears which rows a standby query still needs.
max_standby_streaming_delay = 500ms
max_standby_archive_delay = 500ms
hot_standby_feedback = off
# Replay positions reach the primary (pg_stat_replication) within a second, and the standby
# reconnects within a second of a primary restart.
wal_receiver_status_interval = 1s
wal_retrieve_retry_interval = 1s
EOF
}

# Port the running postmaster listens on (from postmaster.pid), empty if unknown.
wg_pg_running_port() { sed -n 4p "$WG_PGDATA/postmaster.pid" 2>/dev/null || true; }

# wg_pg_start: init if needed, start if not running. Sets WG_PG_STARTED=1 when this call
# started the server (so the caller knows to stop it). Dies loudly on any failure.
wg_pg_start() {
  WG_PG_STARTED=0
  [ -x "$WAGGLE_PG_BIN/pg_ctl" ] || wg_die "PostgreSQL 15 is not installed ($WAGGLE_PG_BIN/pg_ctl missing)"
  wg_pg_init
  if wg_pg_running; then
    local p
    p=$(wg_pg_running_port)
    [ "$p" = "$WG_PG_PORT" ] ||
      wg_die "the cluster in $WG_PGDATA is already running on port ${p:-?}, not $WG_PG_PORT; stop it first: ./scripts/pg stop $WG_PG_NAME"
    wg_log "PostgreSQL ($WG_PG_NAME) already running on 127.0.0.1:$WG_PG_PORT; reusing it"
    return 0
  fi
  if wg_port_busy "$WG_PG_PORT"; then
    local var
    case $WG_PG_NAME in
      run) var=WAGGLE_PG_PORT ;; test) var=WAGGLE_TEST_PG_PORT ;;
      standby) var=WAGGLE_TEST_STANDBY_PORT ;; run-standby) var=WAGGLE_STANDBY_PORT ;;
    esac
    wg_die "port $WG_PG_PORT on 127.0.0.1 is already in use by another process (see: ss -ltnp 'sport = :$WG_PG_PORT'); choose another port with $var=NNNN"
  fi
  if [ "$WG_PG_SOCKDIR" != "$WG_PGDATA" ]; then
    mkdir -p "$WG_PG_SOCKDIR" && chmod 700 "$WG_PG_SOCKDIR"
    wg_is_root && chown "$WG_PG_OSUSER:" "$WG_PG_SOCKDIR"
  fi
  wg_pg_write_conf
  if ! wg_pg_ctl -l "$WG_PGDATA/server.log" -w -t 60 start >/dev/null; then
    wg_log "PostgreSQL failed to start; last lines of $WG_PGDATA/server.log:"
    tail -n 30 "$WG_PGDATA/server.log" >&2 || true
    wg_die "could not start PostgreSQL ($WG_PGDATA, port $WG_PG_PORT)"
  fi
  # shellcheck disable=SC2034  # read by the callers
  WG_PG_STARTED=1
  wg_log "PostgreSQL ($WG_PG_NAME) started on 127.0.0.1:$WG_PG_PORT, data in $WG_PGDATA (OS user $WG_PG_OSUSER)"
}

wg_pg_stop() {
  wg_pg_running || return 0
  wg_pg_ctl -m fast -w -t 60 stop >/dev/null && wg_log "PostgreSQL ($WG_PG_NAME) stopped"
}

# wg_pg_restart [fast|immediate]: immediate is a crash (no checkpoint; recovery from the WAL).
wg_pg_restart() { wg_pg_ctl -m "${1:-fast}" -w -t 60 -l "$WG_PGDATA/server.log" restart >/dev/null; }

# postgresql:// URL of database $1 on the selected cluster, as the superuser role.
wg_pg_url() { printf 'postgresql://%s@127.0.0.1:%s/%s\n' "$WAGGLE_PG_SUPERUSER" "$WG_PG_PORT" "$1"; }

wg_psql() {
  PGOPTIONS="-c client_min_messages=warning ${PGOPTIONS:-}" "$WAGGLE_PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"
}

# wg_db_ensure URL_OF_MAINTENANCE_DB NAME: creates database NAME if it does not exist.
wg_db_ensure() {
  local admin=$1 name=$2
  if [ -z "$(wg_psql "$admin" -tAc "SELECT 1 FROM pg_database WHERE datname = '$name'")" ]; then
    wg_psql "$admin" -c "CREATE DATABASE \"$name\"" || return 1
  fi
}

wg_db_drop() { wg_psql "$1" -c "DROP DATABASE IF EXISTS \"$2\" WITH (FORCE)"; }

# Replaces the database part of a postgresql:// URL.
wg_url_with_db() { printf '%s/%s\n' "${1%/*}" "$2"; }

# --- Streaming standbys ---------------------------------------------------------------------
# A standby is a copy of its primary (`pg_basebackup -R`, as the primary's OS user) replaying
# its WAL as it streams over loopback TCP: hot (read-only queries), on its own port, with the
# settings of wg_pg_write_conf plus the standby lines there. Replica tests pause its replay,
# stop it and force recovery conflicts on it (docs/testing.md, "The standby").

# Database system identifier of the selected cluster (empty when it has no data dir).
wg_pg_sysid() {
  [ -f "$WG_PGDATA/global/pg_control" ] || return 0
  wg_pg_as_owner "$WAGGLE_PG_BIN/pg_controldata" "$WG_PGDATA" 2>/dev/null |
    sed -n 's/^Database system identifier:[[:space:]]*//p'
}

# 0 when the selected standby is up and its WAL receiver streams from the primary.
wg_standby_streaming() {
  [ "$(wg_psql "$(wg_pg_url postgres)" -tAc 'SELECT status FROM pg_stat_wal_receiver' 2>/dev/null)" = streaming ]
}

wg_standby_wait_streaming() { # SECONDS
  local deadline=$((SECONDS + $1))
  while [ "$SECONDS" -lt "$deadline" ]; do
    wg_standby_streaming && return 0
    sleep 0.2
  done
  wg_standby_streaming
}

# The selected primary must take replication connections from loopback: clusters made by
# wg_pg_init allow them; an older pg_hba.conf gets the line (and a reload).
wg_pg_ensure_replication() {
  local level
  level=$(wg_psql "$(wg_pg_url postgres)" -tAc 'SHOW wal_level') ||
    wg_die "cannot query the $WG_PG_NAME cluster on port $WG_PG_PORT"
  [ "$level" != minimal ] ||
    wg_die "the $WG_PG_NAME cluster runs with wal_level minimal; restart it: ./scripts/pg stop $WG_PG_NAME && ./scripts/pg start $WG_PG_NAME"
  if ! grep -Eq '^[[:space:]]*host[[:space:]]+replication[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' \
    "$WG_PGDATA/pg_hba.conf"; then
    wg_log "allowing loopback replication connections in $WG_PGDATA/pg_hba.conf"
    printf 'host    replication  all   127.0.0.1/32   trust\n' | wg_pg_write_file -a pg_hba.conf
    wg_pg_ctl reload >/dev/null
  fi
}

# Stops the selected standby and deletes its data dir (only ever a standby's).
wg_standby_remove() {
  wg_pg_stop
  if [ -f "$WG_PGDATA/PG_VERSION" ] && [ ! -f "$WG_PGDATA/standby.signal" ]; then
    wg_die "$WG_PGDATA holds a cluster that is not a standby (no standby.signal); not deleting it: move it away by hand"
  fi
  rm -rf "$WG_PGDATA"
}

# wg_standby_basebackup PRIMARY_PORT: copies the primary into the (absent) standby data dir.
wg_standby_basebackup() {
  local log=$WAGGLE_DATA_DIR/basebackup-$WG_PG_NAME.log
  wg_log "creating the standby cluster $WG_PG_NAME in $WG_PGDATA: pg_basebackup -R from 127.0.0.1:$1 (OS user $WG_PG_OSUSER)"
  if wg_is_root; then
    mkdir -p "$(dirname "$WG_PGDATA")"
    chmod a+rx "$(dirname "$WG_PGDATA")"
  fi
  mkdir -p "$WG_PGDATA"
  chmod 700 "$WG_PGDATA"
  wg_is_root && chown "$WG_PG_OSUSER:" "$WG_PGDATA"
  # application_name lands in primary_conninfo: pg_stat_replication names the standby.
  if ! wg_pg_as_owner "$WAGGLE_PG_BIN/pg_basebackup" -D "$WG_PGDATA" -R -X stream -c fast \
    -d "host=127.0.0.1 port=$1 user=$WAGGLE_PG_SUPERUSER application_name=waggle_$WG_PG_NAME" \
    >"$log" 2>&1; then
    cat "$log" >&2
    rm -rf "$WG_PGDATA"
    wg_die "pg_basebackup from 127.0.0.1:$1 failed"
  fi
  # The primary's server log came along; the standby starts its own.
  rm -f "$WG_PGDATA/server.log"
}

# wg_standby_start: with a standby selected (wg_pg_select standby|run-standby) and its primary
# running, makes sure it runs and streams: re-made from scratch when it copies another cluster
# (the primary's data dir was made again) or does not stream within 30 s (it fell behind the
# WAL the primary keeps). Sets WG_PG_STARTED=1 when this call started it; dies on failure.
wg_standby_start() {
  local name=$WG_PG_NAME primary=$WG_PG_PRIMARY p_port p_owner p_sysid s_sysid made=0 started=0
  [ "$WG_PG_STANDBY" = 1 ] || wg_die "wg_standby_start: $name is not a standby"
  wg_pg_select "$primary"
  if ! wg_pg_running || [ "$(wg_pg_running_port)" != "$WG_PG_PORT" ]; then
    wg_die "the $primary cluster is not running on port $WG_PG_PORT; start it first: ./scripts/pg start $primary"
  fi
  p_port=$WG_PG_PORT p_owner=$WG_PG_OSUSER
  p_sysid=$(wg_pg_sysid)
  [ -n "$p_sysid" ] || wg_die "cannot read the system identifier of $WG_PGDATA"
  wg_pg_ensure_replication
  wg_pg_select "$name"
  [ "$WG_PG_PORT" != "$p_port" ] || wg_die "the standby $name and its primary are both set to port $p_port"
  [ -f "$WG_PGDATA/PG_VERSION" ] || WG_PG_OSUSER=$p_owner
  s_sysid=$(wg_pg_sysid)
  if [ -n "$s_sysid" ] && [ "$s_sysid" != "$p_sysid" ]; then
    wg_log "the standby in $WG_PGDATA copies another cluster (system identifier $s_sysid, $primary's is $p_sysid): making it again"
    wg_standby_remove
  fi
  if [ ! -f "$WG_PGDATA/PG_VERSION" ]; then
    wg_standby_basebackup "$p_port"
    made=1
  fi
  wg_pg_start
  started=$WG_PG_STARTED
  if ! wg_standby_wait_streaming 30; then
    [ "$made" = 1 ] && {
      tail -n 20 "$WG_PGDATA/server.log" >&2
      wg_die "the new standby $name (port $WG_PG_PORT) does not stream from $primary (port $p_port)"
    }
    wg_log "the standby $name does not stream from $primary within 30 s; last lines of its log:"
    tail -n 10 "$WG_PGDATA/server.log" >&2 || true
    wg_log "making it again"
    wg_standby_remove
    wg_standby_basebackup "$p_port"
    wg_pg_start
    started=1
    if ! wg_standby_wait_streaming 30; then
      tail -n 20 "$WG_PGDATA/server.log" >&2
      wg_die "the new standby $name (port $WG_PG_PORT) does not stream from $primary (port $p_port)"
    fi
  fi
  WG_PG_STARTED=$started
  wg_log "standby $name streaming from $primary (127.0.0.1:$p_port) on 127.0.0.1:$WG_PG_PORT"
}

# Replay state of the selected standby: "not paused", "pause requested" or "paused".
wg_standby_replay_state() {
  wg_psql "$(wg_pg_url postgres)" -tAc 'SELECT pg_get_wal_replay_pause_state()'
}

# --- Relay helpers (tests) ----------------------------------------------------------------
# HTTP status of GET http://127.0.0.1:PORT/PATH, or 000 when nothing answers (no curl needed).
wg_http_status() {
  # shellcheck disable=SC2016  # the inner script expands its own arguments
  timeout 3 bash -c '
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n" "$2" "$1" >&3
    IFS=" " read -r _ code _ <&3 && printf "%s\n" "$code"
  ' _ "$1" "$2" 2>/dev/null || echo 000
}

# wg_wait_ready PORT SECONDS [PID]: waits for /readyz to answer 200.
wg_wait_ready() {
  local port=$1 deadline=$((SECONDS + $2)) pid=${3:-}
  while [ "$SECONDS" -lt "$deadline" ]; do
    [ "$(wg_http_status "$port" /readyz)" = 200 ] && return 0
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    sleep 0.2
  done
  return 1
}

# Below the kernel's ephemeral range: a port picked inside it can be taken,
# between the pick and the relay's bind, by any outgoing connection (the
# relay's own connections to PostgreSQL included), and the bind then fails.
wg_free_port() {
  local p _ low=32768 span
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
  span=$((low - 20000))
  ((span > 1000)) || span=10000
  for _ in $(seq 1 200); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % span))
    wg_port_busy "$p" || { echo "$p"; return 0; }
  done
  return 1
}

# wg_relay_start BINARY DATABASE_URL PORT LOGFILE: starts `waggle serve` in the background,
# waits for /readyz; sets WG_RELAY_PID. Returns 1 (with the log's tail) if it never gets ready.
wg_relay_start() {
  local bin=$1 url=$2 port=$3 log=$4
  "$bin" serve --port "$port" --bind 127.0.0.1 --database-url "$url" >>"$log" 2>&1 &
  WG_RELAY_PID=$!
  if ! wg_wait_ready "$port" 60 "$WG_RELAY_PID"; then
    if kill -0 "$WG_RELAY_PID" 2>/dev/null; then
      wg_log "relay did not answer 200 on /readyz within 60 s (port $port); last lines of $log:"
    else
      local rc=0
      wait "$WG_RELAY_PID" || rc=$?
      wg_log "relay exited with status $rc before it was ready (port $port); last lines of $log:"
    fi
    tail -n 30 "$log" >&2
    wg_relay_stop "$WG_RELAY_PID"
    return 1
  fi
}

# wg_relay_stop PID: SIGTERM, up to 20 s for a graceful exit, then SIGKILL.
wg_relay_stop() {
  local pid=$1 _
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    wg_log "relay $pid did not stop within 20 s of SIGTERM; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

# wg_listener_standin_start FILE [STATUS...]: starts tests/client/listener_standin.mjs, a stand-in
# operator listener answering its POSTs with STATUS... in turn (default 503 200), in the
# background; once it listens sets WG_LISTENER_PID and WG_LISTENER_ENTRY ("<listener
# pubkey>=<url>", the relay's --operator-listeners). wg_listener_standin_stop ends it.
# shellcheck disable=SC2034  # WG_LISTENER_ENTRY: read by the callers
wg_listener_standin_start() {
  local file=$1 _
  shift
  rm -f "$file"
  WG_LISTENER_ENTRY=
  node "$WAGGLE_ROOT/tests/client/listener_standin.mjs" "$file" "$@" &
  WG_LISTENER_PID=$!
  for _ in $(seq 1 100); do
    if [ -s "$file" ]; then
      WG_LISTENER_ENTRY=$(cat "$file")
      return 0
    fi
    kill -0 "$WG_LISTENER_PID" 2>/dev/null || break
    sleep 0.1
  done
  wg_listener_standin_stop
  return 1
}

wg_listener_standin_stop() {
  [ -n "${WG_LISTENER_PID:-}" ] || return 0
  kill -TERM "$WG_LISTENER_PID" 2>/dev/null || true
  wait "$WG_LISTENER_PID" 2>/dev/null || true
  WG_LISTENER_PID=
}

# wg_relay_prepare_db BINARY DATABASE_URL HOST...: migrate, then make sure each community
# host exists (`community add`, tolerated when `community list` then shows the host). These
# are development and test communities: `open`, so any authenticated key may use them (a
# community made with plain `waggle community add` is closed to non-members).
wg_relay_prepare_db() {
  local bin=$1 url=$2 host
  shift 2
  "$bin" migrate --database-url "$url" || return 1
  for host in "$@"; do
    wg_community_listed "$bin" "$url" "$host" && continue
    "$bin" community add "$host" --policy open --database-url "$url" && continue
    wg_community_listed "$bin" "$url" "$host" || return 1
  done
}

wg_community_listed() {
  local listed
  listed=$("$1" community list --database-url "$2" 2>/dev/null ||
    WAGGLE_DATABASE_URL=$2 "$1" community list 2>/dev/null || true)
  grep -qwF -- "$3" <<<"$listed"
}

wg_npm_ci() {
  local d=$WAGGLE_ROOT/tests/client
  if [ ! -f "$d/node_modules/.package-lock.json" ] ||
     [ "$d/package-lock.json" -nt "$d/node_modules/.package-lock.json" ]; then
    (cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

# Keeps the data dir out of git without touching the repo's .gitignore.
wg_data_dir_init() {
  # shellcheck disable=SC2174
  mkdir -p -m 755 "$WAGGLE_DATA_DIR"
  [ -f "$WAGGLE_DATA_DIR/.gitignore" ] || printf '*\n' >"$WAGGLE_DATA_DIR/.gitignore"
}
