package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/encoding/httpbinding"
	"github.com/aws/smithy-go/middleware"

	"github.com/worldbackup/worldbackup/archiver/crashguard"
	"github.com/worldbackup/worldbackup/jobapi"
)

// ErrDenied is wrapped by the errors of an S3 store whose server refused
// the credentials or the access (a wrong key, a key without rights on the
// bucket): a configuration error no retry can fix.
var ErrDenied = errors.New("the archive store refused the credentials")

// Part sizes of an S3 store's multipart uploads. Memory is two parts (one
// being filled, one being uploaded) whatever the archive's size; an archive
// may have at most maxParts parts (156 GiB at the default size).
const (
	DefaultPartSize = 8 << 20
	MinPartSize     = 5 << 20 // S3's minimum for every part but the last
	MaxPartSize     = 64 << 20
	maxParts        = 10000
)

// maxCopySize is the largest object a single CopyObject may copy (5 GiB):
// larger archives get no x-amz-meta-sha256 (see S3.Put).
const maxCopySize = 5 << 30

// cleanupTimeout bounds the abort of a failed upload, which runs after the
// Put's context may have ended.
const cleanupTimeout = 30 * time.Second

// MetaSHA256 is the user metadata key (x-amz-meta-sha256) holding an
// archive's SHA-256 in lowercase hex.
const MetaSHA256 = "sha256"

// Locker takes an exclusive lock by name, held until unlock is called or the
// process dies. An S3 store has no lock of its own (S3 has no flock, and a
// lock object would need a lease): the backup passes the catalog's advisory
// lock, which the database drops with the connection of a killed process.
type Locker interface {
	Lock(ctx context.Context, name string) (unlock func(), err error)
}

// S3Options configures an S3 store.
type S3Options struct {
	// URL is the store's location, "s3://bucket" or "s3://bucket/prefix".
	URL string
	// URLFrom says where URL was given (a flag, a config key, a Job's
	// input), for the error of a bucket that does not exist; default "the
	// store URL".
	URLFrom string
	// Endpoint is the server's base URL, e.g. "https://minio.example:9000";
	// empty: AWS's endpoint for Region.
	Endpoint string
	// Region is the bucket's region; default "us-east-1".
	Region string
	// PathStyle addresses the bucket as endpoint/bucket rather than
	// bucket.endpoint (most S3-compatible servers want it).
	PathStyle bool
	// AccessKey and SecretKey are the credentials, read from the files of
	// a mounted Secret by the caller. Secret: never logged or quoted.
	AccessKey, SecretKey string
	// PartSize is the size of the multipart upload's parts, between
	// MinPartSize and MaxPartSize; default DefaultPartSize.
	PartSize int64
	// Locker takes Lock's locks; nil: Lock fails (verify, restore and
	// prune do not lock archives).
	Locker Locker
	// ReadTimeout fails a request whose connection delivers no data for
	// this long (a server that stopped answering, a blackholed network),
	// also while the request body is sent, and a request whose answer is
	// read whole (all but uploads and object bodies) that takes three
	// times as long in all (a server that trickles); default
	// DefaultReadTimeout.
	ReadTimeout time.Duration
}

// DefaultReadTimeout is the default S3Options.ReadTimeout: an 8 MiB part
// may take as long to send at 28 kB/s.
const DefaultReadTimeout = 5 * time.Minute

// String hides the credentials from %v and %+v.
func (o S3Options) String() string {
	return fmt.Sprintf("{URL:%s Endpoint:%s Region:%s PathStyle:%t PartSize:%d credentials:<redacted>}",
		o.URL, jobapi.RedactURL(o.Endpoint), o.Region, o.PathStyle, o.PartSize)
}

// GoString hides the credentials from %#v.
func (o S3Options) GoString() string { return "store.S3Options" + o.String() }

func (o S3Options) withDefaults() S3Options {
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.URLFrom == "" {
		o.URLFrom = "the store URL"
	}
	return o
}

