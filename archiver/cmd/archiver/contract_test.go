package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// request is a Job's request as both halves see it.
type request interface {
	Kind() string
	Args() []string
}

// parseRequest parses args (a Job's container arguments, the subcommand
// first) with the archiver's own flag set of that subcommand and returns
// the request it filled.
func parseRequest(t *testing.T, args []string) any {
	t.Helper()
	cmd, ok := jobCommands()[args[0]]
	if !ok {
		t.Fatalf("no Job subcommand %q", args[0])
	}
	fs, got := cmd.flags(io.Discard)
	if code := parseFlags(fs, args[1:], io.Discard); code != -1 {
		t.Fatalf("the archiver's parser refused %q: exit %d", args, code)
	}
	got.Parsed(fs)
	return reflect.ValueOf(got).Elem().Interface()
}

// withDefaults returns req.WithDefaults(): the request as the archiver sees
// it, its flags left out at their defaults.
func withDefaults(t *testing.T, req request) any {
	t.Helper()
	m := reflect.ValueOf(req).MethodByName("WithDefaults")
	if !m.IsValid() {
		t.Fatalf("%T has no WithDefaults", req)
	}
	return m.Call(nil)[0].Interface()
}

// TestContractRoundTrip shows that every Job kind's request reaches the
// archiver unchanged: the request a component renders (jobspec) encodes to
// the container's arguments, which the archiver's real flag parser turns
// back into an equal request (the flags left out at the archiver's
// defaults). A flag one side renames, drops or parses differently fails it.
func TestContractRoundTrip(t *testing.T) {
	job := jobspec.Job{Server: "survival", RunID: "2025-06-01T0300Z", Namespace: "minecraft", WorldRoot: "/world", BackupRoot: "/backups"}
	store := &jobspec.S3Store{URL: "s3://felis-backups/worlds", Endpoint: "http://minio.storage:9000", Region: "eu-west-1",
		PathStyle: true, SecretName: "felis-s3", AccessKeyKey: "ak", SecretKeyKey: "sk"}
	retention := &jobspec.Retention{KeepLast: 1, KeepHourly: 2, KeepDaily: 7, KeepWeekly: 4, KeepMonthly: 12, KeepYearly: 3,
		KeepWithin: "1w3d12h", MinKeep: 3, Grace: "90m"}
	tests := []struct {
		name string
		req  request
		want any
	}{
		{name: "backup, folder store, defaults", req: jobspec.Backup{Job: job, ConfigMountPath: "/etc/felis", Compression: "zstd"}.Request()},
		{name: "backup, everything", req: jobspec.Backup{Job: job, FormerOwner: "Älice <a@example.org>", ConfigMountPath: "/etc/felis",
			Compression: "gzip", Excludes: []string{"*.jar", "logs/"}, Store: store,
			Rcon:      &jobspec.Rcon{Address: "survival:25575", SecretName: "survival-rcon", SecretKey: "rcon-password"},
			Retention: retention}.Request()},
		{name: "backup, rcon optional, empty exclude list", req: jobspec.Backup{Job: job, ConfigMountPath: "/c", Compression: "none",
			Excludes: []string{}, Rcon: &jobspec.Rcon{Address: "mc:1", SecretKey: "k", Required: false},
			Retention: &jobspec.Retention{KeepWithin: "30d", MinKeep: 1}}.Request()},
		{name: "backup by hand", req: jobapi.Backup{Server: "s", RunID: "r", LogFormat: jobapi.LogText}},
		{name: "backup under a cap: it waits for a slot", req: func() jobapi.Backup {
			r := jobspec.Backup{Job: job, ConfigMountPath: "/etc/felis", Compression: "zstd"}.Request()
			r.Concurrency, r.ConcurrencyGroup = 10, "context eu-1"
			return r
		}()},
		{name: "restore, folder store", req: jobspec.Restore{Job: job, ArchiveRef: "/backups/survival/r.tar.zst",
			SHA256: strings.Repeat("ab", 32)}.Request()},
		{name: "restore, S3, every bound", req: jobspec.Restore{Job: job, ArchiveRef: "s3://felis-backups/worlds/survival/r.tar.gz",
			SHA256: strings.Repeat("0f", 32), Replace: true, MaxBytes: 1 << 30, MaxEntries: 5000, Store: store}.Request()},
		{name: "verify, folder store", req: jobspec.Verify{Job: job, ArchiveRef: "/backups/survival/r.tar.zst",
			SHA256: strings.Repeat("ab", 32)}.Request()},
		{name: "verify, S3, chunk sample", req: jobspec.Verify{Job: job, ArchiveRef: "s3://felis-backups/worlds/survival/r.tar.gz",
			SHA256: strings.Repeat("0f", 32), Chunks: "10%", Store: store}.Request()},
		{name: "verify by hand", req: jobapi.Verify{Archive: "/b/s/r.tar", SHA256: strings.Repeat("1", 64), LogFormat: jobapi.LogText}},
		{name: "verify with a webhook, every outcome", req: func() jobapi.Verify {
			j := job
			j.Notify = &jobspec.Notify{SecretName: "felis-notify", Key: "url", Always: true}
			return jobspec.Verify{Job: j, ArchiveRef: "/backups/survival/r.tar.zst", SHA256: strings.Repeat("ab", 32)}.Request()
		}()},
		{name: "restore by run, folder store", req: byRun(jobspec.Restore{Job: job}, "latest").Request()},
		{name: "restore by run: its resolve, folder store", req: byRun(jobspec.Restore{Job: job}, "latest").ResolveRequest()},
		{name: "restore by run: its resolve, S3, another server", req: func() jobspec.Restore {
			r := byRun(jobspec.Restore{Job: job, Store: store}, "2025-06-01T0300Z")
			r.FromServer = "lobby"
			return r
		}().ResolveRequest()},
		{name: "resolve by hand", req: jobapi.Resolve{Server: "s", FromRun: "latest"}},
		{name: "verify by run, encrypted", req: jobspec.Verify{Job: job, ByRun: byRun(jobspec.Restore{}, "latest").ByRun,
			Encryption: &jobspec.Encryption{SecretName: "k", SecretKey: "age"}}.Request()},
		{name: "verify by run: its resolve, S3", req: jobspec.Verify{Job: job, ByRun: byRun(jobspec.Restore{}, "r7").ByRun, Store: store}.ByRun.ResolveRequest(job.Server, job.Namespace, job.BackupRoot, store)},
		{name: "prune, folder store", req: jobspec.Prune{Job: job, ConfigMountPath: "/etc/felis",
			Retention: jobspec.Retention{KeepDaily: 7, MinKeep: 3}}.Request()},
		{name: "prune, S3, dry run", req: jobspec.Prune{Job: job, ConfigMountPath: "/etc/felis", Store: store,
			Retention: *retention, DryRun: true}.Request()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.req.Args()
			if args[0] != tc.req.Kind() {
				t.Fatalf("args %q do not start with the subcommand %q", args, tc.req.Kind())
			}
			got := parseRequest(t, args)
			if want := withDefaults(t, tc.req); !reflect.DeepEqual(got, want) {
				t.Errorf("args %q\nparsed: %+v\nwant:   %+v", args, got, want)
			}
		})
	}
}

