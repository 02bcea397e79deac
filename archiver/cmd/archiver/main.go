// Command archiver is the binary of the backup and restore Jobs: it archives
// a Minecraft world into the archive store and records the archive in the
// world_backups catalog, and restores a world from an archive (checked
// against its SHA-256, extracted safely, swapped into place; no database
// needed); it also applies the catalog's migrations, lists the recorded runs
// and verifies archives. Run `archiver --help` for the commands and the exit
// codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/mattn/go-isatty"

	"github.com/worldbackup/worldbackup/jobapi"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Exit codes, documented in usage and the README.
const (
	exitOK      = 0 // done, or the run was already recorded
	exitFailed  = 1 // the command failed; a retry may succeed
	exitUsage   = 2 // bad command line or configuration
	exitRefused = 3 // archive refused: checksum mismatch, tampered or malicious; a retry cannot help
)

const usage = `archiver archives a Minecraft world into a compressed tar file and records it
in the world_backups catalog (PostgreSQL), and restores a world from such an archive.

Usage:
  archiver backup --server S --run-id R [flags]  archive the world and record the run
  archiver migrate [flags]                       apply the catalog's schema migrations
  archiver list [--server S] [--limit N] [--json|--wide]
                                                 list the recorded runs and failed attempts, newest first
  archiver verify (--run-id R | --archive REF)   check an archive against its row
  archiver restore --archive REF --sha256 HEX --into DIR [--replace]
                                                 restore a world from an archive (no database)
  archiver resolve --server S --from-run (R | latest) [--out FILE]
                                                 find a run's archive and checksum in the catalog
  archiver export --archive REF --sha256 HEX     write a chunked run's tar stream to stdout (no database)
  archiver prune --server S --min-keep K [--keep-last N] [--keep-daily D] ...
                                                 expire old archives (restic's forget rules)
  archiver status --max-age 26h [--server S]...  exit 1 when a server's newest archive is older
  archiver retire --server S [--undo]            leave a server that left the fleet out of status and metrics
  archiver metrics [--listen :9090] [--cluster C] [--max-age 36h] [--server-max-age S=26h]...
                                                 serve the catalog's Prometheus metrics and status page
  archiver rekey --server S --encryption-key-file OLD --new-encryption-key-file NEW
                                                 rewrap a server's data key to a new identity
  archiver --version                             print the version

REF is an archive file's path or an S3 store's s3://bucket/key URL; for a
chunked run (backup --format chunked), its manifest's.
Run "archiver COMMAND --help" for the flags of a command.

Exit codes:
  0  done, or the run was already recorded (nothing written), or the world
     was already restored from this run and archive (restore --run-id)
  1  failed: the reason is logged (and, for backup, written to the termination
     log); a retry may succeed
  2  usage or configuration error: a bad flag, run ID, server name, felis.toml,
     a missing archive root, a world that is the archive root, or a restore
     --into that is not a folder; an S3 bucket that does not exist, refused
     S3 credentials or an unknown access key; an encryption key file that is
     missing, not a regular file or too large, a key that does not open the
     archive, an encrypted archive without --encryption-key-file
  3  archive refused (verify, restore, export): checksum or size mismatch, a
     malicious or corrupt entry, bytes after the end of the archive, a chunked
     run's damaged blob or missing pack; the log names the entry (or pack) and
     why, a restore leaves the world untouched; a retry cannot help
`

