package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/archiver/notify"
	"github.com/worldbackup/worldbackup/jobapi"
)

// maxNotifySummary bounds the read of the termination log for the
// notification's reason.
const maxNotifySummary = 4096

// withNotify runs the Job subcommand kind (cmd, on args) and then, when
// its request asks for it (--notify-url-file, or felis.toml's [notify]
// url_file for the kinds that read a config), posts the outcome to the
// webhook: on failure (exit code not 0), or always. The notification is
// bounded (notify.DefaultTimeout) and never changes the exit code.
func withNotify(ctx context.Context, kind string, args []string, stderr io.Writer, cmd func() int) int {
	code := cmd()
	jc, ok := jobCommands()[kind]
	if !ok {
		return code
	}
	fs, req := jc.flags(io.Discard)
	if fs.Parse(args) != nil {
		return code // a usage error: the command said so
	}
	req.Parsed(fs)
	n, what, configPath := notifyOf(req)
	// Each flag overrides its own key of felis.toml's [notify] only.
	if onFlag := jobapi.Given(fs, jobapi.FlagNotifyOn); configPath != "" && (n.URLFile == "" || !onFlag) {
		if cfg, err := config.Load(configPath); err == nil {
			if n.URLFile == "" {
				n.URLFile = cfg.Notify.URLFile
			}
			if !onFlag && cfg.Notify.On != "" {
				n.On = jobapi.NotifyOn(cfg.Notify.On)
			}
		}
	}
	if n.URLFile == "" || (code == exitOK && n.On != jobapi.NotifyAlways) {
		return code
	}
	host, _ := os.Hostname()
	text := fmt.Sprintf("worldbackup: %s %s on %s", what, outcome(code), host)
	if reason := failureReason(fs); code != exitOK && reason != "" {
		text += ": " + reason
	}
	text = jobapi.MaskIdentitiesString(text)
	log := newLogger(logFormatOf(fs), stderr)
	// A run ended by SIGTERM (its deadline) still notifies, within the
	// bound: the pod has its grace period.
	notify.Send(context.WithoutCancel(ctx), log, notify.Options{URLFile: n.URLFile}, text)
	return code
}

// notifyOf returns the notification settings of req, what the run is (for
// the message) and its config file ("" for a kind that reads none).
func notifyOf(req jobRequest) (jobapi.Notify, string, string) {
	switch r := req.(type) {
	case *jobapi.Backup:
		return r.Notify, fmt.Sprintf("backup of %s (run %s)", r.Server, r.RunID), r.Config
	case *jobapi.Prune:
		return r.Notify, fmt.Sprintf("prune of %s", r.Server), r.Config
	case *jobapi.Restore:
		return r.Notify, fmt.Sprintf("restore into %s (run %s)", r.Into, r.RunID), ""
	case *jobapi.Verify:
		what := "verify of " + r.Archive
		if r.ArchiveFrom != "" {
			what = "verify of a recorded run"
			if rr, err := jobapi.ReadResolvedRun(r.ArchiveFrom); err == nil {
				what = fmt.Sprintf("verify of %s (run %s)", rr.ArchiveRef, rr.RunID)
			}
		}
		return r.Notify, what, ""
	}
	return jobapi.Notify{}, "", ""
}

func outcome(code int) string {
	switch code {
	case exitOK:
		return "succeeded"
	case exitRefused:
		return "FAILED: archive refused (exit 3)"
	case exitUsage:
		return "FAILED: usage or configuration error (exit 2)"
	}
	return fmt.Sprintf("FAILED (exit %d)", code)
}

// failureReason is the error of the run's termination summary, when the
// command wrote one (backup and prune do on failure).
func failureReason(fs *flag.FlagSet) string {
	f := fs.Lookup("termination-log")
	if f == nil || f.Value.String() == "" {
		return ""
	}
	file, err := os.Open(f.Value.String())
	if err != nil {
		return ""
	}
	defer file.Close()
	b, _ := io.ReadAll(io.LimitReader(file, maxNotifySummary))
	s, err := jobapi.ParseSummary(string(b))
	if err != nil {
		return ""
	}
	return s.Error
}

func logFormatOf(fs *flag.FlagSet) logFormat {
	if f := fs.Lookup(jobapi.FlagLogFormat); f != nil {
		return logFormat(f.Value.String())
	}
	return jobapi.LogAuto
}
