#!/usr/bin/env bash
# Redis-backed limits (bindings-python/tests/redis, tests/redis): server start|stop | cluster start|stop | test.
#   server start   install redis-server if missing, start one on 127.0.0.1:$RATEKEEPER_REDIS_PORT
#                  (default 6391), no persistence, its pid in target/redis/server-PORT/pid
#                  (`test` and `demo`, unless the variables are set, take the first ports
#                  from the defaults up that nothing listens on)
#   server stop    stop that server by its pid
#   cluster start  a 3-node local Redis Cluster on ports $RATEKEEPER_CLUSTER_PORT.. (default 7391..7393)
#   cluster stop   stop those nodes by their pids
#   test           build the Python binding and the Node addon, start the servers, run every
#                  Redis test, Python then Node (none may be skipped), stop the servers even on failure
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
RUN="$ROOT/target/redis"
PORT="${RATEKEEPER_REDIS_PORT:-6391}"
CLUSTER_PORT="${RATEKEEPER_CLUSTER_PORT:-7391}"
PY="$ROOT/.venv/bin/python"

install() {
    if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
        return
    fi
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
}

# Whether process $1 is a redis-server: a pid file kept across a reboot, or
# left by a crash, may name another process by now, which must be neither
# trusted nor killed.
ours() {
    [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "redis-server" ]
}

# start NAME PORT [extra redis-server arguments]: a server in $RUN/NAME, up and answering.
start() {
    local name="$1" port="$2"
    shift 2
    local dir="$RUN/$name"
    mkdir -p "$dir"
    if [ -f "$dir/pid" ] && ours "$(cat "$dir/pid")"; then
        return
    fi
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
        --dir "$dir" --daemonize no --loglevel warning "$@" >"$dir/log" 2>&1 8>&- 9>&- &
    echo $! >"$dir/pid"
    for _ in $(seq 1 100); do
        # Our server must answer, not another one already on the port (which
        # answers while ours is still failing to bind): it gives its pid.
        if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
            echo "redis.sh: redis-server on port $port exited (port in use?); see $dir/log" >&2
            exit 1
        fi
        if [ "$(redis-cli -p "$port" info server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p')" = "$(cat "$dir/pid")" ]; then
            return
        fi
        sleep 0.05
    done
    echo "redis.sh: redis-server on port $port did not start; see $dir/log" >&2
    exit 1
}

# stop NAME: stops the server started as NAME, by its pid.
stop() {
    local pidfile="$RUN/$1/pid"
    [ -f "$pidfile" ] || return 0
    local pid
    pid="$(cat "$pidfile")"
    if ours "$pid"; then
        kill "$pid"
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
    fi
    rm -f "$pidfile"
}

# Whether something listens on 127.0.0.1:$1.
listening() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_ports FIRST COUNT AVOID [bus]: the first port from FIRST up such that
# nothing listens on it nor on the COUNT - 1 ports after it (nor, with `bus`,
# on their cluster bus ports, +10000), and none of them is AVOID: the
# defaults may be taken on a shared machine.
free_ports() {
    local port i
    for ((port = $1; port < $1 + 100; port++)); do
        for ((i = 0; i < $2; i++)); do
            if [ "$((port + i))" = "$3" ] || listening $((port + i)) ||
                { [ -n "${4:-}" ] && listening $((port + i + 10000)); }; then
                continue 2
            fi
        done
        echo "$port"
        return
    done
    echo "redis.sh: no free ports from $1 to $(($1 + 99))" >&2
    exit 1
}