// byRun returns r restoring run from of its server (the restore by run).
func byRun(r jobspec.Restore, from string) jobspec.Restore {
	r.FromRun, r.ConfigSecretName, r.ConfigMountPath = from, "felis-config", "/etc/felis"
	return r
}

// TestSubcommandFlags shows that each Job subcommand's flags are exactly
// the contract's (what jobapi binds) plus its local flags, which a Job never
// passes and archiver/README.md documents.
func TestSubcommandFlags(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := func(fs *flag.FlagSet) []string {
		var n []string
		fs.VisitAll(func(f *flag.Flag) { n = append(n, f.Name) })
		return n
	}
	bound := func(bind func(*flag.FlagSet)) []string {
		fs := flag.NewFlagSet("contract", flag.ContinueOnError)
		bind(fs)
		return names(fs)
	}
	cmds := jobCommands()
	for _, kind := range append(jobapi.Kinds(), jobapi.KindResolve) {
		t.Run(kind, func(t *testing.T) {
			cmd, ok := cmds[kind]
			if !ok {
				t.Fatalf("the Job kind %s has no subcommand in jobCommands", kind)
			}
			real, _ := cmd.flags(io.Discard)
			_, fresh := cmd.flags(io.Discard) // a request of its own: Bind writes into it
			want := append(bound(fresh.Bind), cmd.local...)
			slices.Sort(want)
			if got := names(real); !slices.Equal(got, want) {
				t.Errorf("archiver %s flags = %q\nwant the contract's plus the local %q = %q", kind, got, cmd.local, want)
			}
			for _, l := range cmd.local {
				if !regexp.MustCompile(`(?m)^archiver ` + kind + `(.*\n {8,}.*)*` + regexp.QuoteMeta(jobapi.Flag(l)) + `\b`).Match(readme) {
					t.Errorf("the local flag %s of archiver %s is not in the synopsis of archiver/README.md", jobapi.Flag(l), kind)
				}
			}
		})
	}
}

// TestNoFlagLiterals shows that the flag names of the Jobs have one owner:
// no source file of the components or of the archiver's commands spells a
// flag as a string literal; they use jobapi's names.
func TestNoFlagLiterals(t *testing.T) {
	var bad []string
	for _, root := range []string{".", filepath.Join("..", "..", "..", "provider")} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, `"--`) {
					bad = append(bad, path+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(bad) > 0 {
		t.Errorf("flag literals outside jobapi (use jobapi.Flag and its names):\n%s", strings.Join(bad, "\n"))
	}
}