// Validate checks the options; its errors never quote the credentials.
func (o S3Options) Validate() error {
	var errs []error
	if _, _, err := ParseS3URL(o.URL); err != nil {
		errs = append(errs, err)
	}
	if o.Endpoint != "" {
		if err := jobapi.CheckS3Endpoint(o.Endpoint); err != nil {
			errs = append(errs, fmt.Errorf("S3 endpoint: %w", err))
		}
	}
	if err := jobapi.CheckS3Region(o.Region); o.Region != "" && err != nil {
		errs = append(errs, fmt.Errorf("S3 region: %w", err))
	}
	if o.AccessKey == "" || o.SecretKey == "" {
		errs = append(errs, errors.New("S3 credentials missing: both an access key and a secret key are needed"))
	}
	if o.ReadTimeout < 0 {
		errs = append(errs, fmt.Errorf("S3 read timeout %v is negative", o.ReadTimeout))
	}
	if o.PartSize < MinPartSize || o.PartSize > MaxPartSize {
		errs = append(errs, fmt.Errorf("S3 part size %d: want %d to %d bytes", o.PartSize, MinPartSize, MaxPartSize))
	}
	return errors.Join(errs...)
}

// IsS3URL reports whether ref names an S3 object or store (s3://...).
func IsS3URL(ref string) bool { return jobapi.IsS3URL(ref) }

// ParseS3URL splits "s3://bucket/prefix" into the bucket and the key prefix
// (jobapi.ParseS3URL, the rule of the components' store input too).
func ParseS3URL(s string) (bucket, prefix string, err error) { return jobapi.ParseS3URL(s) }

// S3 keeps archives as objects of an S3 bucket below a key prefix. Put
// streams the archive into a multipart upload and completes it only when
// the whole archive is written: no object appears under the final key
// unless it is complete. The memory it uses is two parts.
type S3 struct {
	client   *s3.Client
	bucket   string
	prefix   string
	partSize int64
	locker   Locker
	urlFrom  string // S3Options.URLFrom
}

// NewS3 returns the store o describes. It does not contact the server.
func NewS3(o S3Options) (*S3, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	bucket, prefix, _ := ParseS3URL(o.URL)
	creds := aws.Credentials{AccessKeyID: o.AccessKey, SecretAccessKey: o.SecretKey, Source: "worldbackup"}
	opts := s3.Options{
		Region:       o.Region,
		UsePathStyle: o.PathStyle,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return creds, nil
		}),
		// The checksums are the store's: SHA-256 of every part. The SDK's
		// own (CRC32 by default) would be a second pass and are not
		// understood by every S3-compatible server.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if o.Endpoint != "" {
		opts.BaseEndpoint = aws.String(strings.TrimSuffix(o.Endpoint, "/"))
	}
	// The SDK's client has no timeout but the dial's: a server that
	// accepts and never answers would hang the run until the Job's deadline.
	// A stall is not retried (3 attempts would make 15 minutes of 5); error
	// bodies are bounded (see newHTTPClient).
	opts.HTTPClient = newHTTPClient(o.ReadTimeout)
	return &S3{client: s3.New(opts), bucket: bucket, prefix: prefix, partSize: o.PartSize, locker: o.Locker, urlFrom: o.URLFrom}, nil
}

// object returns the object key of key.
func (s *S3) object(key string) string {
	if s.prefix == "" {
		return key
	}
	return s.prefix + "/" + key
}

// Ref returns the s3://bucket/prefix/key URL of key's archive.
func (s *S3) Ref(key string) string { return "s3://" + s.bucket + "/" + s.object(key) }

// KeyOf returns the key of the archive ref names, when ref is an object of
// this store.
func (s *S3) KeyOf(ref string) (string, bool) {
	rest, ok := strings.CutPrefix(ref, "s3://"+s.bucket+"/")
	if ok && s.prefix != "" {
		rest, ok = strings.CutPrefix(rest, s.prefix+"/")
	}
	if !ok || checkKey(rest) != nil {
		return "", false
	}
	return rest, true
}

// Lock takes the lock of key from the store's Locker, named by key's ref.
func (s *S3) Lock(ctx context.Context, key string) (unlock func(), err error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if s.locker == nil {
		return nil, errors.New("this S3 store has no locker: S3 has no locks of its own")
	}
	return s.locker.Lock(ctx, s.Ref(key))
}

