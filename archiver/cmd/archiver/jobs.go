package main

import (
	"flag"
	"io"

	"github.com/worldbackup/worldbackup/jobapi"
)

// jobRequest is a Job kind's request (package jobapi) as the archiver binds
// it to a subcommand's flag set.
type jobRequest interface {
	Kind() string
	Args() []string
	Bind(fs *flag.FlagSet)
	Parsed(fs *flag.FlagSet)
}

// jobCommand is the subcommand a Job kind runs: its flag set, bound to the
// kind's request, and its local flags (a run by hand's, never the Job's).
type jobCommand struct {
	flags func(stderr io.Writer) (*flag.FlagSet, jobRequest)
	local []string
}

// jobCommands are the subcommands the Jobs' containers run, by kind. A new kind adds
// its entry; the contract tests take every entry.
func jobCommands() map[string]jobCommand {
	return map[string]jobCommand{
		jobapi.KindBackup: {func(w io.Writer) (*flag.FlagSet, jobRequest) {
			fs, f := newBackupFlags(w)
			return fs, &f.Backup
		}, backupLocalFlags()},
		jobapi.KindRestore: {func(w io.Writer) (*flag.FlagSet, jobRequest) {
			fs, f := newRestoreFlags(w)
			return fs, &f.Restore
		}, restoreLocalFlags()},
		jobapi.KindPrune: {func(w io.Writer) (*flag.FlagSet, jobRequest) {
			fs, f := newPruneFlags(w)
			return fs, &f.Prune
		}, pruneLocalFlags()},
		jobapi.KindVerify: {func(w io.Writer) (*flag.FlagSet, jobRequest) {
			fs, f := newVerifyFlags(w)
			return fs, &f.Verify
		}, verifyLocalFlags()},
		// Not a Job kind: the restore Job's init container (restore by run).
		jobapi.KindResolve: {func(w io.Writer) (*flag.FlagSet, jobRequest) {
			return newResolveFlags(w)
		}, nil},
	}
}
