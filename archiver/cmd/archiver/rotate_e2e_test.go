package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/s3test"
)

// TestRotateDatabaseCredentials is README's "Rotating the S3 and database
// credentials" for the catalog: the archiver reads felis.toml (the config
// Secret's file) at the start of each run, so after the password changes in
// PostgreSQL a run with the old file fails (nothing recorded) and the next
// run with the updated file succeeds; nothing else changes (same
// arguments, the Job spec's).
func TestRotateDatabaseCredentials(t *testing.T) {
	s := pgtest.NewPrivate(t)
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var hba, db string
	if err := admin.QueryRow(ctx, "SELECT current_setting('hba_file'), current_database()").Scan(&hba, &db); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, []byte("host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const oldPw, newPw = "Old-Pw-1", "New-Pw-2"
	exec := func(q string) {
		t.Helper()
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("SET password_encryption = 'scram-sha-256'")
	exec("CREATE ROLE felis LOGIN PASSWORD '" + oldPw + "'")
	exec(`ALTER DATABASE "` + db + `" OWNER TO felis`)
	exec("GRANT ALL ON SCHEMA public TO felis")
	exec("SELECT pg_reload_conf()")
	cfg, err := pgx.ParseConfig(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	url := func(pw string) string {
		return fmt.Sprintf("postgres://felis:%s@%s:%d/%s?sslmode=disable", pw, cfg.Host, cfg.Port, cfg.Database)
	}

	e := newEnv(t, url(oldPw))
	if err := os.MkdirAll(filepath.Join(e.world, "world"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.world, "world", "level.dat"), []byte("level"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := archiver(t, e.backupArgs("before-rotation")...); res.code != 0 {
		t.Fatalf("backup with the first password exited %d:\n%s", res.code, res.stderr)
	}
	exec("ALTER ROLE felis PASSWORD '" + newPw + "'")
	res := archiver(t, e.backupArgs("after-rotation")...)
	if res.code == 0 || !strings.Contains(res.stderr, "password authentication failed") || strings.Contains(res.stderr, oldPw) {
		t.Fatalf("a run with the old file: exit %d, want a refused password that is not logged:\n%s", res.code, res.stderr)
	}
	// The Secret update: the same file, the new password.
	writeConfig(t, e.config, fmt.Sprintf("[database]\nurl = %q\n[archive]\nlocal_path = \"/nonexistent\"\n", url(newPw)))
	if res := archiver(t, e.backupArgs("after-rotation")...); res.code != 0 {
		t.Fatalf("the next run with the updated file exited %d:\n%s", res.code, res.stderr)
	}
	var runs []string
	for _, r := range rows(t, s.URL()) {
		runs = append(runs, r.RunID)
	}
	if strings.Join(runs, ",") != "before-rotation,after-rotation" {
		t.Fatalf("recorded runs %q, want both", runs)
	}
}

// TestRotateS3Credentials is README's "Rotating the S3 and database
// credentials" for the store: the archiver reads the key files (the S3
// credentials Secret's) at the start of each run, so once the store has a
// new key a run with the old files fails with exit 2 naming the
// credentials and records nothing, and the next run with the updated files
// (the same paths, as a Secret update leaves them) succeeds; the archives
// written under the old key stay restorable with the new one.
func TestRotateS3Credentials(t *testing.T) {
	e := newS3Env(t)
	if err := os.MkdirAll(filepath.Join(e.world, "world"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.world, "world", "level.dat"), []byte("before"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := archiver(t, e.args("before-rotation")...); res.code != 0 {
		t.Fatalf("backup with the first key exited %d:\n%s", res.code, res.stderr)
	}
	const newAccess, newSecret = "rotated-access-key", "rotated-secret-key-9876543210"
	e.srv.RestartAs(t, newAccess, newSecret)

	res := archiver(t, e.args("after-rotation")...)
	if res.code != exitUsage || !strings.Contains(strings.ToLower(res.stderr), "credentials") || strings.Contains(res.stderr, s3test.SecretKey) {
		t.Fatalf("a run with the old key files: exit %d, want %d naming the credentials, the key not logged:\n%s", res.code, exitUsage, res.stderr)
	}
	// The store's folder, read directly: the old client key is refused now.
	object := func(runID string) string { return filepath.Join(e.srv.Root, e.bucket, e.key(runID)) }
	if _, err := os.Stat(object("after-rotation")); !os.IsNotExist(err) {
		t.Fatalf("a refused run left an object (%v)", err)
	}
	// The Secret update: the same files, the new key.
	writeConfig(t, e.accessFile, newAccess+"\n")
	writeConfig(t, e.secretFile, newSecret+"\n")
	if res := archiver(t, e.args("after-rotation")...); res.code != 0 {
		t.Fatalf("the next run with the updated files exited %d:\n%s", res.code, res.stderr)
	}
	var runs []string
	for _, r := range rows(t, e.url) {
		runs = append(runs, r.RunID)
	}
	if strings.Join(runs, ",") != "before-rotation,after-rotation" {
		t.Fatalf("recorded runs %q, want both", runs)
	}
	into := t.TempDir()
	restore := append([]string{"restore", "--archive", e.ref("before-rotation"), "--sha256", sha256sum(t, object("before-rotation")),
		"--into", into, "--replace"}, e.s3Flags()...)
	if res := archiver(t, restore...); res.code != 0 {
		t.Fatalf("restoring the run written under the old key exited %d:\n%s", res.code, res.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(into, "world", "level.dat")); err != nil || string(b) != "before" {
		t.Fatalf("restored level.dat %q, %v", b, err)
	}
}
