package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/internal/s3test"
)

// TestS3PutMisbehavingServer: a Put through a server that lies about its
// writes (answers success and stores nothing, or stores and answers
// failure), stalls or answers with a huge error, fails, and leaves neither
// an object nor an open upload; a stall is not retried; a huge error body
// costs little memory and a short error.
func TestS3PutMisbehavingServer(t *testing.T) {
	srv := s3test.New(t)
	small := payload(1 << 20)                    // one part: a single PutObject
	large := payload(2*store.MinPartSize + 4321) // three parts: multipart, completed, copied
	for _, tc := range []struct {
		name string
		rule s3test.Rule
		data []byte
		want string // in the error
		// timeout is the store's read timeout; 0: the default.
		timeout time.Duration
		// check, when set, checks more of the outcome.
		check func(t *testing.T, p *s3test.Proxy, err error)
	}{
		{name: "PutObject answered 200, nothing stored", rule: s3test.On("PutObject", 0, s3test.Swallow), data: small,
			want: "stored nothing"},
		{name: "PutObject stored, answered 500", rule: s3test.On("PutObject", 0, s3test.ForwardThenFail(500)), data: small,
			want: "writing"},
		{name: "CompleteMultipartUpload answered 200, not done", rule: s3test.On("CompleteMultipartUpload", 0, s3test.Swallow), data: large,
			want: "recording the SHA-256"},
		{name: "CompleteMultipartUpload done, answered 500", rule: s3test.On("CompleteMultipartUpload", 0, s3test.ForwardThenFail(500)), data: large,
			want: "completing the upload"},
		{name: "CopyObject answered 200, not done", rule: s3test.On("CopyObject", 0, s3test.Swallow), data: large,
			want: "x-amz-meta-sha256"},
		{name: "CopyObject finds no source", rule: s3test.On("CopyObject", 0, s3test.Fail(404, "NoSuchKey")), data: large,
			want: "found no object at its source", check: func(t *testing.T, _ *s3test.Proxy, err error) {
				if errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "file does not exist") {
					t.Errorf("a failed metadata copy says the archive does not exist: %v", err)
				}
			}},
		{name: "HeadObject says another size", rule: s3test.On("HeadObject", 0, func(p *s3test.Proxy, w http.ResponseWriter, r *http.Request) {
			resp, err := p.RoundTrip(r)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Length", "7")
			w.WriteHeader(resp.StatusCode)
		}), data: small, want: "the object has 7 bytes"},
		{name: "HeadObject refused (a key without s3:GetObject)", rule: s3test.On("HeadObject", 0, s3test.Fail(403, "AccessDenied")), data: small,
			want: "Forbidden", check: func(t *testing.T, _ *s3test.Proxy, err error) {
				if !errors.Is(err, store.ErrDenied) {
					t.Errorf("error %v does not wrap ErrDenied", err)
				}
			}},
		{name: "UploadPart stalls", rule: s3test.On("UploadPart", 0, s3test.Stall), data: large, want: "read timeout", timeout: 2 * time.Second,
			check: func(t *testing.T, p *s3test.Proxy, err error) {
				var se *store.StallError
				if !errors.As(err, &se) {
					t.Errorf("error %v is not a StallError", err)
				}
				// Each attempt waits the read timeout: one, not three.
				if n := p.Count("UploadPart"); n != 1 {
					t.Errorf("the stalled part was sent %d times, want once", n)
				}
			}},
		{name: "200 MB error body", rule: s3test.On("PutObject", 0, s3test.HugeError(400, 200<<20, true)), data: small, want: "InternalError"},
		{name: "200 MB error body, chunked", rule: s3test.On("PutObject", 0, s3test.HugeError(400, 200<<20, false)), data: small, want: "InternalError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := srv.Proxy(t, tc.rule)
			bucket := srv.NewBucket(t)
			s, err := store.NewS3(store.S3Options{URL: "s3://" + bucket + "/pre", Endpoint: p.Endpoint, Region: s3test.Region, PathStyle: true,
				AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, PartSize: store.MinPartSize, ReadTimeout: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err = s.Put(t.Context(), "srv/run.tar.zst", func(w io.Writer) error { _, err := w.Write(tc.data); return err })
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("Put succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if len(err.Error()) > 2048 {
				t.Errorf("the error is %d bytes long", len(err.Error()))
			}
			// Allocated in all, whatever the server sent: the archive,
			// its part buffers, the SDK's requests.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("the Put allocated %d MiB", alloc>>20)
			} else {
				t.Logf("the Put allocated %.1f MiB; error: %v", float64(alloc)/(1<<20), err)
			}
			if tc.check != nil {
				tc.check(t, p, err)
			}
			if _, err := srv.Client().HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("pre/srv/run.tar.zst")}); err == nil {
				t.Error("an object is left under the key")
			}
			if up := srv.Uploads(t, bucket); len(up) != 0 {
				t.Errorf("uploads left open: %v", up)
			}
		})
	}
}