// Put streams what write writes into key's object: a multipart upload of
// parts of the store's part size, each with its SHA-256 checksum, completed
// only when write returned nil and ctx is not done. On any error the upload
// is aborted (a killed process leaves it for CleanTemps). An archive that
// fits in one part is sent with a single PutObject instead, checked by the
// server against its whole SHA-256. The SHA-256 of the whole archive is
// stored as user metadata (x-amz-meta-sha256); for a multipart archive by
// copying the object onto itself, which S3 allows up to 5 GiB (larger
// archives have none: the catalog's row holds it).
//
// A server's word that it stored the archive is not taken: Put then asks
// (HEAD) for the object's size and x-amz-meta-sha256 and fails unless they
// are the archive's. A Put that fails after the archive was sent (the
// answer lost, an answer of success with nothing or something else stored)
// removes the key's object, and aborts the upload: nothing is left of it.
func (s *S3) Put(ctx context.Context, key string, write func(io.Writer) error) (size int64, err error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	obj, ref := s.object(key), s.Ref(key)
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:            aws.String(s.bucket),
		Key:               aws.String(obj),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		ContentType:       aws.String("application/octet-stream"),
	})
	if err != nil {
		return 0, s.wrap(fmt.Sprintf("starting the upload of %s", ref), err)
	}
	id := aws.ToString(created.UploadId)
	up := &upload{s: s, obj: obj, id: id, free: make(chan []byte, 2), parts: make(chan part), done: make(chan struct{})}
	// Two buffers, each allocated when first needed: one is filled while
	// the other is uploaded.
	up.free <- nil
	up.free <- nil
	upCtx, cancelUp := context.WithCancel(ctx)
	aborted := false
	defer func() {
		if err != nil {
			cancelUp() // no need to finish a part in flight
		}
		up.finish()
		cancelUp()
		if err != nil && !aborted {
			s.abort(context.WithoutCancel(ctx), obj, id)
		}
	}()
	go up.run(upCtx)

	w := &partWriter{up: up, size: int(s.partSize), whole: sha256.New()}
	if err := write(w); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if w.err != nil {
		return 0, w.err
	}
	sum := hex.EncodeToString(w.whole.Sum(nil))
	if up.sent == 0 {
		// One part: abort the upload (failing when CleanTemps already did:
		// the Put was discarded) and send the archive whole.
		aborted = true
		if err := s.abortErr(ctx, obj, ref, id); err != nil {
			return 0, err
		}
		err := s.putSmall(ctx, obj, ref, w.buf, sum)
		if errors.Is(err, ErrNoRoot) || errors.Is(err, ErrDenied) {
			return 0, err // refused: nothing was stored, and a removal would be refused too
		}
		if err == nil {
			err = s.check(ctx, obj, ref, w.n, sum, true)
		}
		if err != nil {
			return 0, s.takeBack(ctx, key, err)
		}
		return w.n, nil
	}
	if err := w.flush(); err != nil {
		return 0, err
	}
	parts, err := up.wait()
	if err != nil {
		return 0, err
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(s.bucket),
		Key:             aws.String(obj),
		UploadId:        aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		// The server may have completed the upload and lost the answer
		// (a retry then finds no upload): the deferred abort and takeBack
		// remove whichever of the two is left.
		var nsu *types.NoSuchUpload
		if errors.As(err, &nsu) {
			err = fmt.Errorf("committing %s: %w", ref, ErrDiscarded)
		} else {
			err = s.wrap(fmt.Sprintf("completing the upload of %s", ref), err)
		}
		return 0, s.takeBack(ctx, key, err)
	}
	// From here on a failure takes the object back; the deferred abort
	// also ends an upload the server said it completed but did not.
	withSum := w.n <= maxCopySize
	if withSum {
		err = s.setSHA256(ctx, obj, ref, sum)
	}
	if err == nil {
		err = s.check(ctx, obj, ref, w.n, sum, withSum)
	}
	if err != nil {
		return 0, s.takeBack(ctx, key, err)
	}
	return w.n, nil
}

// check asks the server (HEAD) what it holds under obj, which a Put just
// wrote: an object of size bytes, with sum as its x-amz-meta-sha256 when
// withSum. A server that answered a write with success is not believed.
func (s *S3) check(ctx context.Context, obj, ref string, size int64, sum string, withSum bool) error {
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(obj)})
	var nf *types.NotFound
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("checking what the server stored as %s: no object: the server answered the write as done but stored nothing", ref)
	case err != nil:
		return s.wrap(fmt.Sprintf("checking what the server stored as %s", ref), err)
	}
	if got := aws.ToInt64(head.ContentLength); head.ContentLength == nil || got != size {
		return fmt.Errorf("checking what the server stored as %s: the object has %d bytes, %d were written", ref, got, size)
	}
	if got := head.Metadata[MetaSHA256]; withSum && got != sum {
		return fmt.Errorf("checking what the server stored as %s: its x-amz-meta-sha256 is %q, the archive's SHA-256 is %s", ref, cut(got, 64), sum)
	}
	return nil
}

