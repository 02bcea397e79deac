package jobapi

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// The rules of the settings the archiver reads from felis.toml and its
// flags and the components take as inputs: an RCON address, an S3 endpoint
// and region. Both sides call these, so that a component refuses at preview
// what the archiver would refuse at run time. Their errors say what is
// wrong and what to write; they never quote a URL's userinfo.

// CheckRconAddress reports whether addr is host:port with a port of 1 to
// 65535, e.g. "survival:25575".
func CheckRconAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("%q: want host:port, e.g. survival:25575", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from 1 to 65535", addr)
	}
	if strings.ContainsAny(host, " \t\r\n/?#@") {
		return fmt.Errorf("%q: the host %q is not a host name or IP address", addr, host)
	}
	return nil
}

// ErrEndpointCredentials is CheckS3Endpoint's error for an endpoint with a
// user name or password in it.
var ErrEndpointCredentials = errors.New("has credentials in it: remove them; the keys belong in the credentials files (a mounted Secret)")

// CheckS3Endpoint reports whether endpoint is an S3 server's base URL,
// http(s)://host[:port] with at most a "/" path and no query, fragment or
// userinfo. Its errors quote the endpoint with RedactURL.
func CheckS3Endpoint(endpoint string) error {
	if strings.Contains(endpoint, "@") {
		return ErrEndpointCredentials // user:secret@host, however the secret parses
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || strings.Contains(endpoint, "#") {
		return fmt.Errorf("%q: want http(s)://host[:port] (no path, query or fragment), e.g. https://minio.example:9000", RedactURL(endpoint))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: the port must be a number from 1 to 65535", RedactURL(endpoint))
		}
	}
	return nil
}

// MaxRegionLen bounds an S3 region name.
const MaxRegionLen = 64

// CheckS3Region reports whether region is a region name: 1 to 64 letters,
// digits, '-' and '_', e.g. us-east-1.
func CheckS3Region(region string) error {
	ok := region != "" && len(region) <= MaxRegionLen
	for _, r := range region {
		if !(r == '-' || r == '_' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("%q is not a region name: use letters, digits and '-', e.g. us-east-1", region)
	}
	return nil
}

// RedactURL returns s with the userinfo of the URL it holds (user:secret@)
// replaced by "<redacted>@", so that it can be printed. Everything between
// the scheme and the last '@' goes: a secret may hold '/', '?' or '#', which
// would end the authority for a URL parser. An endpoint has no path, so
// nothing else is lost.
func RedactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		scheme, rest = "", s
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	out := "<redacted>@" + rest[at+1:]
	if ok {
		out = scheme + "://" + out
	}
	return out
}

// RedactHookURL returns the webhook URL s as it may be logged: its scheme
// and host only (a Slack or Discord hook's secret is its path, and
// RedactURL's userinfo rule applies too), e.g. "https://hooks.slack.com/<redacted>".
func RedactHookURL(s string) string {
	s = RedactURL(s)
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return "<redacted>"
	}
	host, _, _ := strings.Cut(rest, "/")
	host, _, _ = strings.Cut(host, "?")
	host, _, _ = strings.Cut(host, "#")
	return scheme + "://" + host + "/<redacted>"
}
