#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on 127.0.0.1 for the tests (Debian's server binaries; no Docker).
#
#   pg-cluster.sh create      initdb + start on a free port, TLS on (CA: <dir>/tls/ca.pem); prints "<dir> <port>"
#   pg-cluster.sh stop DIR    stops the server (fast shutdown: clients are disconnected)
#   pg-cluster.sh start DIR   starts it again on the same port
#   pg-cluster.sh freeze DIR  stops the server's processes (SIGSTOP): connections stay open, nothing answers
#   pg-cluster.sh thaw DIR    lets them run again (SIGCONT)
#   pg-cluster.sh destroy DIR stops it if running and removes DIR
#
# LOGINKIT_PG_EXTRA_CONF (create): lines appended to postgresql.conf after the defaults below.
#
# initdb refuses to run as root: as root, the cluster belongs to the `postgres` user.
set -euo pipefail

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    echo "pg-cluster: PostgreSQL server binaries not found (apt-get install postgresql; make test does)" >&2
    exit 2
fi

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
    if ! as_owner "$bindir/pg_ctl" -D "$1/data" -l "$1/server.log" -w -t 60 start >/dev/null; then
        echo "pg-cluster: the server did not start:" >&2
        cat "$1/server.log" >&2
        exit 1
    fi
}

case "${1:-}" in
create)
    port=$(python3 "$(dirname "$0")/free-port.py")
    dir=$(mktemp -d /tmp/loginkit-pg.XXXXXX)
    chmod 700 "$dir"
    if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
    if ! as_owner "$bindir/initdb" -D "$dir/data" -U loginkit -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1; then
        cat "$dir/initdb.log" >&2
        exit 1
    fi
    # TLS for the sslmode tests: a throwaway CA ($dir/tls/ca.pem) and a server certificate for
    # the name localhost only (so that verify-full to 127.0.0.1 must fail). Clients still choose.
    mkdir "$dir/tls"
    (
        cd "$dir/tls"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 \
            -subj "/CN=LoginKit test CA" -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr -subj "/CN=localhost"
        printf 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext
        rm ca.key server.csr server.ext
        chmod 600 server.key
        chmod 644 ca.pem
    ) >"$dir/tls.log" 2>&1 || { cat "$dir/tls.log" >&2; exit 1; }
    if [ "$(id -u)" = 0 ]; then chown -R postgres: "$dir/tls"; fi
    # Loopback only; the tests check locking, not durability, so the cluster skips fsync.
    cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 400
ssl = on
ssl_cert_file = '$dir/tls/server.pem'
ssl_key_file = '$dir/tls/server.key'
CONF
    # LOGINKIT_PG_EXTRA_CONF: more postgresql.conf lines, after these (the last setting wins); the
    # bench loads pg_stat_statements and allows more connections this way.
    if [ -n "${LOGINKIT_PG_EXTRA_CONF:-}" ]; then
        printf '%s\n' "$LOGINKIT_PG_EXTRA_CONF" >>"$dir/data/postgresql.conf"
    fi
    start "$dir"
    echo "$dir $port"
    ;;
stop)
    as_owner "$bindir/pg_ctl" -D "$2/data" -m fast -w -t 60 stop >/dev/null
    ;;
start)
    start "$2"
    ;;
freeze|thaw)
    # The postmaster (first line of postmaster.pid) and its children: the backends and helpers.
    postmaster=$(head -n 1 "$2/data/postmaster.pid")
    signal=$([ "$1" = freeze ] && echo STOP || echo CONT)
    kill -"$signal" "$postmaster"
    pkill -"$signal" -P "$postmaster" || true  # a child may have exited meanwhile
    ;;
destroy)
    # A frozen server (`freeze`) cannot be stopped: its signals stay pending.
    if [ -f "$2/data/postmaster.pid" ]; then
        postmaster=$(head -n 1 "$2/data/postmaster.pid")
        kill -CONT "$postmaster" 2>/dev/null || true
        pkill -CONT -P "$postmaster" 2>/dev/null || true
    fi
    as_owner "$bindir/pg_ctl" -D "$2/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
    rm -rf "$2"
    ;;
*)
    echo "usage: pg-cluster.sh create | stop DIR | start DIR | freeze DIR | thaw DIR | destroy DIR" >&2
    exit 2
    ;;
esac
