package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Role creates a login role with a random name and password on the server
// of dbURL (a database of URL), by running script(role, password,
// database) on dbURL as its user, and returns dbURL logging in as that
// role. At cleanup the role's privileges are revoked and the role dropped.
// Only the URL form of a connection string is accepted.
func Role(t testing.TB, dbURL string, script func(role, password, database string) string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		t.Fatalf("pgtest: Role needs a postgres:// URL (%s)", redact(dbURL))
	}
	role, password := "pgtest_role_"+randomHex(6), randomHex(12)
	database := u.Path[1:]
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	if err := adminExec(ctx, dbURL, script(role, password, database)); err != nil {
		t.Fatalf("pgtest: creating role %s: %v", role, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		id := pgx.Identifier{role}.Sanitize()
		if err := adminExec(ctx, dbURL, fmt.Sprintf("DROP OWNED BY %s; DROP ROLE %s", id, id)); err != nil {
			t.Errorf("pgtest: dropping role %s: %v", role, err)
		}
	})
	u.User = url.UserPassword(role, password)
	return u.String()
}
