package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/archiver/store/storetest"
	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/s3test"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var _ storetest.Store = (*store.S3)(nil)

// newS3 returns an S3 store on a fresh bucket of srv, locked through a
// catalog on a fresh database.
func newS3(t *testing.T, srv *s3test.Server, locker store.Locker, prefix string, partSize int64) (*store.S3, string) {
	t.Helper()
	bucket := srv.NewBucket(t)
	u := "s3://" + bucket
	if prefix != "" {
		u += "/" + prefix
	}
	s, err := store.NewS3(store.S3Options{
		URL: u, Endpoint: srv.Endpoint, Region: s3test.Region, PathStyle: true,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, PartSize: partSize, Locker: locker,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, bucket
}

// testLocker returns the catalog's archive lock on a fresh database.
func testLocker(t *testing.T) store.Locker {
	t.Helper()
	db, err := catalog.Open(t.Context(), pgtest.URL(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return lockerFunc(db.LockArchive)
}

type lockerFunc func(ctx context.Context, name string) (func(), error)

func (f lockerFunc) Lock(ctx context.Context, name string) (func(), error) { return f(ctx, name) }

func TestS3Conformance(t *testing.T) {
	srv := s3test.New(t)
	locker := testLocker(t)
	for _, tc := range []struct {
		name, prefix string
		partSize     int64
	}{
		// 5 MiB parts: the suite's 3 MiB archive is one part; the
		// multipart test below writes many.
		{"no prefix", "", store.MinPartSize},
		{"prefix", "backups/felis", store.MinPartSize},
		{"prefix with + and a space", "backups/a+b c", store.MinPartSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Store {
				s, _ := newS3(t, srv, locker, tc.prefix, tc.partSize)
				return s
			})
		})
	}
}

// TestS3Multipart: an archive of several parts, written in writes of odd
// sizes, reads back whole, carries its SHA-256 as metadata, and leaves no
// upload behind; a failure in the middle leaves no object and no upload.
// A prefix with characters that a copy source must escape ('+' is a space
// to a decoder of queries) works as well as a plain one.
func TestS3Multipart(t *testing.T) {
	srv := s3test.New(t)
	locker := testLocker(t)
	for _, prefix := range []string{"pre", "a+b/c d"} {
		t.Run("prefix "+prefix, func(t *testing.T) { testMultipart(t, srv, locker, prefix) })
	}
}

func testMultipart(t *testing.T, srv *s3test.Server, locker store.Locker, prefix string) {
	s, bucket := newS3(t, srv, locker, prefix, store.MinPartSize)
	data := make([]byte, 3*store.MinPartSize+12345)
	for i := range data {
		data[i] = byte(i*31 + i>>13)
	}
	for _, tc := range []struct {
		name string
		size int
	}{
		{"exactly one part", store.MinPartSize},
		{"exactly two parts", 2 * store.MinPartSize},
		{"three parts and a bit", len(data)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := data[:tc.size]
			n, err := s.Put(t.Context(), "srv/run.tar.zst", func(w io.Writer) error {
				for rest := want; len(rest) > 0; {
					k := min(len(rest), 777777)
					if _, err := w.Write(rest[:k]); err != nil {
						return err
					}
					rest = rest[k:]
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if n != int64(len(want)) {
				t.Fatalf("Put returned %d bytes, wrote %d", n, len(want))
			}
			r, err := s.Open(t.Context(), "srv/run.tar.zst")
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(want))
			}
			head, err := srv.Client().HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(prefix + "/srv/run.tar.zst")})
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(want)
			if got := head.Metadata[store.MetaSHA256]; got != hex.EncodeToString(sum[:]) {
				t.Errorf("x-amz-meta-sha256 = %q, want %x", got, sum)
			}
			if up := srv.Uploads(t, bucket); len(up) != 0 {
				t.Errorf("uploads left in progress: %v", up)
			}
		})
	}

	t.Run("failure after two parts", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := s.Put(t.Context(), "srv/failed.tar.zst", func(w io.Writer) error {
			if _, err := w.Write(data); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Put: %v, want boom", err)
		}
		if _, err := s.Open(t.Context(), "srv/failed.tar.zst"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Open after a failed Put: %v, want fs.ErrNotExist", err)
		}
		if up := srv.Uploads(t, bucket); len(up) != 0 {
			t.Errorf("uploads left in progress: %v", up)
		}
	})
}