// TestS3OpenMisbehavingServer: a reader of Open reads the object's size
// and no more from a server that sends an endless body, and fails (it never
// returns a short object as whole) on a body cut whose resumes are refused.
func TestS3OpenMisbehavingServer(t *testing.T) {
	srv := s3test.New(t)
	bucket := srv.NewBucket(t)
	direct := s3At(t, srv.Endpoint, bucket)
	data := payload(3 << 20)
	if _, err := direct.Put(t.Context(), "srv/run.tar.zst", func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		rule    s3test.Rule
		wantErr string // "": reads the object whole
	}{
		{name: "endless body without a length", rule: s3test.On("GetObject", 0, s3test.EndlessBody)},
		{name: "cut, then resumed", rule: s3test.On("GetObject", 1, s3test.CutAfter(1<<20))},
		{name: "cut, resumes answered 503", rule: func(r s3test.Request) s3test.Action {
			switch {
			case r.Op != "GetObject":
				return nil
			case r.N == 1:
				return s3test.CutAfter(1 << 20)
			default:
				return s3test.Fail(503, "SlowDown")
			}
		}, wantErr: "SlowDown"},
		{name: "huge error body", rule: s3test.On("GetObject", 0, s3test.HugeError(400, 200<<20, false)), wantErr: "InternalError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := srv.Proxy(t, tc.rule)
			s := s3At(t, p.Endpoint, bucket)
			var got []byte
			r, err := s.Open(t.Context(), "srv/run.tar.zst")
			if err == nil {
				// Bounded here too: before the fix the endless body never ends.
				got, err = io.ReadAll(io.LimitReader(r, int64(len(data))+1<<20))
				r.Close()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("reading: %v", err)
			case tc.wantErr == "" && !bytes.Equal(got, data):
				t.Fatalf("read %d bytes, want the object's %d", len(got), len(data))
			case tc.wantErr != "" && err == nil:
				t.Fatalf("read %d bytes without an error, want one saying %q", len(got), tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not say %q", err, tc.wantErr)
			case err != nil && errors.Is(err, fs.ErrNotExist):
				t.Fatalf("error %q says the object does not exist", err)
			case err != nil && len(err.Error()) > 2048:
				t.Fatalf("the error is %d bytes long", len(err.Error()))
			}
		})
	}
}

// payload returns n bytes that do not repeat within a part.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131 + i>>17)
	}
	return b
}

// TestS3WalkHugeListPage: a server that ignores max-keys and answers a
// list with a page of 500,000 keys (about 80 MB of XML) fails the walk
// saying so, instead of the SDK holding the whole page (a prune's memory
// would grow with what the server sends).
func TestS3WalkHugeListPage(t *testing.T) {
	srv := s3test.New(t)
	bucket := srv.NewBucket(t)
	p := srv.Proxy(t, s3test.On("ListObjectsV2", 0, s3test.HugeList("_chunked/packs/aa/", 500_000)))
	s := s3At(t, p.Endpoint, bucket)
	var keys int
	err := s.Walk(t.Context(), "_chunked/packs", func(page []store.Object) error { keys += len(page); return nil })
	if err == nil || !strings.Contains(err.Error(), "does not honour") {
		t.Fatalf("Walk = %v after %d keys, want an error saying the server does not honour max-keys", err, keys)
	}
}

