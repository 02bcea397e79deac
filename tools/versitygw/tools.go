//go:build tools

// Package tools pins the S3 gateway that the archiver's S3 store tests run
// against (versitygw over a POSIX folder), built by scripts/versitygw.sh.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
