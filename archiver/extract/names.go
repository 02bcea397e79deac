package extract

import (
	"errors"
	"fmt"
	"strings"
)

// reservedPrefix starts the names the restore uses for its own folders and
// journal; an archive may not contain a top-level entry starting with it.
const reservedPrefix = ".worldbackup-"

// lostFound is the folder mkfs puts at the root of ext2/3/4 volumes. When
// DIR is a volume root it belongs to the volume, not to the world: it is
// left in place and not counted when deciding whether DIR is empty.
const lostFound = "lost+found"

// Linux's PATH_MAX (with its NUL) and NAME_MAX: longer names could not be
// handled by ordinary tools, whatever os.Root can create.
const (
	maxPath      = 4095
	maxComponent = 255
)

// cleanName turns an archive member name into a slash-separated path
// relative to the extraction root ("" for the root itself). It refuses
// empty and absolute names, NUL bytes and any ".." component; "." and empty
// components (./a//b/) are dropped.
func cleanName(raw string) (string, error) {
	switch {
	case raw == "":
		return "", errors.New("empty name")
	case strings.IndexByte(raw, 0) >= 0:
		return "", errors.New("name contains a NUL byte")
	case strings.HasPrefix(raw, "/"):
		return "", errors.New("absolute name")
	case len(raw) > maxPath:
		return "", fmt.Errorf("name longer than %d bytes", maxPath)
	}
	parts := make([]string, 0, strings.Count(raw, "/")+1)
	for p := range strings.SplitSeq(raw, "/") {
		switch p {
		case "", ".":
		case "..":
			return "", errors.New(`name contains a ".." component`)
		default:
			if len(p) > maxComponent {
				return "", fmt.Errorf("a name component is longer than %d bytes", maxComponent)
			}
			parts = append(parts, p)
		}
	}
	name := strings.Join(parts, "/")
	if len(parts) > 0 && strings.HasPrefix(parts[0], reservedPrefix) {
		return "", fmt.Errorf("top-level name %q is reserved for the restore's own staging folders", parts[0])
	}
	return name, nil
}
