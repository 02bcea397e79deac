#!/usr/bin/env bash
# make demo: builds what it needs, then performs one backup run with
# `pulumi up` (render mode) on a sample world, runs the rendered Job against
# the archiver and shows the rendered Job, the archive and the catalog row.
# Needs Go and PostgreSQL's server package (for initdb/pg_ctl when DATABASE_URL
# is unset and no server on 127.0.0.1:5432 lets the postgres user in without a
# password: scripts/lib/pg.sh). Scratch: .demo/ (as root, the private server's
# folder is /var/tmp/worldbackup-demo-pg when the postgres user cannot reach it).
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
  . scripts/lib/pg.sh
  if local_pg; then
    # A database of the demo's own on the local server, so its rows stay apart.
    psql -w -X -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'worldbackup_demo'" | grep -q 1 ||
      createdb -w -h 127.0.0.1 -U postgres worldbackup_demo
    export DATABASE_URL="postgres://postgres@127.0.0.1:5432/worldbackup_demo?sslmode=disable"
  else
    pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$pgbin" ] || { echo "demo: no DATABASE_URL, $local_pg_why, and no server package for a private one: install it (apt-get install postgresql) or set DATABASE_URL"; exit 2; }
    run=(); pg=$demo/pg
    if [ "$(id -u)" = 0 ]; then
      # PostgreSQL refuses to run as root: the server runs as the postgres
      # user, which cannot reach a checkout under a private home (/root is
      # 0700); then its folder is outside the checkout.
      run=(runuser -u postgres --)
      "${run[@]}" test -x "$demo" || pg=/var/tmp/worldbackup-demo-pg
    fi
    if [ ! -d "$pg/data" ]; then
      mkdir -p "$pg"; [ "$(id -u)" = 0 ] && chown postgres "$pg"
      "${run[@]}" "$pgbin/initdb" -D "$pg/data" -U postgres -A trust >/dev/null
    fi
    "${run[@]}" "$pgbin/pg_ctl" -D "$pg/data" -l "$pg/log" -w \
      -o "-p 54329 -c listen_addresses=127.0.0.1 -k $pg" status >/dev/null 2>&1 ||
    "${run[@]}" "$pgbin/pg_ctl" -D "$pg/data" -l "$pg/log" -w \
      -o "-p 54329 -c listen_addresses=127.0.0.1 -k $pg" start >/dev/null
    echo "demo: $local_pg_why; started a private PostgreSQL in $pg on 127.0.0.1:54329 (stop: ${run[*]} $pgbin/pg_ctl -D $pg/data stop)"
    export DATABASE_URL="postgres://postgres@127.0.0.1:54329/postgres?sslmode=disable"
  fi
fi

go run ./program/demo -dir "$demo" -archiver "$root/bin/archiver"