// TestS3Errors: a missing bucket and refused credentials are told apart
// from transient failures, and no error quotes the secret key.
func TestS3Errors(t *testing.T) {
	srv := s3test.New(t)
	bucket := srv.NewBucket(t)
	write := func(w io.Writer) error { _, err := w.Write([]byte("x")); return err }
	for _, tc := range []struct {
		name, url, access, secret string
		want                      error
	}{
		{"missing bucket", "s3://no-such-bucket/p", s3test.AccessKey, s3test.SecretKey, store.ErrNoRoot},
		{"wrong secret", "s3://" + bucket, s3test.AccessKey, "not-the-secret-but-a-long-one", store.ErrDenied},
		// versitygw: 404 XAdminUserNotFound; AWS: 403 InvalidAccessKeyId.
		{"unknown access key", "s3://" + bucket, "no-such-access-key", s3test.SecretKey, store.ErrDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := store.NewS3(store.S3Options{URL: tc.url, Endpoint: srv.Endpoint, PathStyle: true,
				AccessKey: tc.access, SecretKey: tc.secret})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Put(t.Context(), "srv/run.tar", write)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Put: %v, want an error wrapping %v", err, tc.want)
			}
			if _, err := s.List(t.Context(), "srv"); !errors.Is(err, tc.want) {
				t.Errorf("List: %v, want an error wrapping %v", err, tc.want)
			}
			if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("the error quotes the secret key: %v", err)
			}
		})
	}
	t.Run("bad options", func(t *testing.T) {
		for _, o := range []store.S3Options{
			{URL: "s3://", AccessKey: "a", SecretKey: "b"},
			{URL: "s3://Bad_Bucket", AccessKey: "a", SecretKey: "b"},
			{URL: "s3://bucket/../x", AccessKey: "a", SecretKey: "b"},
			{URL: "https://bucket", AccessKey: "a", SecretKey: "b"},
			{URL: "s3://bucket", Endpoint: "minio:9000", AccessKey: "a", SecretKey: "b"},
			{URL: "s3://bucket"},
			{URL: "s3://bucket", AccessKey: "a", SecretKey: "b", PartSize: 1 << 20},
		} {
			if _, err := store.NewS3(o); err == nil {
				t.Errorf("NewS3(%v) succeeded, want an error", o)
			} else if o.SecretKey != "" && strings.Contains(err.Error(), "secret-value") {
				t.Errorf("error quotes the secret: %v", err)
			}
		}
	})
}

// TestS3ServerNeverAnswers: a server that accepts connections and never
// answers fails the Put after the read timeout (each of the SDK's
// attempts), instead of hanging it.
func TestS3ServerNeverAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	s, err := store.NewS3(store.S3Options{URL: "s3://bucket", Endpoint: "http://" + l.Addr().String(), PathStyle: true,
		AccessKey: "a", SecretKey: "b", ReadTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = s.Put(ctx, "srv/run.tar", func(w io.Writer) error { _, err := w.Write([]byte("x")); return err })
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Put = %v (context: %v), want a timeout error before the test's deadline", err, ctx.Err())
	}
}

// TestS3OpenResumes: a reader whose connection breaks (the server restarts
// mid-object) requests the rest and reads the object whole.
func TestS3OpenResumes(t *testing.T) {
	srv := s3test.New(t)
	s, _ := newS3(t, srv, nil, "", store.MinPartSize)
	data := make([]byte, 48<<20)
	for i := range data {
		data[i] = byte(i*131 + i>>17)
	}
	if _, err := s.Put(t.Context(), "srv/big.tar", func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(t.Context(), "srv/big.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(r, head); err != nil {
		t.Fatal(err)
	}
	srv.Restart(t)
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading on after the server restarted: %v", err)
	}
	if got := append(head, rest...); !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, want the %d written, equal", len(got), len(data))
	}
}

func TestS3Refs(t *testing.T) {
	s, err := store.NewS3(store.S3Options{URL: "s3://bucket/a/b/", AccessKey: "a", SecretKey: "b"})
	if err != nil {
		t.Fatal(err)
	}
	ref := s.Ref("srv/run-1.tar.zst")
	if ref != "s3://bucket/a/b/srv/run-1.tar.zst" {
		t.Fatalf("Ref = %q", ref)
	}
	if k, ok := s.KeyOf(ref); !ok || k != "srv/run-1.tar.zst" {
		t.Fatalf("KeyOf(%q) = %q, %v", ref, k, ok)
	}
	for _, other := range []string{"s3://bucket/a/srv/run.tar", "s3://other/a/b/srv/run.tar", "/backups/srv/run.tar", "s3://bucket/a/b/../x"} {
		if k, ok := s.KeyOf(other); ok {
			t.Errorf("KeyOf(%q) = %q, want not of this store", other, k)
		}
	}
}