// TestS3ListingThatDoesNotAdvance: a server whose list pages are marked
// truncated but do not advance fails the listing, saying so, and hands no
// page twice: following it, List, Walk, CleanTemps and Holds would list
// forever (Walk handing the same pages to fn each time), or List end early
// with what it had. The pages may not say where the next one starts (no
// continuation token or next markers, or those the request was asked
// with: found at the first or second request), cycle between two markers
// (the third page goes back: found there), or name nothing, each with a
// fresh marker (found after maxStalledPages).
func TestS3ListingThatDoesNotAdvance(t *testing.T) {
	srv := s3test.New(t)
	bucket := srv.NewBucket(t)
	calls := []struct {
		name string
		op   string // the listing's S3 operation
		call func(ctx context.Context, s *store.S3, pages *int) error
	}{
		{"List", "ListObjectsV2", func(ctx context.Context, s *store.S3, _ *int) error {
			_, err := s.List(ctx, "srv")
			return err
		}},
		{"Walk", "ListObjectsV2", func(ctx context.Context, s *store.S3, pages *int) error {
			return s.Walk(ctx, "_chunked/packs", func(page []store.Object) error {
				if len(page) > 0 {
					*pages++
				}
				return nil
			})
		}},
		{"CleanTemps", "ListMultipartUploads", func(ctx context.Context, s *store.S3, _ *int) error {
			_, err := s.CleanTemps(ctx, "srv/run.tar.zst")
			return err
		}},
		{"Holds", "ListMultipartUploads", func(ctx context.Context, s *store.S3, _ *int) error {
			_, err := s.Holds(ctx, "srv/run.tar.zst")
			return err
		}},
	}
	modes := []struct {
		name     string
		mode     s3test.Listing
		requests int // at most
		pages    int // handed to Walk's fn, at most
	}{
		{"no next marker", s3test.NoMarker, 2, 1},
		{"the same marker again", s3test.SameMarker, 2, 1},
		{"cycling between two markers", s3test.Cycling, 3, 2},
		{"empty pages, each with a fresh marker", s3test.Empty, 1001, 0},
	}
	for _, c := range calls {
		for _, m := range modes {
			t.Run(c.name+"/"+m.name, func(t *testing.T) {
				p := srv.Proxy(t, s3test.On(c.op, 0, s3test.StuckListing(m.mode)))
				s := s3At(t, p.Endpoint, bucket)
				// Bounded here too: before the fix the listing never ends.
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
				defer cancel()
				var pages int
				err := c.call(ctx, s, &pages)
				if err == nil || !strings.Contains(err.Error(), "listing does not advance") {
					t.Fatalf("%s = %v after %d list requests, want an error saying the listing does not advance", c.name, err, p.Count(c.op))
				}
				if n := p.Count(c.op); n > m.requests {
					t.Errorf("%d list requests, want at most %d", n, m.requests)
				}
				if pages > m.pages {
					t.Errorf("Walk handed %d pages with entries, want at most %d", pages, m.pages)
				}
			})
		}
	}
}

// TestS3SlowAnswer: a server that answers a byte every half read timeout
// (a slowloris: no single read waits a read timeout) fails a request whose
// answer is read whole (a list page, a HEAD, an error answer's body) within
// three read timeouts in all, not retried; an object's body is bounded per
// read only, so one that trickles is read whole.
func TestS3SlowAnswer(t *testing.T) {
	const (
		readTimeout = time.Second
		every       = readTimeout / 2
		// within is a generous margin over the bound of 3 read timeouts;
		// the answers below would take minutes.
		within = 20 * time.Second
	)
	srv := s3test.New(t)
	bucket := srv.NewBucket(t)
	direct := s3At(t, srv.Endpoint, bucket)
	object := []byte("8 bytes!")
	if _, err := direct.Put(t.Context(), "srv/run.tar.zst", func(w io.Writer) error { _, err := w.Write(object); return err }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		op   string
		act  s3test.Action
		call func(ctx context.Context, s *store.S3) error
		ok   bool // read whole, however slowly
	}{
		{name: "a list page", op: "ListObjectsV2", act: s3test.Trickle(every, true, nil),
			call: func(ctx context.Context, s *store.S3) error { _, err := s.List(ctx, "srv"); return err }},
		{name: "a HEAD", op: "HeadObject", act: s3test.Trickle(every, true, nil),
			call: func(ctx context.Context, s *store.S3) error { _, err := s.Holds(ctx, "srv/run.tar.zst"); return err }},
		{name: "an upload's error answer, its body", op: "PutObject", act: s3test.Trickle(every, false, s3test.Fail(500, "InternalError")),
			call: func(ctx context.Context, s *store.S3) error {
				_, err := s.Put(ctx, "srv/other.tar.zst", func(w io.Writer) error { _, err := w.Write(object); return err })
				return err
			}},
		{name: "an object's body", op: "GetObject", act: s3test.Trickle(every, false, nil), ok: true,
			call: func(ctx context.Context, s *store.S3) error {
				r, err := s.Open(ctx, "srv/run.tar.zst")
				if err != nil {
					return err
				}
				defer r.Close()
				got, err := io.ReadAll(r)
				if err == nil && !bytes.Equal(got, object) {
					err = fmt.Errorf("read %q, want %q", got, object)
				}
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := srv.Proxy(t, s3test.On(tc.op, 0, tc.act))
			s, err := store.NewS3(store.S3Options{URL: "s3://" + bucket, Endpoint: p.Endpoint, Region: s3test.Region, PathStyle: true,
				AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, PartSize: store.MinPartSize, ReadTimeout: readTimeout})
			if err != nil {
				t.Fatal(err)
			}
			// Bounded here too: before the fix the answers take minutes.
			ctx, cancel := context.WithTimeout(t.Context(), 2*within)
			defer cancel()
			start := time.Now()
			err = tc.call(ctx, s)
			took := time.Since(start)
			if tc.ok {
				if err != nil {
					t.Fatalf("after %v: %v; want the object read whole, however slowly", took, err)
				}
				return
			}
			var se *store.StallError
			if !errors.As(err, &se) || !se.Whole {
				t.Fatalf("after %v: %v; want a StallError of the whole answer", took, err)
			}
			if took > within {
				t.Errorf("failed after %v: want well within %v", took, within)
			}
			if n := p.Count(tc.op); n != 1 {
				t.Errorf("%d %s requests: want 1, not retried", n, tc.op)
			}
		})
	}
}