// takeBack removes key's object after a Put failed with cause, when the
// server may have stored something under it, and returns cause (joined
// with the removal's error). It runs when the Put's context has ended too,
// bounded in time.
func (s *S3) takeBack(ctx context.Context, key string, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := s.Remove(ctx, key); err != nil {
		return errors.Join(cause, fmt.Errorf("removing what the failed write may have left: %w", err))
	}
	return cause
}

// putSmall stores an archive of one part with PutObject.
func (s *S3) putSmall(ctx context.Context, obj, ref string, data []byte, sum string) error {
	raw, _ := hex.DecodeString(sum)
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(obj),
		Body:           bytes.NewReader(data),
		ContentLength:  aws.Int64(int64(len(data))),
		ContentType:    aws.String("application/octet-stream"),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(raw)),
		Metadata:       map[string]string{MetaSHA256: sum},
	}, withPayloadHash(sum))
	if err != nil {
		return s.wrap(fmt.Sprintf("writing %s", ref), err)
	}
	return nil
}

// setSHA256 records the archive's SHA-256 as user metadata by copying the
// object onto itself (a server-side copy, replacing the metadata).
func (s *S3) setSHA256(ctx context.Context, obj, ref, sum string) error {
	_, err := s.client.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket:            aws.String(s.bucket),
		Key:               aws.String(obj),
		CopySource:        aws.String(httpbinding.EscapePath(s.bucket+"/"+obj, false)),
		MetadataDirective: types.MetadataDirectiveReplace,
		Metadata:          map[string]string{MetaSHA256: sum},
		ContentType:       aws.String("application/octet-stream"),
	})
	var nsk *types.NoSuchKey
	var ae smithy.APIError
	switch {
	case errors.As(err, &nsk) || errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey":
		// Not "the archive does not exist": the copy's source, the object
		// just completed, was not found where the header names it.
		return fmt.Errorf("recording the SHA-256 of %s in its metadata: the server's server-side copy found no object at its source %q "+
			"(the completed upload is missing, or the server reads x-amz-copy-source differently)", ref, s.bucket+"/"+obj)
	case err != nil:
		return s.wrap(fmt.Sprintf("recording the SHA-256 of %s in its metadata", ref), err)
	}
	return nil
}

// abort aborts an upload after a failure, bounded in time; its error is
// dropped (CleanTemps of a later run finds what is left).
func (s *S3) abort(ctx context.Context, obj, id string) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	_, _ = s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(obj), UploadId: aws.String(id),
	})
}

// abortErr aborts an upload that Put itself gives up; an upload that is
// gone already was discarded by CleanTemps.
func (s *S3) abortErr(ctx context.Context, obj, ref, id string) error {
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(obj), UploadId: aws.String(id),
	})
	var nsu *types.NoSuchUpload
	switch {
	case errors.As(err, &nsu):
		return fmt.Errorf("committing %s: %w", ref, ErrDiscarded)
	case err != nil:
		return s.wrap("aborting the multipart upload", err)
	}
	return nil
}

// part is a filled buffer on its way to the uploader.
type part struct {
	num  int32
	data []byte
}

// upload sends the parts of one multipart upload, one at a time, on a
// goroutine of its own, while the next part is being filled.
type upload struct {
	s     *S3
	obj   string
	id    string
	free  chan []byte // buffers to fill: at most two exist
	parts chan part
	done  chan struct{}
	sent  int32 // parts handed to run (written by the writer only)

	mu        sync.Mutex
	err       error
	completed []types.CompletedPart
	closeOnce sync.Once
}

func (u *upload) run(ctx context.Context) {
	defer crashguard.Recover()
	defer close(u.done)
	for p := range u.parts {
		if u.failed() == nil {
			cp, err := u.s.uploadPart(ctx, u.obj, u.id, p)
			u.mu.Lock()
			if err != nil && u.err == nil {
				u.err = err
			}
			u.completed = append(u.completed, cp)
			u.mu.Unlock()
		}
		u.free <- p.data[:0]
	}
}

func (u *upload) failed() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// finish ends run (when it still runs) and waits for it.
func (u *upload) finish() {
	u.closeOnce.Do(func() { close(u.parts) })
	<-u.done
}

