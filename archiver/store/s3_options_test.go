package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/archiver/store"
)

// TestS3OptionsEndpointRules: the store refuses the endpoints and regions
// felis.toml and the flags refuse (one rule, jobapi), and never
// prints a secret typed into the endpoint: not in its errors, not in its
// String.
func TestS3OptionsEndpointRules(t *testing.T) {
	const secret = "Typed-S3cret"
	for _, tc := range []struct{ name, endpoint, region, want string }{
		{"query", "http://minio:9000?x=1", "", "no path, query or fragment"},
		{"fragment", "http://minio:9000#x", "", "no path, query or fragment"},
		{"credentials", "http://AKID:" + secret + "@minio:9000", "", "has credentials in it"},
		{"credentials with a slash", "http://AKID:a/" + secret + "@minio:9000", "", "has credentials in it"},
		{"region", "", "us east 1", "is not a region name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := store.S3Options{URL: "s3://bucket", Endpoint: tc.endpoint, Region: tc.region, AccessKey: "a", SecretKey: "b"}
			_, err := store.NewS3(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewS3 = %v, want an error saying %q", err, tc.want)
			}
			for _, s := range []string{err.Error(), o.String(), fmt.Sprintf("%+v %#v", o, o)} {
				if strings.Contains(s, secret) {
					t.Errorf("%q shows the secret typed into the endpoint", s)
				}
			}
		})
	}
}