# Every `test` and `demo` holds a shared lock on $RUN/lock while it runs (fd
# 9, which the servers it starts do not inherit). A run that can first take
# it exclusively knows that no other run of this checkout is going: every
# server whose pid file is left is then an interrupted run's, whatever its
# port, and is stopped (by its pid: never another's). A run that cannot
# leaves the other run's servers be and takes ports around them.
claim_run() {
    mkdir -p "$RUN"
    exec 9>"$RUN/lock"
    if flock -xn 9; then
        local pidfile
        for pidfile in "$RUN"/*/pid; do
            [ -e "$pidfile" ] || continue
            stop "$(basename "$(dirname "$pidfile")")"
        done
    fi
    flock -s 9
}

# Ports are picked and the servers started under an exclusive lock (fd 8):
# a run picking its ports while another's servers do not listen yet would
# take the same ones.
lock_starts() {
    exec 8>"$RUN/start.lock"
    flock -x 8
}

unlock_starts() {
    flock -u 8
    exec 8>&-
}

# Unless the ports were given, free ones (see free_ports), the server's
# outside the cluster's.
pick_ports() {
    claim_run
    lock_starts
    [ -n "${RATEKEEPER_CLUSTER_PORT:-}" ] || CLUSTER_PORT=$(free_ports "$CLUSTER_PORT" 3 "$PORT" bus)
    if [ -z "${RATEKEEPER_REDIS_PORT:-}" ]; then
        PORT=$(free_ports "$PORT" 1 none)
        while [ "$PORT" -ge "$CLUSTER_PORT" ] && [ "$PORT" -le $((CLUSTER_PORT + 2)) ]; do
            PORT=$(free_ports $((CLUSTER_PORT + 3)) 1 none)
        done
    fi
}

server() {
    case "${1:-}" in
        start) install; start "server-$PORT" "$PORT" ;;
        stop) stop "server-$PORT" ;;
        *) echo "usage: $0 server start|stop" >&2; exit 2 ;;
    esac
}

cluster() {
    local ports=("$CLUSTER_PORT" "$((CLUSTER_PORT + 1))" "$((CLUSTER_PORT + 2))")
    case "${1:-}" in
        start)
            install
            local addresses=()
            for port in "${ports[@]}"; do
                rm -f "$RUN/node-$port/nodes.conf"
                start "node-$port" "$port" --cluster-enabled yes --cluster-config-file nodes.conf
                addresses+=("127.0.0.1:$port")
            done
            if ! redis-cli -p "${ports[0]}" cluster info | grep -q 'cluster_state:ok'; then
                redis-cli --cluster create "${addresses[@]}" --cluster-yes >"$RUN/cluster-create.log"
                for _ in $(seq 1 100); do
                    redis-cli -p "${ports[0]}" cluster info | grep -q 'cluster_state:ok' && break
                    sleep 0.1
                done
            fi
            ;;
        stop)
            for port in "${ports[@]}"; do stop "node-$port"; done
            ;;
        *) echo "usage: $0 cluster start|stop" >&2; exit 2 ;;
    esac
}

test_() {
    # The dev requirements (redis-py among them) may be newer than the venv.
    bash scripts/python.sh setup
    bash scripts/python.sh build
    bash scripts/node.sh build
    bash scripts/node.sh npm-ci tests/redis
    pick_ports
    echo "redis.sh: a server on port $PORT, a cluster on $CLUSTER_PORT-$((CLUSTER_PORT + 2))"
    trap 'cluster stop; server stop' EXIT
    server start
    cluster start
    unlock_starts
    export RATEKEEPER_REDIS_URL="redis://127.0.0.1:$PORT/0"
    export RATEKEEPER_REDIS_CLUSTER_URL="redis://127.0.0.1:$CLUSTER_PORT/0"
    export RATEKEEPER_REDIS_SERVER_SCRIPT="$ROOT/scripts/redis.sh"
    # Every test must run: a skip is a failure here (-rs lists why, the check fails on any).
    local log="$RUN/pytest.log" status=0
    set +e
    (cd bindings-python && "$PY" -m pytest tests/redis -q -rsfE -p no:cacheprovider) | tee "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    if grep -qE '[0-9]+ skipped' "$log"; then
        echo "redis.sh: some Python Redis tests were skipped; every one must run here" >&2
        status=1
    fi
    # One file at a time: the fault tests stop and restart the server.
    bash scripts/node-test.sh --test-concurrency=1 tests/redis/*.test.cjs || status=1
    bindings-node/node_modules/.bin/tsc -p tests/redis/types/tsconfig.json || status=1
    bindings-node/node_modules/.bin/tsc -p tests/redis/types/tsconfig.clients.json || status=1
    set -e
    exit "$status"
}

# The demo behind README's second command: a Python ASGI service and a Node
# HTTP service sharing per-client limits through one Redis.
demo() {
    pick_ports
    trap 'server stop' EXIT
    server start
    unlock_starts
    RATEKEEPER_REDIS_URL="redis://127.0.0.1:$PORT/0" node demo/redis/run.cjs
}

case "${1:-}" in
    server) server "${2:-}" ;;
    cluster) cluster "${2:-}" ;;
    test) test_ ;;
    demo) demo ;;
    *) echo "usage: $0 server start|stop | cluster start|stop | test | demo" >&2; exit 2 ;;
esac
