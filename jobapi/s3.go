package jobapi

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"unicode"
)

// S3URLPrefix starts every S3 store URL and archive ref.
const S3URLPrefix = "s3://"

// IsS3URL reports whether ref names an S3 object or store (s3://...).
func IsS3URL(ref string) bool { return strings.HasPrefix(ref, S3URLPrefix) }

// ParseS3URL splits a store URL "s3://bucket[/prefix]" into the bucket and
// the key prefix (without slashes at its ends; empty when there is none).
func ParseS3URL(s string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(s, S3URLPrefix)
	if !ok {
		return "", "", fmt.Errorf("S3 store %q: want s3://bucket or s3://bucket/prefix", s)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.TrimSuffix(prefix, "/")
	if !ValidBucket(bucket) {
		return "", "", fmt.Errorf("S3 store %q: bucket %q is not a valid bucket name (3-63 lowercase letters, digits, '.' and '-')", s, bucket)
	}
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return "", "", fmt.Errorf("S3 store %q: prefix: %w", s, err)
		}
	}
	return bucket, prefix, nil
}

// S3URL returns the canonical form of a store URL ParseS3URL accepts:
// s3://bucket or s3://bucket/prefix, without a trailing slash.
func S3URL(bucket, prefix string) string {
	if prefix == "" {
		return S3URLPrefix + bucket
	}
	return S3URLPrefix + bucket + "/" + prefix
}

// SplitS3Ref splits an archive ref "s3://bucket/key"; ok is false when ref
// is not an s3:// URL. It checks nothing else (see CheckKey, ValidBucket).
func SplitS3Ref(ref string) (bucket, key string, ok bool) {
	after, ok := strings.CutPrefix(ref, S3URLPrefix)
	if !ok {
		return "", "", false
	}
	bucket, key, _ = strings.Cut(after, "/")
	return bucket, key, true
}

// ErrInvalidKey is returned for a key or prefix that no store accepts.
var ErrInvalidKey = errors.New("invalid archive key")

// CheckKey reports whether key is a key the archive stores accept: a
// relative slash path without '.', '..' or empty elements, no element
// starting with '.', no backslash and no control characters.
func CheckKey(key string) error {
	if !fs.ValidPath(key) || key == "." || strings.Contains(key, `\`) || strings.IndexFunc(key, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w %q: want a relative slash path without '..'", ErrInvalidKey, key)
	}
	for el := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(el, ".") {
			return fmt.Errorf("%w %q: no element may start with '.'", ErrInvalidKey, key)
		}
	}
	return nil
}

// S3 are the settings of an S3 store a Job reads or writes: the server and
// the files of the mounted credentials Secret, never the credentials.
type S3 struct {
	Endpoint      string // http(s)://host[:port]; "" = AWS
	Region        string // "" = DefaultS3Region
	PathStyle     bool   // address the bucket as endpoint/bucket
	AccessKeyFile string // file holding the access key ID
	SecretKeyFile string // file holding the secret access key
}

// PodS3 returns the S3 settings of a Job with the credentials Secret
// mounted at S3MountPath.
func PodS3(endpoint, region string, pathStyle bool) S3 {
	return S3{Endpoint: endpoint, Region: region, PathStyle: pathStyle,
		AccessKeyFile: path.Join(S3MountPath, S3AccessKeyFile),
		SecretKeyFile: path.Join(S3MountPath, S3SecretKeyFile)}
}

// S3Flags returns the flag names of S3.
func S3Flags() []string {
	return []string{FlagS3Endpoint, FlagS3Region, FlagS3PathStyle, FlagS3AccessKeyFile, FlagS3SecretKeyFile}
}

// IsZero reports whether no setting is given.
func (s S3) IsZero() bool { return s == S3{} }

func (s S3) args(a *args) {
	a.str(FlagS3Endpoint, s.Endpoint)
	a.str(FlagS3Region, s.Region)
	a.bool(FlagS3PathStyle, s.PathStyle)
	a.str(FlagS3AccessKeyFile, s.AccessKeyFile)
	a.str(FlagS3SecretKeyFile, s.SecretKeyFile)
}

// Args returns the --s3-* flags of s.
func (s S3) Args() []string {
	var a args
	s.args(&a)
	return a
}

// Bind registers the --s3-* flags on fs, storing into s.
func (s *S3) Bind(fs *flag.FlagSet) {
	fs.StringVar(&s.Endpoint, FlagS3Endpoint, "", "with an s3:// archive: the S3 server's URL, http(s)://host[:port] (default: AWS)")
	fs.StringVar(&s.Region, FlagS3Region, "", "with an s3:// archive: the bucket's region (default "+DefaultS3Region+")")
	fs.BoolVar(&s.PathStyle, FlagS3PathStyle, false, "with an s3:// archive: address the bucket as endpoint/bucket (most S3-compatible servers)")
	fs.StringVar(&s.AccessKeyFile, FlagS3AccessKeyFile, "", "with an s3:// archive: file holding the access key ID (a mounted Secret)")
	fs.StringVar(&s.SecretKeyFile, FlagS3SecretKeyFile, "", "with an s3:// archive: file holding the secret access key (a mounted Secret)")
}