// TestS3ListingsAcrossPages: the checks that a listing advances
// (TestS3ListingThatDoesNotAdvance) pass a real server's listings of
// several pages: List over more keys and folders (common prefixes) than
// one page holds, Walk over more keys than WalkPage, and CleanTemps over
// more unfinished uploads of one key than one page of uploads holds.
func TestS3ListingsAcrossPages(t *testing.T) {
	srv := s3test.New(t)
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	c := srv.Client()
	const keys, folders, uploads = 700, 700, 1100
	put := func(key string) {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
			Body: bytes.NewReader([]byte("x"))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range keys {
		put(fmt.Sprintf("srv/run-%04d.tar.zst", i))
	}
	for i := range folders {
		put(fmt.Sprintf("srv/f%04d/inner", i))
	}
	for range uploads {
		if _, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket),
			Key: aws.String("srv/run-0000.tar.zst.tmp")}); err != nil {
			t.Fatal(err)
		}
	}
	s := s3At(t, srv.Endpoint, bucket)
	listed, err := s.List(ctx, "srv")
	if err != nil || len(listed) != keys {
		t.Errorf("List = %d objects, %v; want %d", len(listed), err, keys)
	}
	var walked, pages int
	err = s.Walk(ctx, "srv", func(page []store.Object) error { walked += len(page); pages++; return nil })
	if err != nil || walked != keys+folders || pages < 2 {
		t.Errorf("Walk = %d objects in %d pages, %v; want %d in at least 2", walked, pages, err, keys+folders)
	}
	removed, err := s.CleanTemps(ctx, "srv/run-0000.tar.zst.tmp")
	if err != nil || len(removed) != uploads {
		t.Errorf("CleanTemps removed %d uploads, %v; want %d", len(removed), err, uploads)
	}
}

// TestS3CleanTempsAbortIgnored: a server that answers an abort with
// success and keeps the upload lists it again when CleanTemps lists anew
// after aborting a page (as one whose listing lags behind may): CleanTemps
// passes it over and ends, having aborted it once, instead of aborting it
// forever.
func TestS3CleanTempsAbortIgnored(t *testing.T) {
	srv := s3test.New(t)
	bucket := srv.NewBucket(t)
	if _, err := srv.Client().CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket),
		Key: aws.String("srv/run.tar.zst")}); err != nil {
		t.Fatal(err)
	}
	p := srv.Proxy(t, s3test.On("AbortMultipartUpload", 0, s3test.Swallow))
	s := s3At(t, p.Endpoint, bucket)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	removed, err := s.CleanTemps(ctx, "srv/run.tar.zst")
	if err != nil || len(removed) != 1 {
		t.Fatalf("CleanTemps = %q, %v; want the one upload, no error", removed, err)
	}
	if n := p.Count("AbortMultipartUpload"); n != 1 {
		t.Errorf("%d aborts, want 1", n)
	}
	if n := p.Count("ListMultipartUploads"); n != 2 {
		t.Errorf("%d listings, want 2 (again after the abort)", n)
	}
}

// s3At is a store over bucket at the S3 server at endpoint (versitygw, or
// a proxy in front of it), with the test server's credentials.
func s3At(t *testing.T, endpoint, bucket string) *store.S3 {
	t.Helper()
	s, err := store.NewS3(store.S3Options{URL: "s3://" + bucket, Endpoint: endpoint, Region: s3test.Region, PathStyle: true,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
