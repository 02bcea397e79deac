# Sourced by doctor.sh, test.sh and demo.sh: one rule for when the local
# PostgreSQL server is the one to use.
#
# local_pg succeeds when a server on 127.0.0.1:5432 lets the postgres user in
# without a password (a trust rule for host connections, or a password in
# PGPASSWORD or ~/.pgpass, which pgx reads too). A server that answers but asks
# for a password is not enough: the cluster Debian's postgresql package creates
# asks for one over TCP (scram-sha-256), and every catalog test would fail.
# Otherwise local_pg_why says what was found, for a message.
local_pg() {
  local_pg_why=""
  if ! command -v pg_isready >/dev/null || ! pg_isready -q -h 127.0.0.1 -p 5432 -t 3; then
    local_pg_why="no server answers on 127.0.0.1:5432"
    return 1
  fi
  if ! command -v psql >/dev/null; then
    local_pg_why="a server answers on 127.0.0.1:5432, but psql is missing to try it (apt-get install postgresql-client)"
    return 1
  fi
  local err
  # -w: never prompt; the first line of psql's error says why.
  if err=$(PGCONNECT_TIMEOUT=5 psql -w -X -q -h 127.0.0.1 -p 5432 -U postgres -d postgres -tAc 'SELECT 1' 2>&1 >/dev/null); then
    return 0
  fi
  local_pg_why="a server answers on 127.0.0.1:5432 but does not let the postgres user in without a password (${err%%$'\n'*}); to use it, set DATABASE_URL to a URL with its password"
  return 1
}
