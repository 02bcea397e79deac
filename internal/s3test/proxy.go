package s3test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy is a misbehaving S3 server: a real HTTP server on 127.0.0.1 in front
// of a Server, which forwards every request to it unless the test's Rule
// hands the request to an Action that misbehaves on purpose (answers 200
// and stores nothing, answers 500 after forwarding, cuts a body, sends an
// endless one, stalls...). Point a client at Endpoint instead of the
// Server's: the signature still holds, as the Host the client signed is
// forwarded.
type Proxy struct {
	Endpoint string

	upstream *url.URL
	rule     Rule
	done     chan struct{} // closed when the test ends: stalled actions return

	mu     sync.Mutex
	counts map[string]int
}

// Request is what a Rule decides on: the request, its S3 operation (see
// Operation) and its number among the requests of that operation, from 1.
type Request struct {
	Op   string
	N    int
	HTTP *http.Request
}

// Rule returns the Action for a request, or nil to forward it untouched.
type Rule func(r Request) Action

// On returns a rule that hands the requests of op to act (all of them
// when n is 0, else the n-th only).
func On(op string, n int, act Action) Rule {
	return func(r Request) Action {
		if r.Op == op && (n == 0 || r.N == n) {
			return act
		}
		return nil
	}
}

// Action answers a request in place of the server, or around it: p.Forward
// sends it on.
type Action func(p *Proxy, w http.ResponseWriter, r *http.Request)

// Proxy starts a misbehaving proxy in front of s for the test; rule decides
// which requests misbehave.
func (s *Server) Proxy(t testing.TB, rule Rule) *Proxy {
	t.Helper()
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{upstream: u, rule: rule, done: make(chan struct{}), counts: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(p.done) }) // runs first: stalled handlers return, Close does not wait on them
	p.Endpoint = srv.URL
	return p
}

// Count returns how many requests of operation op the proxy received.
func (p *Proxy) Count(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[op]
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	op := Operation(r)
	p.mu.Lock()
	p.counts[op]++
	n := p.counts[op]
	p.mu.Unlock()
	if act := p.rule(Request{Op: op, N: n, HTTP: r}); act != nil {
		act(p, w, r)
		return
	}
	p.Forward(w, r)
}

// RoundTrip sends r to the server and returns its answer, which the caller
// must close.
func (p *Proxy) RoundTrip(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.upstream.Scheme, p.upstream.Host
	out.Host = r.Host // what the client signed
	out.Header.Del("Connection")
	if r.ContentLength == 0 {
		out.Body = nil
	}
	return http.DefaultTransport.RoundTrip(out)
}

// Forward sends r to the server and copies its answer back.
func (p *Proxy) Forward(w http.ResponseWriter, r *http.Request) {
	resp, err := p.RoundTrip(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	copyHeader(w, resp)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func copyHeader(w http.ResponseWriter, resp *http.Response) {
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
}

// Operation names the S3 operation of a path-style request: PutObject,
// CopyObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload,
// AbortMultipartUpload, ListParts, ListMultipartUploads, GetObject,
// HeadObject, DeleteObject, ListObjectsV2, or the bucket's CreateBucket,
// HeadBucket, DeleteBucket, ListObjects; "Other" for the rest.
func Operation(r *http.Request) string {
	q := r.URL.Query()
	rest := strings.TrimPrefix(r.URL.Path, "/")
	_, key, _ := strings.Cut(rest, "/")
	has := func(k string) bool { _, ok := q[k]; return ok }
	switch {
	case key == "" && r.Method == http.MethodPut:
		return "CreateBucket"
	case key == "" && r.Method == http.MethodHead:
		return "HeadBucket"
	case key == "" && r.Method == http.MethodDelete:
		return "DeleteBucket"
	case key == "" && r.Method == http.MethodGet && has("uploads"):
		return "ListMultipartUploads"
	case key == "" && r.Method == http.MethodGet && q.Get("list-type") == "2":
		return "ListObjectsV2"
	case key == "" && r.Method == http.MethodGet:
		return "ListObjects"
	case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		return "CopyObject"
	case r.Method == http.MethodPut && has("uploadId"):
		return "UploadPart"
	case r.Method == http.MethodPut:
		return "PutObject"
	case r.Method == http.MethodPost && has("uploads"):
		return "CreateMultipartUpload"
	case r.Method == http.MethodPost && has("uploadId"):
		return "CompleteMultipartUpload"
	case r.Method == http.MethodDelete && has("uploadId"):
		return "AbortMultipartUpload"
	case r.Method == http.MethodDelete:
		return "DeleteObject"
	case r.Method == http.MethodGet && has("uploadId"):
		return "ListParts"
	case r.Method == http.MethodGet:
		return "GetObject"
	case r.Method == http.MethodHead:
		return "HeadObject"
	}
	return "Other"
}

// errorXML is an S3 error document.
func errorXML(code, message string) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, message)
}

