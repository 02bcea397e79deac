package config

import (
	"fmt"
	"path/filepath"

	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
)

// problem is one bad setting: its key and what is wrong.
type problem struct{ key, msg string }

// notS3 is the complaint about an S3 setting without an S3 store.
const notS3 = `is set but [archive] store is not: set store = "s3://bucket/prefix" or remove it`

// problems checks the S3 settings of [archive]; localPath is
// [archive] local_path, which an S3 store excludes.
func (s S3) problems(localPath string) []problem {
	var ps []problem
	if !s.Enabled() {
		for _, kv := range [][2]string{
			{"endpoint", s.Endpoint}, {"region", s.Region}, {"access_key_file", s.AccessKeyFile}, {"secret_key_file", s.SecretKeyFile},
		} {
			if kv[1] != "" {
				ps = append(ps, problem{"[archive] " + kv[0], notS3})
			}
		}
		if s.PartSizeMiB != 0 {
			ps = append(ps, problem{"[archive] part_size_mib", notS3})
		}
		return ps
	}
	if _, _, err := jobapi.ParseS3URL(s.Store); err != nil {
		ps = append(ps, problem{"[archive] store", err.Error()})
	}
	if localPath != "" {
		ps = append(ps, problem{"[archive] local_path", "set together with store: archives go to one store, remove one of them"})
	}
	if s.Endpoint != "" {
		if err := jobapi.CheckS3Endpoint(s.Endpoint); err != nil {
			ps = append(ps, problem{"[archive] endpoint", err.Error()})
		}
	}
	if s.Region != "" {
		if err := jobapi.CheckS3Region(s.Region); err != nil {
			ps = append(ps, problem{"[archive] region", err.Error()})
		}
	}
	if s.PartSizeMiB != 0 && (s.PartSizeMiB < store.MinPartSize>>20 || s.PartSizeMiB > store.MaxPartSize>>20) {
		ps = append(ps, problem{"[archive] part_size_mib", fmt.Sprintf("%d: want %d to %d", s.PartSizeMiB, store.MinPartSize>>20, store.MaxPartSize>>20)})
	}
	for _, f := range []struct{ key, path, holds string }{
		{"access_key_file", s.AccessKeyFile, "access key ID"},
		{"secret_key_file", s.SecretKeyFile, "secret access key"},
	} {
		switch {
		case f.path == "":
			ps = append(ps, problem{"[archive] " + f.key, "missing: the file of the mounted Secret that holds the S3 " + f.holds})
		case !filepath.IsAbs(f.path):
			ps = append(ps, problem{"[archive] " + f.key, notAbsSecretFile})
		}
	}
	return ps
}