// wait ends run and returns the uploaded parts, in order, or the first
// error.
func (u *upload) wait() ([]types.CompletedPart, error) {
	u.finish()
	if u.err != nil {
		return nil, u.err
	}
	return u.completed, nil
}

// uploadPart uploads one part with its SHA-256 (also the signature's
// payload hash, so the part is hashed once).
func (s *S3) uploadPart(ctx context.Context, obj, id string, p part) (types.CompletedPart, error) {
	h := sha256.Sum256(p.data)
	sum := base64.StdEncoding.EncodeToString(h[:])
	out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(obj),
		UploadId:       aws.String(id),
		PartNumber:     aws.Int32(p.num),
		Body:           bytes.NewReader(p.data),
		ContentLength:  aws.Int64(int64(len(p.data))),
		ChecksumSHA256: aws.String(sum),
	}, withPayloadHash(hex.EncodeToString(h[:])))
	if err != nil {
		var nsu *types.NoSuchUpload
		if errors.As(err, &nsu) {
			return types.CompletedPart{}, fmt.Errorf("uploading part %d of s3://%s/%s: %w", p.num, s.bucket, obj, ErrDiscarded)
		}
		return types.CompletedPart{}, s.wrap(fmt.Sprintf("uploading part %d of s3://%s/%s", p.num, s.bucket, obj), err)
	}
	return types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(p.num), ChecksumSHA256: aws.String(sum)}, nil
}

// withPayloadHash has the SigV4 signer use hexSum, the SHA-256 of the body
// computed already, instead of reading the body once more.
func withPayloadHash(hexSum string) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("worldbackupPayloadHash",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return next.HandleFinalize(v4.SetPayloadHash(ctx, hexSum), in)
				}), middleware.Before)
		})
	}
}

// partWriter cuts the stream into parts for an upload and hashes it whole.
// Its first error sticks.
type partWriter struct {
	up    *upload
	size  int
	buf   []byte
	whole hash.Hash
	n     int64
	err   error
}

func (w *partWriter) Write(p []byte) (int, error) {
	if w.err == nil {
		// A failed upload stops the stream now, not when the next part is
		// full (which a world that compresses well takes long to fill).
		w.err = w.up.failed()
	}
	if w.err != nil {
		return 0, w.err
	}
	written := 0
	for len(p) > 0 {
		if len(w.buf) == w.size {
			// Sent only once more data follows: the last part, whatever
			// its size, goes out in Put (or whole, with PutObject).
			if err := w.flush(); err != nil {
				return written, err
			}
		}
		if w.buf == nil {
			w.buf = <-w.up.free
			if w.buf == nil {
				w.buf = make([]byte, 0, w.size)
			}
		}
		n := min(len(p), w.size-len(w.buf))
		w.buf = append(w.buf, p[:n]...)
		w.whole.Write(p[:n])
		w.n += int64(n)
		written += n
		p = p[n:]
	}
	return written, nil
}

// flush hands the filled buffer to the uploader.
func (w *partWriter) flush() error {
	if err := w.up.failed(); err != nil {
		w.err = err
		return err
	}
	if w.up.sent >= maxParts {
		w.err = fmt.Errorf("the archive is larger than %d parts of %d MiB: raise the part size", maxParts, w.size>>20)
		return w.err
	}
	w.up.sent++
	w.up.parts <- part{num: w.up.sent, data: w.buf}
	w.buf = nil
	return nil
}

// CleanTemps aborts the multipart uploads of key's object left in progress
// by earlier attempts (a killed process cannot abort its own) and returns
// them as "<ref>?uploadId=<id>". The caller must hold key's lock, or it may
// discard the upload of a concurrent Put, which then fails with
// ErrDiscarded.
func (s *S3) CleanTemps(ctx context.Context, key string) ([]string, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	obj := s.object(key)
	what := fmt.Sprintf("listing the unfinished uploads of %s", s.Ref(key))
	var removed []string
	aborted := make(map[string]bool)
	for {
		// After a page with uploads of key is aborted, the listing starts
		// again: the next page's markers name an upload that is gone,
		// which a server may refuse (versitygw: "Invalid uploadId marker").
		// An upload listed again after it was aborted (a server whose
		// listing lags) is passed over, and only a page that aborted a new
		// one starts the listing again: it ends.
		again := false
		err := s.uploadPages(ctx, obj, what, func(page []types.MultipartUpload) (bool, error) {
			for _, u := range page {
				if aws.ToString(u.Key) != obj {
					continue // another key that starts with this one
				}
				id := aws.ToString(u.UploadId)
				if aborted[id] {
					continue
				}
				if len(aborted) >= maxStaleUploads {
					return true, fmt.Errorf("%s: more than %d unfinished uploads of one key", what, maxStaleUploads)
				}
				_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
					Bucket: aws.String(s.bucket), Key: u.Key, UploadId: u.UploadId,
				})
				var nsu *types.NoSuchUpload
				if err != nil && !errors.As(err, &nsu) {
					return true, s.wrap(fmt.Sprintf("aborting the stale upload %s of %s", id, s.Ref(key)), err)
				}
				aborted[id], again = true, true
				removed = append(removed, s.Ref(key)+"?uploadId="+id)
			}
			return again, nil
		})
		if err != nil || !again {
			return removed, err
		}
	}
}

