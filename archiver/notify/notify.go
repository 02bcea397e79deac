// Package notify posts a run's outcome to a webhook: one JSON object that
// Slack's incoming webhooks ("text") and Discord's webhooks ("content") both
// accept. The URL is read from a file (a mounted Secret's key), never from
// a flag or the environment, and never logged: log lines name the hook by
// jobapi.RedactHookURL. A notification is bounded in time (Options.Timeout
// for the whole attempt: file read, connection, request and response) and
// in size (the message, the URL file, the response read), and it never
// fails the run: Send logs what went wrong and returns.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/secretfile"
	"github.com/worldbackup/worldbackup/jobapi"
)

// Limits of one notification.
const (
	// DefaultTimeout bounds the whole attempt.
	DefaultTimeout = 5 * time.Second
	// MaxText is the longest message text in bytes: within Discord's 2000
	// characters of content (Slack takes far more).
	MaxText = 1800
	// maxURLFile bounds the read of the URL file.
	maxURLFile = 4096
	// maxResponse bounds what is read of the hook's answer.
	maxResponse = 4096
)

// Options say where and how to notify.
type Options struct {
	URLFile string        // the file holding the webhook URL (a Secret key)
	Timeout time.Duration // 0 = DefaultTimeout
	// Client is the HTTP client; nil: one without proxies from the
	// environment, its own timeout Timeout.
	Client *http.Client
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Client == nil {
		o.Client = &http.Client{
			Timeout:   o.Timeout,
			Transport: newTransport(),
			// No redirects: a hook that redirects elsewhere is not followed
			// with the message.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return o
}

// newTransport returns http.DefaultTransport's settings without its proxy
// from the environment (HTTP_PROXY, HTTPS_PROXY): the hook is posted to
// directly.
func newTransport() *http.Transport {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return &http.Transport{}
	}
	t = t.Clone()
	t.Proxy = nil
	return t
}

// Payload is the JSON body: the same text under Slack's and Discord's keys.
type Payload struct {
	Text    string `json:"text"`
	Content string `json:"content"`
}

// NewPayload returns the body of text, cut to MaxText bytes (at a rune
// boundary, with an ellipsis).
func NewPayload(text string) Payload {
	if len(text) > MaxText {
		cut := MaxText - len("…")
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	return Payload{Text: text, Content: text}
}

// Send posts text to the hook of o.URLFile, within o.Timeout. It returns
// whether the hook answered 2xx; every failure is logged (the URL
// redacted) and none is returned: a notification never fails a run.
func Send(ctx context.Context, log hclog.Logger, o Options, text string) bool {
	o = o.withDefaults()
	log = log.Named("notify")
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	hook, err := readURL(o.URLFile)
	if err != nil {
		log.Warn("notification not sent: the webhook URL file is unusable", "url_file", o.URLFile, "error", err)
		return false
	}
	shown := jobapi.RedactHookURL(hook)
	body, _ := json.Marshal(NewPayload(text)) // strings only: cannot fail
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook, bytes.NewReader(body))
	if err != nil {
		log.Warn("notification not sent: bad webhook URL", "hook", shown)
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := o.Client.Do(req)
	if err != nil {
		log.Warn("notification failed: the webhook did not answer", "hook", shown, "timeout", o.Timeout.String(),
			"error", describeErr(err, hook))
		return false
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse)) //nolint:errcheck // drained for reuse only
	if resp.StatusCode/100 != 2 {
		log.Warn("notification refused by the webhook", "hook", shown, "status", resp.StatusCode)
		return false
	}
	log.Info("notification sent", "hook", shown, "status", resp.StatusCode, "duration", time.Since(start).String())
	return true
}

// readURL reads and checks the webhook URL file (a mounted Secret's key,
// read by secretfile's rule: a regular file, opened without blocking, at
// most maxURLFile bytes): one http(s) URL with a host, surrounding white
// space trimmed. Its errors never quote the file's content.
func readURL(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("no file given")
	}
	b, err := secretfile.Read(name, maxURLFile)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.ContainsAny(s, " \n\r\t") {
		return "", fmt.Errorf("not an http(s) URL with a host, e.g. https://hooks.slack.com/services/... or https://discord.com/api/webhooks/...")
	}
	return s, nil
}

// describeErr returns what went wrong with the request to hook, never
// quoting the hook: net/http's *url.Error quotes the URL, rewritten
// (userinfo as ***, the scheme lower-cased) so that no replacement of the
// original spelling finds it; only its inner error is kept (the log line
// names the hook by its redacted form). Any part of the hook that the
// inner error might still hold (userinfo, path, query, fragment, in their
// escaped and unescaped spellings) is replaced as well.
func describeErr(err error, hook string) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	s := err.Error()
	var parts []string
	if u, perr := url.Parse(hook); perr == nil {
		if u.User != nil {
			parts = append(parts, u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				parts = append(parts, p)
			}
		}
		parts = append(parts, u.RawQuery, u.Fragment, u.RawFragment, u.EscapedPath(), u.Path)
		if q, qerr := url.QueryUnescape(u.RawQuery); qerr == nil {
			parts = append(parts, q)
		}
		for _, vs := range u.Query() {
			parts = append(parts, vs...)
		}
	}
	for _, v := range append([]string{hook, url.QueryEscape(hook)}, parts...) {
		// Short parts ("/", a one-letter key) would garble the message
		// without hiding a secret.
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "<redacted>")
		}
	}
	return s
}
