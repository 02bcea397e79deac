package kubenode

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/worldbackup/worldbackup/archiver/image"
)

// buildPauseImage builds cmd/pause static and writes it as a one-layer image
// tarball tagged PauseImage at out.
func buildPauseImage(repoRoot, out string) error {
	bin := filepath.Join(filepath.Dir(out), "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin,
		"github.com/worldbackup/worldbackup/internal/kubenode/cmd/pause")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the pause program: %v: %s", err, b)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithMediaType(types.OCIUncompressedLayer))
	if err != nil {
		return fmt.Errorf("making the pause layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		RootFS:       v1.RootFS{Type: "layers"},
		Config:       v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
	})
	if err != nil {
		return err
	}
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(PauseImage)
	if err != nil {
		return err
	}
	return image.WriteTarball(out, img, tag)
}

// tarballTag reads the first tag of a `docker save` tarball (manifest.json's
// RepoTags): how the image is named once imported, and how pods refer to it.
// The digest that `make image` prints is the OCI manifest's; containerd
// shows another one for the imported tarball, so pods use the tag.
func tarballTag(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s has no manifest.json: not an image tarball", path)
		}
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", path, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			return "", fmt.Errorf("reading %s's manifest.json: %w", path, err)
		}
		if len(m) == 0 || len(m[0].RepoTags) == 0 {
			return "", fmt.Errorf("%s's image has no tag", path)
		}
		return m[0].RepoTags[0], nil
	}
}