// maxStaleUploads bounds the unfinished uploads of one key CleanTemps
// aborts: a server that keeps listing new ones would be followed forever.
const maxStaleUploads = 100_000

// uploadPages calls page with each page of the server's listing of the
// unfinished multipart uploads of the keys starting with prefix, in order,
// until page says done or fails; what names the listing in its errors. A
// page marked truncated that does not say where the next one starts (no
// next key marker, or the markers it was asked with) fails the listing
// (errNoProgress) before it is handed over: following it would ask for the
// same page forever.
func (s *S3) uploadPages(ctx context.Context, prefix, what string, page func([]types.MultipartUpload) (done bool, err error)) error {
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)}
	var order listOrder
	for {
		out, err := s.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return s.wrap(what, err)
		}
		truncated := aws.ToBool(out.IsTruncated)
		key, id := aws.ToString(out.NextKeyMarker), aws.ToString(out.NextUploadIdMarker)
		switch {
		case truncated && key == "":
			return fmt.Errorf("%s: %w: a page marked truncated without a next key marker", what, errNoProgress)
		case truncated && key == aws.ToString(in.KeyMarker) && id == aws.ToString(in.UploadIdMarker):
			return fmt.Errorf("%s: %w: a page marked truncated whose next markers are those it was asked with", what, errNoProgress)
		}
		keys := make([]string, 0, len(out.Uploads))
		for _, u := range out.Uploads {
			keys = append(keys, aws.ToString(u.Key))
		}
		if err := order.page(keys, true, truncated); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done, err := page(out.Uploads); done || err != nil {
			return err
		}
		if !truncated {
			return nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// objectPages calls page with each page of the server's listing in, in
// order, until page fails; what names the listing in its errors. A page
// marked truncated that does not say where the next one starts (no
// continuation token, or the one it was asked with) fails the listing
// (errNoProgress) before it is handed over: following it would ask for the
// same page forever (the SDK's paginator does), or end the listing early.
func (s *S3) objectPages(ctx context.Context, in *s3.ListObjectsV2Input, what string, page func(*s3.ListObjectsV2Output) error) error {
	var order listOrder
	for {
		out, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return s.wrap(what, err)
		}
		truncated := aws.ToBool(out.IsTruncated)
		next := aws.ToString(out.NextContinuationToken)
		switch {
		case truncated && next == "":
			return fmt.Errorf("%s: %w: a page marked truncated without a continuation token", what, errNoProgress)
		case truncated && next == aws.ToString(in.ContinuationToken):
			return fmt.Errorf("%s: %w: a page marked truncated whose continuation token is the one it was asked with", what, errNoProgress)
		}
		// Keys only: a server may list a folder (a common prefix) on
		// every page (versitygw does).
		keys := make([]string, 0, len(out.Contents))
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if err := order.page(keys, false, truncated); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := page(out); err != nil {
			return err
		}
		if !truncated {
			return nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// errNoProgress is wrapped by the error of a listing whose server does not
// say where its next page starts, or whose pages do not advance (listOrder).
var errNoProgress = errors.New("the S3 server's listing does not advance")

// maxStalledPages bounds the truncated pages in a row that name nothing
// after the pages before them (S3 may answer a page with no keys now and
// then; a server that keeps doing so would be followed forever).
const maxStalledPages = 1000

// listOrder checks that the pages of one listing advance, as S3 lists:
// in the binary order of the keys, each page after the one before. A
// page that names a key before the last one seen goes back (a server
// cycling between continuation tokens would be followed forever, handing
// the same pages again), and more than maxStalledPages truncated pages in
// a row that name no new key stall: both fail the listing (errNoProgress)
// before the page is handed over.
type listOrder struct {
	last    string // the greatest name seen
	stalled int    // truncated pages in a row that named nothing new
}

// page checks one page's names, in any order; repeats when one name may
// be listed on more than one page (one key's several uploads).
func (o *listOrder) page(names []string, repeats bool, truncated bool) error {
	for _, n := range names {
		if o.last != "" && (n < o.last || (!repeats && n == o.last)) {
			return fmt.Errorf("%w: a page names %q, not after %q named by the pages before it (the listing goes back)",
				errNoProgress, n, o.last)
		}
	}
	if len(names) > 0 && slices.Max(names) > o.last {
		o.last, o.stalled = slices.Max(names), 0
		return nil
	}
	if truncated {
		if o.stalled++; o.stalled > maxStalledPages {
			return fmt.Errorf("%w: %d truncated pages in a row named nothing new", errNoProgress, o.stalled)
		}
	}
	return nil
}

// Remove deletes key's object; a missing object is not an error.
func (s *S3) Remove(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.object(key))})
	if err != nil {
		var nsk *types.NoSuchKey
		if errors.As(err, &nsk) {
			return nil
		}
		return s.wrap(fmt.Sprintf("removing %s", s.Ref(key)), err)
	}
	return nil
}

