package jobapi

import (
	"errors"
	"flag"
)

// The notification of a Job's run: the archiver posts its outcome to the
// webhook whose URL is the file URLFile (a Secret key the Job mounts at
// NotifyMountPath/NotifyURLFile), on failure or always. The URL is never
// an argument: only the file's path is.
const (
	FlagNotifyURLFile = "notify-url-file"
	FlagNotifyOn      = "notify-on"

	NotifyMountPath = "/etc/felis-notify"
	NotifyURLFile   = "url"
)

// NotifyOn says when a run notifies.
type NotifyOn string

// When to notify.
const (
	NotifyFailure NotifyOn = "failure" // failed runs only (the default)
	NotifyAlways  NotifyOn = "always"  // every run, failed or not
)

func (o *NotifyOn) String() string { return string(*o) }

// Set implements flag.Value.
func (o *NotifyOn) Set(s string) error {
	switch NotifyOn(s) {
	case NotifyFailure, NotifyAlways:
		*o = NotifyOn(s)
		return nil
	}
	return errors.New("want failure or always")
}

// Notify is the notification part of a Job's request; URLFile "" = none
// (then felis.toml's [notify] decides, for the Jobs that read it).
type Notify struct {
	URLFile string
	On      NotifyOn // "" = NotifyFailure
}

func (n Notify) withDefaults() Notify {
	if n.On == "" {
		n.On = NotifyFailure
	}
	return n
}

func (n Notify) args(a *args) {
	if n.URLFile == "" {
		return
	}
	a.always(FlagNotifyURLFile, n.URLFile)
	a.str(FlagNotifyOn, string(n.On))
}

// Bind registers the notification flags on fs, storing into n.
func (n *Notify) Bind(fs *flag.FlagSet) {
	if n.On == "" {
		n.On = NotifyFailure
	}
	fs.StringVar(&n.URLFile, FlagNotifyURLFile, "", "file holding a Slack- or Discord-compatible webhook URL (a mounted Secret key): post the run's outcome there, within a few seconds, never failing the run; overrides [notify] url_file")
	fs.Var(&n.On, FlagNotifyOn, "when to notify: failure or always; overrides [notify] on")
}
