package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Names of the outputs inside an output folder (dist/image by default).
const (
	// LayoutDirName is the OCI image layout folder (skopeo's oci:dist/image/oci, crane, containerd).
	LayoutDirName = "oci"
	// TarballName is the `docker load`-able tarball.
	TarballName = "archiver.tar"
)

// Write writes img into outDir as an OCI layout (outDir/oci) and a
// `docker load` tarball tagged tag (outDir/archiver.tar), replacing earlier
// outputs, and returns the image's digest.
func Write(outDir string, img v1.Image, tag name.Tag) (v1.Hash, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("computing the image digest: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return v1.Hash{}, fmt.Errorf("creating output folder: %w", err)
	}
	if err := WriteLayout(filepath.Join(outDir, LayoutDirName), img, tag); err != nil {
		return v1.Hash{}, err
	}
	if err := WriteTarball(filepath.Join(outDir, TarballName), img, tag); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// WriteLayout writes img as a one-image OCI layout at dir. The index entry is
// annotated with the tag (org.opencontainers.image.ref.name = the tag part,
// io.containerd.image.name = the full name). An existing dir is replaced only
// when it is empty or an OCI layout (it holds an oci-layout file); the new
// layout is written next to it and renamed into place.
func WriteLayout(dir string, img v1.Image, tag name.Tag) error {
	if err := replaceable(dir); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("creating temporary layout folder: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("setting permissions of %q: %w", tmp, err)
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("writing OCI layout in %q: %w", tmp, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          containerdName(tag),
	})); err != nil {
		return fmt.Errorf("writing the image into OCI layout %q: %w", tmp, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the previous OCI layout %q: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("moving OCI layout into place at %q: %w", dir, err)
	}
	done = true
	return nil
}

// containerdName is the tag as containerd names images (docker.io/library/x:tag for Docker Hub).
func containerdName(tag name.Tag) string {
	reg := tag.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + tag.RepositoryStr() + ":" + tag.TagStr()
}

// replaceable reports an error when dir exists and is neither empty nor an OCI layout.
func replaceable(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking output folder %q: %w", dir, err)
	}
	if len(ents) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("refusing to replace %q: it is not an OCI layout (no oci-layout file); choose another output folder or remove it", dir)
	}
	return nil
}

// WriteTarball writes img as a `docker load`-able tarball tagged tag at p,
// through a temporary file renamed into place.
func WriteTarball(p string, img v1.Image, tag name.Tag) error {
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-")
	if err != nil {
		return fmt.Errorf("creating temporary tarball: %w", err)
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := tarball.Write(tag, img, f); err != nil {
		return fmt.Errorf("writing image tarball %q: %w", tmp, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("setting permissions of %q: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %q: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %q: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("moving image tarball into place at %q: %w", p, err)
	}
	done = true
	return nil
}

// ReadLayout returns the one image of the OCI layout at dir (as written by WriteLayout).
func ReadLayout(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading OCI layout %q (run `make image` first): %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading index of OCI layout %q: %w", dir, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("OCI layout %q holds %d entries, want exactly one image: rebuild it with `make image`", dir, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("reading image %s of OCI layout %q: %w", m.Manifests[0].Digest, dir, err)
	}
	return img, nil
}

// Push uploads img to ref with credentials from kc (authn.DefaultKeychain
// reads $DOCKER_CONFIG/config.json or ~/.docker/config.json, including
// credential helpers) and returns the pushed image's digest reference.
func Push(ctx context.Context, img v1.Image, ref name.Reference, kc authn.Keychain) (name.Digest, error) {
	digest, err := img.Digest()
	if err != nil {
		return name.Digest{}, fmt.Errorf("computing the image digest: %w", err)
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)); err != nil {
		return name.Digest{}, fmt.Errorf("pushing image to %s: %w", ref, err)
	}
	d, err := name.NewDigest(ref.Context().Name() + "@" + digest.String())
	if err != nil {
		return name.Digest{}, fmt.Errorf("naming pushed image: %w", err)
	}
	return d, nil
}