// writeError answers status with an S3 error document.
func writeError(w http.ResponseWriter, status int, code string) {
	body := errorXML(code, "s3test proxy: "+code)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// Swallow reads the request's body, stores nothing and answers 200 as the
// server would have: an ETag, and the result document of
// CompleteMultipartUpload and CopyObject.
func Swallow(_ *Proxy, w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	const etag = `"00000000000000000000000000000000"`
	w.Header().Set("ETag", etag)
	var body string
	switch Operation(r) {
	case "CompleteMultipartUpload":
		body = `<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult><Location>x</Location>` +
			`<Key>` + strings.TrimPrefix(r.URL.Path, "/") + `</Key><ETag>` + etag + `-1</ETag></CompleteMultipartUploadResult>`
	case "CopyObject":
		body = `<?xml version="1.0" encoding="UTF-8"?><CopyObjectResult><ETag>` + etag + `</ETag></CopyObjectResult>`
	}
	if body != "" {
		w.Header().Set("Content-Type", "application/xml")
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, body)
}

// Fail answers status with an S3 error document of code, without
// forwarding the request.
func Fail(status int, code string) Action {
	return func(_ *Proxy, w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		writeError(w, status, code)
	}
}

// ForwardThenFail forwards the request (the server does what it asks) and
// answers status in place of the server's answer: a reply lost after the
// work was done.
func ForwardThenFail(status int) Action {
	return func(p *Proxy, w http.ResponseWriter, r *http.Request) {
		resp, err := p.RoundTrip(r)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		writeError(w, status, "InternalError")
	}
}

// HugeError answers status with an error document whose message is n bytes
// long, streamed (the proxy holds none of it); withLength sends its
// Content-Length, else it is chunked.
func HugeError(status int, n int64, withLength bool) Action {
	return func(_ *Proxy, w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		head := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>`
		tail := `</Message></Error>`
		w.Header().Set("Content-Type", "application/xml")
		if withLength {
			w.Header().Set("Content-Length", fmt.Sprint(int64(len(head)+len(tail))+n))
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, head)
		if _, err := io.Copy(w, io.LimitReader(repeatReader('x'), n)); err != nil {
			return // the client hung up
		}
		_, _ = io.WriteString(w, tail)
	}
}

// EndlessBody forwards the request and sends the server's answer without
// its Content-Length (chunked), then bytes without end, until the client
// hangs up.
func EndlessBody(p *Proxy, w http.ResponseWriter, r *http.Request) {
	resp, err := p.RoundTrip(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	copyHeader(w, resp)
	w.Header().Del("Content-Length")
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		return
	}
	_, _ = io.Copy(w, repeatReader(0))
}

// CutAfter forwards the request and sends the first n bytes of the
// server's answer's body, then breaks the connection.
func CutAfter(n int64) Action {
	return func(p *Proxy, w http.ResponseWriter, r *http.Request) {
		resp, err := p.RoundTrip(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		copyHeader(w, resp)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, n))
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler) // the server closes the connection
	}
}

// Stall neither reads the request nor answers it, until the client hangs
// up or the test ends.
func Stall(p *Proxy, _ http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-p.done:
	}
}

// repeatReader reads b without end.
type repeatReader byte

func (b repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// HugeList answers a list (ListObjectsV2) with a page of n keys under
// prefix, whatever max-keys asked, marked truncated: a server that does not
// honour max-keys.
func HugeList(prefix string, n int) Action {
	return func(_ *Proxy, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusOK)
		bw := bufio.NewWriterSize(w, 64<<10)
		defer bw.Flush()
		fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><KeyCount>%d</KeyCount><IsTruncated>true</IsTruncated><NextContinuationToken>more</NextContinuationToken>`, n)
		for i := range n {
			if _, err := fmt.Fprintf(bw, `<Contents><Key>%s%064d</Key><Size>1</Size><LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>`, prefix, i); err != nil {
				return // the client hung up
			}
		}
		_, _ = io.WriteString(bw, `</ListBucketResult>`)
	}
}

// Listing is how StuckListing's pages fail to advance.
type Listing int

