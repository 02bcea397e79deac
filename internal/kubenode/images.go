package kubenode

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// buildPauseImage builds cmd/pause static and writes it as a one-layer image
// tarball tagged PauseImage at out.
func buildPauseImage(repoRoot, out string) error {
	return buildImage(repoRoot, out, binaryImage{
		pkg: "github.com/worldbackup/worldbackup/internal/kubenode/cmd/pause", bin: "pause",
		tag: PauseImage, user: "65535:65535",
	})
}

// GameServerImage is the tag of the stand-in game server's image
// (internal/gameserver/cmd/gameserver at /gameserver, running as root).
const GameServerImage = "localhost/worldbackup-gameserver:test"

// buildGameServerImage builds the gameserver command static and writes it as
// a one-layer image tarball tagged GameServerImage at out.
func buildGameServerImage(repoRoot, out string) error {
	return buildImage(repoRoot, out, binaryImage{
		pkg: "github.com/worldbackup/worldbackup/internal/gameserver/cmd/gameserver", bin: "gameserver",
		tag: GameServerImage,
	})
}

// binaryImage is an image of one static Go binary at /<bin>, its entrypoint.
type binaryImage struct {
	pkg, bin, tag string
	user          string // the config's User; empty: root
}

// buildImage builds im.pkg static and writes it as a one-layer image tarball
// tagged im.tag at out.
func buildImage(repoRoot, out string, im binaryImage) error {
	bin := filepath.Join(filepath.Dir(out), im.bin)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, im.pkg)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v: %s", im.pkg, err, b)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: im.bin, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
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
		return fmt.Errorf("making the %s layer: %w", im.bin, err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		RootFS:       v1.RootFS{Type: "layers"},
		Config:       v1.Config{Entrypoint: []string{"/" + im.bin}, User: im.user},
	})
	if err != nil {
		return err
	}
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(im.tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, img)
}

// GameServerImage builds the stand-in game server's image and imports it
// into the node's containerd on first use, and returns its tag
// (GameServerImage) for a pod's image, with ImagePullPolicy Never.
func (nd *Node) GameServerImage(t testing.TB) string {
	t.Helper()
	nd.gameServer.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		tar := filepath.Join(nd.n.dir, "gameserver.tar")
		if err := buildGameServerImage(nd.n.repoRoot, tar); err != nil {
			nd.gameServer.err = err
			return
		}
		nd.gameServer.err = nd.n.importImage(ctx, tar)
	})
	if nd.gameServer.err != nil {
		t.Fatalf("kubenode: the game server image: %v", nd.gameServer.err)
	}
	return GameServerImage
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

// TagImage gives the imported image src the further tag dst in the node's
// containerd (the same image under another name, as a re-tag in a registry
// would), removed when t ends.
func (nd *Node) TagImage(t testing.TB, src, dst string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, dst = containerdName(src), containerdName(dst)
	if out, err := nd.n.ctr(ctx, "images", "tag", "--force", src, dst); err != nil {
		t.Fatalf("kubenode: tagging %s as %s: %v: %s", src, dst, err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := nd.n.ctr(ctx, "images", "rm", dst); err != nil {
			t.Errorf("kubenode: removing the tag %s: %v: %s", dst, err, bytes.TrimSpace(out))
		}
	})
}

// containerdName is ref as containerd names an image: a reference without
// a registry is on docker.io, and a one-part Docker Hub path is under
// library/ (as the kubelet resolves it).
func containerdName(ref string) string {
	first, rest, ok := strings.Cut(ref, "/")
	if !ok || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		if !ok {
			return "docker.io/library/" + ref
		}
		return "docker.io/" + first + "/" + rest
	}
	return ref
}
