// Package safelink holds the one rule for symbolic links that a restore
// accepts: the extractor refuses archives whose links break it, and the
// backup warns about such links when it stores them, so that a user learns at
// backup time that the archive will not restore with our tools.
package safelink

import (
	"errors"
	"fmt"
	"strings"
)

// MaxPath is the longest link target accepted, in bytes (Linux's PATH_MAX - 1).
const MaxPath = 4095

// Check refuses a symlink target that could resolve outside the extraction
// root. name is the link's cleaned, slash-separated path inside the root.
//
// Lexical resolution (path.Join(dir, target) stays inside) is not enough:
// with "up" -> "." in the archive, "x" -> "up/.." is lexically "." but the
// kernel resolves "up" first and ".." then leaves the root. So a target must
// be relative, and may only climb ("..") at its start, and no higher than
// the link's folder is deep; after that it may only descend. Every folder a
// link climbs through is a real directory (entries are never written through
// symlinks), and every link it then descends through obeys the same rule, so
// resolution cannot leave the root.
func Check(name, target string) error {
	switch {
	case target == "":
		return errors.New("symlink has an empty target")
	case strings.IndexByte(target, 0) >= 0:
		return errors.New("symlink target contains a NUL byte")
	case strings.HasPrefix(target, "/"):
		return fmt.Errorf("symlink target %q is absolute, so it leaves the root", target)
	case len(target) > MaxPath:
		return fmt.Errorf("symlink target longer than %d bytes", MaxPath)
	}
	depth := strings.Count(name, "/") // components above the link's own name
	ups, named := 0, false
	for p := range strings.SplitSeq(target, "/") {
		switch p {
		case "", ".":
		case "..":
			if named {
				return fmt.Errorf(`symlink target %q has ".." after a name, which may climb out through another symlink; only leading ".." are allowed`, target)
			}
			ups++
			if ups > depth {
				return fmt.Errorf("symlink target %q leaves the root", target)
			}
		default:
			named = true
		}
	}
	return nil
}
