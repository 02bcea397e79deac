#!/usr/bin/env bash
# make demo: builds what it needs, then performs one backup run with
# `pulumi up` (render mode) on a sample world, runs the rendered Job against
# the archiver and shows the rendered Job, the archive and the catalog row.
# Needs Go and PostgreSQL's server package (for initdb/pg_ctl when no server
# answers on 127.0.0.1:5432 and DATABASE_URL is unset). Scratch: .demo/
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh
export GOFLAGS=-buildvcs=false
demo=$root/.demo
mkdir -p "$demo"

scripts/doctor.sh demo
scripts/tools.sh
echo "demo: building the archiver"
go build -o bin/archiver ./archiver/cmd/archiver

if [ -z "${DATABASE_URL:-}" ]; then
  if command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432 -t 3; then
    # A database of the demo's own on the local server, so its rows stay apart.
    psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'worldbackup_demo'" | grep -q 1 ||
      createdb -h 127.0.0.1 -U postgres worldbackup_demo
    export DATABASE_URL="postgres://postgres@127.0.0.1:5432/worldbackup_demo?sslmode=disable"
  else
    pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$pgbin" ] || { echo "demo: no PostgreSQL: set DATABASE_URL, or install the server (apt-get install postgresql)"; exit 2; }
    run=(); [ "$(id -u)" = 0 ] && run=(runuser -u postgres --)
    if [ ! -d "$demo/pg/data" ]; then
      mkdir -p "$demo/pg"; [ "$(id -u)" = 0 ] && chown postgres "$demo/pg"
      "${run[@]}" "$pgbin/initdb" -D "$demo/pg/data" -U postgres -A trust >/dev/null
    fi
    "${run[@]}" "$pgbin/pg_ctl" -D "$demo/pg/data" -l "$demo/pg/log" -w \
      -o "-p 54329 -c listen_addresses=127.0.0.1 -k $demo/pg" status >/dev/null 2>&1 ||
    "${run[@]}" "$pgbin/pg_ctl" -D "$demo/pg/data" -l "$demo/pg/log" -w \
      -o "-p 54329 -c listen_addresses=127.0.0.1 -k $demo/pg" start >/dev/null
    echo "demo: started a private PostgreSQL in .demo/pg on 127.0.0.1:54329 (stop: pg_ctl -D .demo/pg/data stop)"
    export DATABASE_URL="postgres://postgres@127.0.0.1:54329/postgres?sslmode=disable"
  fi
fi

go run ./program/demo -dir "$demo" -archiver "$root/bin/archiver"