func main() {
	setSoftMemoryLimit()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// Whatever value a key was pasted into, no message shows it.
	stderr = identityMasker{stderr}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "backup":
		return withNotify(ctx, args[0], args[1:], stderr, func() int { return cmdBackup(ctx, args[1:], stdout, stderr) })
	case "migrate":
		return cmdMigrate(ctx, args[1:], stdout, stderr)
	case "list":
		return cmdList(ctx, args[1:], stdout, stderr)
	case "verify":
		return withNotify(ctx, args[0], args[1:], stderr, func() int { return cmdVerify(ctx, args[1:], stdout, stderr) })
	case "export":
		return cmdExport(ctx, args[1:], stdout, stderr)
	case "restore":
		return withNotify(ctx, args[0], args[1:], stderr, func() int { return cmdRestore(ctx, args[1:], stdout, stderr) })
	case jobapi.KindResolve:
		return cmdResolve(ctx, args[1:], stdout, stderr)
	case "rekey":
		return cmdRekey(ctx, args[1:], stdout, stderr)
	case "prune":
		return withNotify(ctx, args[0], args[1:], stderr, func() int { return cmdPrune(ctx, args[1:], stdout, stderr) })
	case "status":
		return cmdStatus(ctx, args[1:], stdout, stderr)
	case "retire":
		return cmdRetire(ctx, args[1:], stdout, stderr)
	case jobapi.KindMetrics:
		return cmdMetrics(ctx, args[1:], stdout, stderr)
	case jobapi.Flag("version"), "-version", "version":
		fmt.Fprintf(stdout, "archiver %s\n", version)
		return exitOK
	case jobapi.Flag("help"), "-help", "-h", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "archiver: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// newFlagSet returns a flag set for a command whose help text is help.
func newFlagSet(name, help string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("archiver "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprint(w, help, "\nFlags:\n")
		fs.VisitAll(func(f *flag.Flag) {
			typ, text := flag.UnquoteUsage(f)
			fmt.Fprintf(w, "  --%s %s\n    \t%s", f.Name, typ, text)
			if f.DefValue != "" && f.DefValue != "false" {
				fmt.Fprintf(w, " (default %q)", f.DefValue)
			}
			fmt.Fprintln(w)
		})
		fmt.Fprint(w, "\nExit codes: 0 done or already recorded, 1 failed, 2 usage or configuration error, 3 archive refused.\n")
	}
	return fs
}

// identityMasker writes to w with every age identity masked
// (jobapi.MaskIdentities): run gives it every command's stderr, where the
// flag package quotes a value it refuses, a parse error a stray argument,
// and an error or a log line a bad server name or path, any of which may
// be a key pasted where another value goes (--server=$KEY, a key given
// alone).
type identityMasker struct{ w io.Writer }

func (m identityMasker) Write(p []byte) (int, error) {
	if _, err := m.w.Write(jobapi.MaskIdentities(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// parseFlags parses args; it returns the exit code to stop with, or -1 to
// go on. --help prints the command's help to stdout and exits 0.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) int {
	for _, a := range args {
		if a == jobapi.EndOfFlags {
			break
		}
		if a == "-h" || a == "-help" || a == jobapi.Flag("help") {
			fs.SetOutput(stdout)
			fs.Usage()
			return exitOK
		}
	}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage // the flag package has printed the error and usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage
	}
	return -1
}

// usageError prints a usage error and returns exitUsage.
func usageError(stderr io.Writer, cmd string, format string, args ...any) int {
	fmt.Fprintf(stderr, "archiver %s: %s\n", cmd, fmt.Sprintf(format, args...))
	return exitUsage
}

// logFormat is the value of --log-format (jobapi's).
type logFormat = jobapi.LogFormat

// newLogger returns the process logger: JSON when asked, or with auto when
// stderr is not a terminal (in the pod).
func newLogger(format logFormat, stderr io.Writer) hclog.Logger {
	json := format == jobapi.LogJSON
	if format == jobapi.LogAuto || format == "" {
		json = true
		out := stderr
		if m, ok := out.(identityMasker); ok {
			out = m.w
		}
		if f, ok := out.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			json = false
		}
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       "archiver",
		Level:      hclog.Info,
		Output:     stderr,
		JSONFormat: json,
		Color:      hclog.ColorOff,
	})
}

// stringList is a repeatable string flag.
type stringList struct {
	values []string
	set    bool
}

func (l *stringList) String() string { return strings.Join(l.values, ",") }

func (l *stringList) Set(s string) error {
	l.values = append(l.values, s)
	l.set = true
	return nil
}