// Holds reports whether the bucket holds anything of key: its object
// (HEAD), or an unfinished multipart upload of it (a Put writing, or one a
// killed process left: what CleanTemps aborts). A bucket that is gone
// answers a HEAD as a missing object does: it holds nothing.
func (s *S3) Holds(ctx context.Context, key string) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	obj := s.object(key)
	_, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(obj)})
	if err == nil {
		return true, nil
	}
	if err = s.wrap(fmt.Sprintf("looking up %s", s.Ref(key)), err); !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	var held bool
	err = s.uploadPages(ctx, obj, fmt.Sprintf("listing the unfinished uploads of %s", s.Ref(key)), func(page []types.MultipartUpload) (bool, error) {
		for _, u := range page {
			if aws.ToString(u.Key) == obj {
				held = true
				return true, nil
			}
		}
		return false, nil
	})
	if errors.Is(err, ErrNoRoot) {
		return false, nil
	}
	return held, err
}

// maxResumes is how often a reader of Open re-requests the rest of an object
// after its connection broke.
const maxResumes = 5

// Open returns a reader of key's object; a missing object gives an error
// wrapping fs.ErrNotExist. The reader reads the object's size and no more:
// the Content-Length of the answer, else (an answer without one) the size a
// HEAD gives; what a server sends past it is not read. When the connection
// breaks mid-object, the reader requests the rest (a range GET pinned to
// the object's ETag, so a replaced object fails rather than splices), up
// to maxResumes times; a stall (see StallError) is not resumed.
func (s *S3) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	ref := s.Ref(key)
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.object(key))}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("opening %s", ref), err)
	}
	etag := aws.ToString(out.ETag)
	size := aws.ToInt64(out.ContentLength)
	if out.ContentLength == nil || size < 0 {
		size, err = s.size(ctx, in, etag)
		if err != nil {
			out.Body.Close()
			return nil, s.wrap(fmt.Sprintf("opening %s: its answer has no length; asking for its size", ref), err)
		}
	}
	reopen := func(offset int64) (io.ReadCloser, error) {
		rest := *in
		rest.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
		if etag != "" {
			rest.IfMatch = aws.String(etag)
		}
		out, err := s.client.GetObject(ctx, &rest)
		if err != nil {
			return nil, s.wrap(fmt.Sprintf("reading %s from byte %d again", ref, offset), err)
		}
		return out.Body, nil
	}
	return &objectReader{body: out.Body, size: size, reopen: reopen}, nil
}

// size returns the size of the object in (HEAD), pinned to etag when set.
func (s *S3) size(ctx context.Context, in *s3.GetObjectInput, etag string) (int64, error) {
	h := &s3.HeadObjectInput{Bucket: in.Bucket, Key: in.Key}
	if etag != "" {
		h.IfMatch = aws.String(etag)
	}
	out, err := s.client.HeadObject(ctx, h)
	if err != nil {
		return 0, err
	}
	if out.ContentLength == nil || *out.ContentLength < 0 {
		return 0, errors.New("the server gave no size for the object")
	}
	return *out.ContentLength, nil
}

