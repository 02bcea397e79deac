package store

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// maxErrorBody bounds what is read of an S3 error answer's body: S3's error
// documents are a few hundred bytes. A longer one is cut, and its Code,
// Message and RequestId are kept in a short document of maxErrorField bytes
// each at most, so that neither memory nor the error's text (and the log
// line quoting it) grows with what the server sends.
const (
	maxErrorBody  = 4096
	maxErrorField = 512
)

// maxWholeBody bounds a successful answer the SDK reads whole into memory:
// a list page (WalkPage keys of at most 1024 bytes each, as asked with
// max-keys, is under 2 MiB of XML) or a multipart upload's answer. One that
// is larger comes from a server that does not honour max-keys; an object's
// body (GetObject) is streamed and is not bounded here.
const maxWholeBody = 16 << 20

// wholeAnswerTimeouts is how many read timeouts a request whose answer is
// read whole (see boundedInAll) may take in all, from its start to the end
// of its answer: each read waits at most one, so without a bound in all a
// server that trickles a byte now and then (a slowloris) would stretch the
// request to the Job's deadline. Three: one to send the request and begin
// answering, two more for the rest (AWS sends spaces to keep a long
// CompleteMultipartUpload or CopyObject alive: 15 minutes at the default).
const wholeAnswerTimeouts = 3

// newHTTPClient returns the S3 client's HTTP client: every connection fails
// a read that waits longer than readTimeout for data (a stall, which the
// SDK's retryer does not retry: see StallError); a request whose answer is
// read whole fails after wholeAnswerTimeouts read timeouts in all, however
// little the server sends at a time (see boundedInAll); and the body of
// every error answer is bounded in size (see maxErrorBody) and in time.
func newHTTPClient(readTimeout time.Duration) *boundedClient {
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		dial := tr.DialContext
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &idleConn{Conn: c, timeout: readTimeout}, nil
		}
	})
	return &boundedClient{next: hc, whole: wholeAnswerTimeouts * readTimeout}
}

// StallError is the error of a request whose connection delivered no data
// for the read timeout (S3Options.ReadTimeout): a server or a network that
// stopped answering; or, with Whole, of a request whose answer is read
// whole and took longer than Timeout in all (wholeAnswerTimeouts read
// timeouts), a server that answers a byte now and then. It is not retried,
// neither by the SDK nor by a reader of Open: the run fails after one
// timeout, not after one per attempt.
type StallError struct {
	Timeout time.Duration
	Whole   bool
}

func (e *StallError) Error() string {
	if e.Whole {
		return fmt.Sprintf("the S3 server's answer took longer than %v in all (%d read timeouts), however little it sent at a time: "+
			"it answers too slowly", e.Timeout, wholeAnswerTimeouts)
	}
	return fmt.Sprintf("the S3 server sent nothing for %v (read timeout): it stopped answering", e.Timeout)
}

// RetryableError tells the SDK's retryer not to retry a stall.
func (e *StallError) RetryableError() bool { return false }

// isStall reports whether err is a StallError.
func isStall(err error) bool {
	var se *StallError
	return errors.As(err, &se)
}

// idleConn fails a Read that waits longer than timeout for data with a
// StallError; once it has, its writes fail with it too (the transport may
// report the write that the closed connection broke rather than the read).
type idleConn struct {
	net.Conn
	timeout time.Duration
	stalled atomic.Bool
}

func (c *idleConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.stalled.Store(true)
		return n, &StallError{Timeout: c.timeout}
	}
	return n, err
}

func (c *idleConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && c.stalled.Load() {
		return n, &StallError{Timeout: c.timeout}
	}
	return n, err
}

// boundedClient bounds the body of every error answer (status 300 and up)
// to maxErrorBody bytes before the SDK reads it (it reads an error body
// whole into memory, and quotes its message), and that of a successful
// answer the SDK reads whole to maxWholeBody. It bounds the time of a
// request whose answer is read whole (boundedInAll), and of the reading of
// any error answer's body, to whole in all.
type boundedClient struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	whole time.Duration
}

