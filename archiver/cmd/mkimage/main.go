// Command mkimage builds the archiver's OCI image without a container daemon,
// and pushes it.
//
// Build (what `make image` runs through scripts/image.sh):
//
//	mkimage -binary dist/archiver -version v1.2.3 -revision $(git rev-parse HEAD) \
//	    -created $(git log -1 --format=%ct) -out dist/image
//
// writes dist/image/oci (an OCI image layout) and dist/image/archiver.tar
// (`docker load -i dist/image/archiver.tar`), and prints the image digest on
// stdout. The same inputs give the same digest.
//
// Push (what `make image-push REGISTRY=...` runs):
//
//	mkimage -push ghcr.io/acme/worldbackup-archiver:v1.2.3 -out dist/image
//
// uploads the image in dist/image/oci as built (no rebuild) with credentials
// from the Docker config ($DOCKER_CONFIG/config.json or ~/.docker/config.json,
// credential helpers included; `docker login` or `crane auth login` write it)
// and prints the pushed reference with its digest.
//
// Exit codes: 0 done, 1 failed, 2 usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/worldbackup/worldbackup/archiver/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv("SOURCE_DATE_EPOCH"), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError marks errors that exit 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// config is the parsed command line.
type config struct {
	build image.Options
	out   string
	tag   string
	push  string
}

// parse parses the command line; sourceDateEpoch is $SOURCE_DATE_EPOCH, the default of -created.
func parse(args []string, sourceDateEpoch string, stderr io.Writer) (config, error) {
	var c config
	var created string
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: mkimage -binary PATH [-version V] [-revision SHA] [-source URL] [-created TIME] [-out DIR] [-tag NAME:TAG]\n"+
			"       mkimage -push REF [-out DIR]\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.build.Binary, "binary", "", "the static archiver binary (CGO_ENABLED=0, GOOS=linux) to put at "+image.BinaryPath)
	fs.StringVar(&c.build.CACerts, "ca-certs", image.DefaultCACerts, "the PEM CA bundle to put at "+image.CACertsPath)
	fs.StringVar(&c.build.Version, "version", "dev", "version label and default tag")
	fs.StringVar(&c.build.Revision, "revision", "unknown", "source revision label (commit hash)")
	fs.StringVar(&c.build.Source, "source", image.DefaultSource, "source repository URL label")
	fs.StringVar(&c.build.Licenses, "licenses", image.DefaultLicenses, "SPDX license expression label")
	fs.StringVar(&created, "created", "", "creation time and file times, as Unix seconds or RFC 3339 (use the commit time; default $SOURCE_DATE_EPOCH, else 1970-01-01)")
	fs.StringVar(&c.out, "out", filepath.Join("dist", "image"), "output folder: writes OUT/"+image.LayoutDirName+" and OUT/"+image.TarballName+"; -push reads OUT/"+image.LayoutDirName)
	fs.StringVar(&c.tag, "tag", "", "tag inside the docker tarball and the layout (default "+image.DefaultRepository+":VERSION)")
	fs.StringVar(&c.push, "push", "", "push the image in OUT/"+image.LayoutDirName+" to this reference (registry/repository:tag) instead of building")
	if err := fs.Parse(args); err != nil {
		return c, usageError{err}
	}
	if fs.NArg() > 0 {
		return c, usageError{fmt.Errorf("unexpected arguments %q: every input is a flag", fs.Args())}
	}
	if c.push != "" {
		return c, nil
	}
	if c.build.Binary == "" {
		return c, usageError{errors.New("-binary is required: build the archiver with CGO_ENABLED=0 and pass its path")}
	}
	if created == "" {
		created = sourceDateEpoch
	}
	if created != "" {
		t, err := parseTime(created)
		if err != nil {
			return c, usageError{err}
		}
		c.build.Created = t
	}
	if c.tag == "" {
		c.tag = image.DefaultRepository + ":" + c.build.Version
	}
	return c, nil
}

// parseTime accepts Unix seconds (git log --format=%ct, SOURCE_DATE_EPOCH) or RFC 3339.
func parseTime(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return time.Time{}, fmt.Errorf("creation time %d is negative: give Unix seconds since 1970", n)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("creation time %q is neither Unix seconds nor RFC 3339 (e.g. 2025-01-31T12:00:00Z)", s)
	}
	return t.UTC(), nil
}

func run(ctx context.Context, args []string, sourceDateEpoch string, stdout, stderr io.Writer) int {
	c, err := parse(args, sourceDateEpoch, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "mkimage: %v\n", err)
		return 2
	}
	if c.push != "" {
		err = push(ctx, c, stdout, stderr)
	} else {
		err = build(c, stdout, stderr)
	}
	if err != nil {
		var ue usageError
		fmt.Fprintf(stderr, "mkimage: %v\n", err)
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

func build(c config, stdout, stderr io.Writer) error {
	tag, err := name.NewTag(c.tag)
	if err != nil {
		return usageError{fmt.Errorf("-tag %q is not a valid image name with a tag (e.g. %s:v1.2.3; a version from -version must use only letters, digits, '_', '.', '-'): %w", c.tag, image.DefaultRepository, err)}
	}
	img, err := image.Build(c.build)
	if err != nil {
		return err
	}
	digest, err := image.Write(c.out, img, tag)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "mkimage: wrote %s and %s (tag %s)\n",
		filepath.Join(c.out, image.LayoutDirName), filepath.Join(c.out, image.TarballName), tag)
	fmt.Fprintln(stdout, digest)
	return nil
}

func push(ctx context.Context, c config, stdout, stderr io.Writer) error {
	ref, err := name.ParseReference(c.push)
	if err != nil {
		return usageError{fmt.Errorf("-push %q is not an image reference (e.g. ghcr.io/acme/%s:v1.2.3): %w", c.push, image.DefaultRepository, err)}
	}
	if strings.Contains(c.push, "@") {
		return usageError{fmt.Errorf("-push %q names a digest: give a tag to push to (registry/repository:tag)", c.push)}
	}
	img, err := image.ReadLayout(filepath.Join(c.out, image.LayoutDirName))
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "mkimage: pushing %s (credentials from the Docker config)\n", ref)
	d, err := image.Push(ctx, img, ref, authn.DefaultKeychain)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, d)
	return nil
}