// objectReader reads an object of known size, and no more, resuming after
// a broken connection.
type objectReader struct {
	body    io.ReadCloser
	size    int64 // the object's size, from the first response or a HEAD
	n       int64 // bytes read so far
	resumes int
	reopen  func(offset int64) (io.ReadCloser, error)
}

func (r *objectReader) Read(p []byte) (int, error) {
	for {
		if r.n >= r.size {
			return 0, io.EOF // whatever the server sends past the size is not read
		}
		if rest := r.size - r.n; int64(len(p)) > rest {
			p = p[:rest]
		}
		n, err := r.body.Read(p)
		r.n += int64(n)
		switch {
		case err == nil || n > 0 && !errors.Is(err, io.EOF):
			return n, nil // an error other than EOF comes again on the next Read
		case errors.Is(err, io.EOF) && r.n == r.size:
			return n, io.EOF
		case isStall(err):
			return n, fmt.Errorf("reading the object at byte %d: %w", r.n, err)
		case r.resumes >= maxResumes:
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return n, fmt.Errorf("reading the object at byte %d after %d resumed requests: %w", r.n, r.resumes, err)
		}
		if n > 0 {
			return n, nil // resume on the next Read
		}
		r.body.Close()
		r.resumes++
		body, rerr := r.reopen(r.n)
		if rerr != nil {
			r.body = io.NopCloser(errReader{rerr})
			return 0, rerr
		}
		r.body = body
	}
}

func (r *objectReader) Close() error { return r.body.Close() }

// errReader fails every Read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// List returns the objects directly inside the folder dir (a key prefix
// such as "survival"), sorted by key; unfinished uploads are not objects
// and are not listed. ModTime is the object's Last-Modified.
func (s *S3) List(ctx context.Context, dir string) ([]Object, error) {
	if err := checkKey(dir); err != nil {
		return nil, err
	}
	prefix := s.object(dir) + "/"
	var out []Object
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix), Delimiter: aws.String("/")}
	err := s.objectPages(ctx, in, fmt.Sprintf("listing archives in %s", s.Ref(dir)), func(page *s3.ListObjectsV2Output) error {
		for _, o := range page.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), prefix)
			if name == "" || strings.HasPrefix(name, ".") {
				continue
			}
			out = append(out, Object{Key: path.Join(dir, name), Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil // S3 lists keys in UTF-8 binary order
}

// Walk calls fn with the objects below dir, at any depth, page by page of
// the server's listing (at most WalkPage objects each, sorted by key):
// memory is one page however many objects there are. Keys with an element
// starting with '.' are left out.
func (s *S3) Walk(ctx context.Context, dir string, fn func([]Object) error) error {
	if err := checkKey(dir); err != nil {
		return err
	}
	prefix := s.object(dir) + "/"
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(WalkPage)}
	page := make([]Object, 0, WalkPage)
	return s.objectPages(ctx, in, fmt.Sprintf("listing archives below %s", s.Ref(dir)), func(out *s3.ListObjectsV2Output) error {
		for _, o := range out.Contents {
			rel := strings.TrimPrefix(aws.ToString(o.Key), prefix)
			if !walkKey(rel) {
				continue
			}
			page = append(page, Object{Key: path.Join(dir, rel), Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
			if len(page) == WalkPage { // a server that sends more than asked
				if err := fn(page); err != nil {
					return err
				}
				page = page[:0]
			}
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
			page = page[:0]
		}
		return nil
	})
}

// wrap adds what to err once, mapping the server's answers callers branch
// on to this package's sentinels: a missing bucket to ErrNoRoot, a missing
// object to fs.ErrNotExist, refused credentials to ErrDenied.
func (s *S3) wrap(what string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchBucket":
			return fmt.Errorf("%s: %w: bucket %q does not exist (create it, or fix %s)", what, ErrNoRoot, s.bucket, s.urlFrom)
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%s: %w", what, fs.ErrNotExist)
		// XAdminUserNotFound: versitygw's answer to an unknown access key;
		// Forbidden: a 403 without a body (HEAD's).
		case "InvalidAccessKeyId", "XAdminUserNotFound", "SignatureDoesNotMatch", "AccessDenied", "Forbidden", "InvalidToken", "ExpiredToken":
			return fmt.Errorf("%s: %w (%s: check the access and secret key files and the key's rights on bucket %q)",
				what, ErrDenied, ae.ErrorCode(), s.bucket)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