const (
	// NoMarker: each page is marked truncated without a continuation
	// token or next markers.
	NoMarker Listing = iota
	// SameMarker: each page's next markers are those it was asked with
	// (the first request, asked with none, gets "next").
	SameMarker
	// Cycling: the pages alternate between two markers, each naming a
	// fresh one, and the third page is the first again (entries "a", "b",
	// "a", ...): the listing goes back.
	Cycling
	// Empty: every page names nothing, is marked truncated and names a
	// fresh marker.
	Empty
)

// StuckListing answers a list (ListObjectsV2 or ListMultipartUploads) with
// pages, marked truncated, under the request's prefix that do not advance,
// as mode says. A client that follows them lists forever.
func StuckListing(mode Listing) Action {
	return func(_ *Proxy, w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		esc := func(s string) string {
			var b strings.Builder
			_ = xml.EscapeText(&b, []byte(s))
			return b.String()
		}
		prefix := q.Get("prefix")
		// asked is the marker the request was asked with; entry what its
		// page names ("" for none) and next the marker it gives on.
		asked := q.Get("continuation-token")
		if Operation(r) == "ListMultipartUploads" {
			asked = q.Get("key-marker")
		}
		entry, next := "a", ""
		switch mode {
		case SameMarker:
			next = cmp.Or(asked, prefix+"next")
		case Cycling:
			if asked == prefix+"a" {
				entry = "b"
			}
			next = prefix + entry
		case Empty:
			entry, next = "", prefix+"empty"+strconv.Itoa(rand.IntN(1<<30))
		}
		var body string
		switch Operation(r) {
		case "ListObjectsV2":
			body = `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>` + esc(prefix) +
				`</Prefix><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>`
			if next != "" {
				body += `<NextContinuationToken>` + esc(next) + `</NextContinuationToken>`
			}
			if entry != "" {
				body += `<KeyCount>1</KeyCount><Contents><Key>` + esc(prefix+entry) + `</Key><Size>1</Size><LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>`
			}
			body += `</ListBucketResult>`
		case "ListMultipartUploads":
			body = `<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><Prefix>` + esc(prefix) +
				`</Prefix><IsTruncated>true</IsTruncated>`
			if next != "" {
				body += `<NextKeyMarker>` + esc(next) + `</NextKeyMarker><NextUploadIdMarker>` + esc(cmp.Or(q.Get("upload-id-marker"), "u1")) + `</NextUploadIdMarker>`
			}
			if entry != "" {
				body += `<Upload><Key>` + esc(prefix+entry) + `</Key><UploadId>u1</UploadId></Upload>`
			}
			body += `</ListMultipartUploadsResult>`
		default:
			writeError(w, http.StatusNotImplemented, "NotImplemented")
			return
		}
		body = `<?xml version="1.0" encoding="UTF-8"?>` + body
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, body)
	}
}

// Trickle has act answer the request (nil: forward it) and sends that
// answer one byte every every, a slowloris: each read of the client gets a
// byte well within any read timeout, and the answer takes as long as the
// server likes. With head the status line and headers trickle too (the
// connection is closed after the answer); otherwise they go at once and
// only the body trickles. It stops when the client hangs up or the test
// ends.
func Trickle(every time.Duration, head bool, act Action) Action {
	if act == nil {
		act = (*Proxy).Forward
	}
	return func(p *Proxy, w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		act(p, rec, r)
		body := rec.Body.Bytes()
		trickle := func(wr func([]byte) error, b []byte) {
			for i := range b {
				if wr(b[i:i+1]) != nil {
					return
				}
				select {
				case <-r.Context().Done():
					return
				case <-p.done:
					return
				case <-time.After(every):
				}
			}
		}
		if !head {
			for k, vs := range rec.Header() {
				w.Header()[k] = vs
			}
			w.WriteHeader(rec.Code)
			f := w.(http.Flusher)
			f.Flush()
			trickle(func(b []byte) error { _, err := w.Write(b); f.Flush(); return err }, body)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		var raw bytes.Buffer
		fmt.Fprintf(&raw, "HTTP/1.1 %03d %s\r\n", rec.Code, http.StatusText(rec.Code))
		h := rec.Header().Clone()
		if r.Method != http.MethodHead {
			h.Set("Content-Length", fmt.Sprint(len(body)))
		} // a HEAD's is the object's
		h.Set("Connection", "close")
		_ = h.Write(&raw)
		raw.WriteString("\r\n")
		if r.Method != http.MethodHead {
			raw.Write(body)
		}
		trickle(func(b []byte) error { _, err := conn.Write(b); return err }, raw.Bytes())
	}
}
