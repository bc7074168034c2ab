#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: its own cluster in a temporary folder, listening
# only on a Unix socket in that folder (no TCP port), stopped and deleted by `stop`.
#   scripts/pg-throwaway.sh start DIR   creates DIR (must not exist), starts the server, prints the
#                                       libpq connection string the tests take (EXPCTL_TEST_POSTGRES)
#   scripts/pg-throwaway.sh stop DIR    stops the server (immediate) and removes DIR
#   scripts/pg-throwaway.sh pg_ctl DIR ARGS...   runs pg_ctl on the cluster (fault tests stop/start it)
# EXPCTL_PG_TLS_PORT=PORT (start): the server also listens on 127.0.0.1:PORT with TLS on (a
# self-signed certificate made here) and takes TCP logins only over TLS (hostssl, no plain host
# line); `start` then prints the TCP connection string (the TLS fault tests use it).
# initdb refuses to run as root, so as root the cluster belongs to the `postgres` user (Debian's
# postgresql package creates it). Authentication: trust for everyone on the socket except the role
# `expctl_pw`, which must give the password "right" (the tests of a wrong password use it).
set -euo pipefail

bin="${EXPCTL_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}"
if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
  echo "pg-throwaway.sh: PostgreSQL's server programs are missing (apt-get install postgresql)" >&2
  exit 2
fi

as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

command="${1:-}"
dir="${2:-}"
[[ -n "$command" && -n "$dir" ]] || { echo "usage: pg-throwaway.sh start|stop|pg_ctl DIR [ARGS]" >&2; exit 2; }

case "$command" in
  start)
    [[ ! -e "$dir" ]] || { echo "pg-throwaway.sh: $dir exists already" >&2; exit 2; }
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [[ $(id -u) -ne 0 ]] || chown postgres: "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    tls_port="${EXPCTL_PG_TLS_PORT:-}"
    {
      echo "local all expctl_pw scram-sha-256"
      echo "local all all trust"
      [[ -z "$tls_port" ]] || echo "hostssl all all 127.0.0.1/32 trust"
    } >"$dir/data/pg_hba.conf"
    # In the configuration file, so that `pg_ctl DIR start` after a stop needs no options.
    # fsync stays on: the benchmarks measure what a real server does.
    {
      echo "listen_addresses = '${tls_port:+127.0.0.1}'"
      echo "unix_socket_directories = '$dir'"
      echo "max_connections = 200"
    } >>"$dir/data/postgresql.conf"
    if [[ -n "$tls_port" ]]; then
      as_owner openssl req -new -x509 -days 2 -nodes -subj "/CN=127.0.0.1" -keyout "$dir/data/server.key" \
        -out "$dir/data/server.crt" >/dev/null 2>&1
      chmod 600 "$dir/data/server.key"
      printf "port = %s\nssl = on\n" "$tls_port" >>"$dir/data/postgresql.conf"
    fi
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
    as_owner "$bin/psql" -h "$dir" -p "${tls_port:-5432}" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 \
      -c "CREATE ROLE expctl_pw LOGIN PASSWORD 'right' SUPERUSER" >/dev/null
    if [[ -n "$tls_port" ]]; then
      echo "host=127.0.0.1 port=$tls_port user=postgres dbname=postgres"
    else
      echo "host=$dir port=5432 user=postgres dbname=postgres"
    fi
    ;;
  stop)
    if [[ -f "$dir/data/postmaster.pid" ]]; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  pg_ctl)
    shift 2
    as_owner "$bin/pg_ctl" -D "$dir/data" "$@"
    ;;
  *)
    echo "usage: pg-throwaway.sh start|stop|pg_ctl DIR [ARGS]" >&2
    exit 2
    ;;
esac
