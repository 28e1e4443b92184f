#!/usr/bin/env bash
# A throwaway PostgreSQL 16 server with pgvector, for the tests and benches of the
# `postgres` feature. Nothing but a package fetched by name: the PyPI wheel `pgserver`
# 0.1.4 bundles PostgreSQL 16.2 and pgvector 0.6.2; its SHA-256 is checked before use.
#
#   scripts/postgres.sh start DIR [PID]  start a server in DIR (created; must not exist or be
#                                        empty) and print its connection string, which is also
#                                        written to DIR/url. With PID, the server stops by
#                                        itself once that process has exited.
#   scripts/postgres.sh stop DIR         stop it and remove DIR.
#   scripts/postgres.sh halt DIR         stop it abruptly, keeping its data (a crash, for the
#                                        connection-loss tests);
#   scripts/postgres.sh resume DIR       start it again on the same data and socket.
#
# The server listens on a unix socket in DIR only (no TCP port), trusts local connections,
# and runs without fsync: it is for tests, never for data. Commits still write the WAL
# before they are acknowledged, so a crash of the server (not of the machine) loses
# nothing acknowledged, which the connection-loss tests check. initdb and pg_ctl refuse to run
# as root, so as root the script runs them as the system user `memlane-pg`, created here.
set -euo pipefail

WHEEL_VERSION=0.1.4
WHEEL_SHA256=d595789b47624a3d963aa9aa6359da9be31beb7e61f1a45541953242068b8813
PG_USER=memlane-pg

if [ "$(id -u)" = 0 ]; then
  CACHE=${MEMLANE_PG_CACHE:-/var/cache/memlane}
else
  CACHE=${MEMLANE_PG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memlane}
fi
INSTALL="$CACHE/pgserver-$WHEEL_VERSION"
BIN="$INSTALL/pgserver/pginstall/bin"

die() { echo "postgres.sh: $*" >&2; exit 1; }

# Runs a command as the server's user: ourselves, or `memlane-pg` when we are root.
as_server() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$PG_USER" -- "$@"
  else
    "$@"
  fi
}

install() {
  [ -x "$BIN/pg_ctl" ] && return 0
  local tmp
  tmp=$(mktemp -d)
  # The exact wheel, whatever this machine's Python: the binaries inside need no Python.
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 \
    --platform manylinux2014_x86_64 -d "$tmp" "pgserver==$WHEEL_VERSION" >&2 \
    || die "could not fetch the PyPI package pgserver==$WHEEL_VERSION (is PyPI reachable?)"
  local wheel
  wheel=$(ls "$tmp"/pgserver-*.whl)
  echo "$WHEEL_SHA256  $wheel" | sha256sum --check --quiet \
    || die "pgserver-$WHEEL_VERSION's SHA-256 differs from the pinned one; not using it"
  mkdir -p "$CACHE"
  rm -rf "$INSTALL.part"
  python3 -m zipfile -e "$wheel" "$INSTALL.part"
  # Zip archives do not keep the executable bit.
  chmod -R a+rX "$INSTALL.part"
  chmod a+x "$INSTALL.part"/pgserver/pginstall/bin/*
  mv "$INSTALL.part" "$INSTALL"
  rm -rf "$tmp"
}

ensure_user() {
  [ "$(id -u)" = 0 ] || return 0
  id "$PG_USER" >/dev/null 2>&1 && return 0
  useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER" 2>/dev/null \
    || id "$PG_USER" >/dev/null 2>&1 \
    || die "could not create the system user $PG_USER to run PostgreSQL as"
}

run_server() {
  local dir=$1
  as_server "$BIN/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" --wait --silent \
    -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=off \
        -c full_page_writes=off -c max_connections=200 \
        -c shared_buffers=256MB -c maintenance_work_mem=512MB" start \
    || { cat "$dir/server.log" >&2; die "the server did not start"; }
}

start() {
  local dir=$1 parent=${2:-}
  install
  ensure_user
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
  if [ "$(id -u)" = 0 ]; then
    chown "$PG_USER" "$dir"
    # The socket lives in DIR: every directory above it must let the server's user through.
    local up=$dir
    while [ "$up" != / ]; do
      up=$(dirname "$up")
      chmod o+x "$up" 2>/dev/null || true
    done
  fi
  as_server "$BIN/initdb" --pgdata="$dir/data" --username=postgres --auth=trust \
    --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  run_server "$dir"
  echo "host=$dir user=postgres dbname=postgres" >"$dir/url"
  if [ -n "$parent" ]; then
    # A watchdog: stops the server once the process that asked for it has gone, however it
    # ended (a test binary has no destructor to run at exit).
    nohup bash -c "while kill -0 $parent 2>/dev/null; do sleep 1; done; '$(cd "$(dirname "$0")" && pwd)/$(basename "$0")' stop '$dir'" \
      >/dev/null 2>&1 &
  fi
  cat "$dir/url"
}

stop() {
  local dir=$1
  [ -d "$dir/data" ] && as_server "$BIN/pg_ctl" --pgdata="$dir/data" --mode=immediate \
    --wait --silent stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

halt() {
  as_server "$BIN/pg_ctl" --pgdata="$1/data" --mode=immediate --wait --silent stop \
    || die "could not stop the server in $1"
}

case "${1:-}" in
  halt) [ $# -ge 2 ] || die "usage: $0 halt DIR"; halt "$2" ;;
  resume) [ $# -ge 2 ] || die "usage: $0 resume DIR"; run_server "$2" ;;
  start) [ $# -ge 2 ] || die "usage: $0 start DIR [PID]"; start "$2" "${3:-}" ;;
  stop) [ $# -ge 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
  *) die "usage: $0 start DIR [PID] | stop DIR | halt DIR | resume DIR" ;;
esac