func (c *boundedClient) Do(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	var timer *time.Timer
	bound := func() {
		timer = time.AfterFunc(c.whole, func() { cancel(&StallError{Timeout: c.whole, Whole: true}) })
	}
	done := func() {
		if timer != nil {
			timer.Stop()
		}
		cancel(nil)
	}
	if boundedInAll(r) {
		bound()
	}
	resp, err := c.next.Do(r.WithContext(ctx))
	if err != nil || resp.Body == nil {
		done()
		return resp, err
	}
	if resp.StatusCode < 300 {
		if readWhole(r) {
			resp.Body = &cappedBody{ReadCloser: resp.Body, left: maxWholeBody}
		}
		resp.Body = &doneBody{ReadCloser: resp.Body, done: done}
		return resp, nil
	}
	if timer == nil {
		bound() // an error answer's body is read whole, here
	}
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	resp.Body.Close() // what is left is not read: the connection is dropped
	done()
	if isStall(rerr) {
		return nil, rerr // not a server's error answer to retry: a server that stalls
	}
	if rerr == nil && len(b) <= maxErrorBody {
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return resp, nil
	}
	resp.Body = io.NopCloser(strings.NewReader(shortError(b)))
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

// readWhole reports whether the SDK reads the answer to r whole: every
// answer but an object's body (a GET of a key without a list's query).
func readWhole(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return true
	}
	q := r.URL.Query()
	return q.Has("list-type") || q.Has("uploads") || q.Has("uploadId") || q.Has("delimiter") || q.Has("prefix")
}

// boundedInAll reports whether the request r is bounded in all (to
// wholeAnswerTimeouts read timeouts): one whose answer is read whole (a
// HEAD, a list page, creating, completing or aborting an upload, the copy,
// a DELETE), but an upload's (PutObject, UploadPart), which the server
// answers only once the part is sent, however long that takes: it and an
// object's body keep the bound of each read only.
func boundedInAll(r *http.Request) bool {
	if r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") == "" {
		return false
	}
	return readWhole(r)
}

// doneBody calls done once its body is read to its end or closed: the
// request has ended (done may be called more than once).
type doneBody struct {
	io.ReadCloser
	done func()
}

func (b *doneBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done()
	}
	return n, err
}

func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// cappedBody fails a read past its last left bytes.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the S3 server's answer is over %d bytes, more than a list page asked with max-keys "+
			"(a server that does not honour it)", maxWholeBody)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// shortError rebuilds the S3 error document whose first bytes are b (the
// rest was cut) from its Code, Message and RequestId, each cut to
// maxErrorField bytes.
func shortError(b []byte) string {
	fields := map[string]string{}
	d := xml.NewDecoder(bytes.NewReader(b))
	var open string
	for {
		tok, err := d.RawToken()
		if err != nil {
			break // the end of what was read: a cut document ends mid-element
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			open = tok.Name.Local
		case xml.EndElement:
			open = ""
		case xml.CharData:
			switch open {
			case "Code", "Message", "RequestId":
				if _, ok := fields[open]; !ok {
					fields[open] = cut(string(tok), maxErrorField)
				}
			}
		}
	}
	msg := fields["Message"]
	if msg != "" {
		msg += " "
	}
	msg += fmt.Sprintf("(the server's error answer was longer than %d bytes; the rest was not read)", maxErrorBody)
	var out strings.Builder
	out.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Error>`)
	for _, f := range []struct{ name, value string }{{"Code", fields["Code"]}, {"Message", msg}, {"RequestId", fields["RequestId"]}} {
		if f.value == "" {
			continue
		}
		out.WriteString("<" + f.name + ">")
		_ = xml.EscapeText(&out, []byte(f.value))
		out.WriteString("</" + f.name + ">")
	}
	out.WriteString("</Error>")
	return out.String()
}

// cut shortens s to at most n bytes, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
