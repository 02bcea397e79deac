package jobapi

import (
	"fmt"
	"path"
	"strings"
)

// ParseExclude checks one exclude pattern of a backup (--exclude, [archive]
// excludes, a component's excludes input) and returns the glob path.Match
// matches against an entry's slash path relative to the world root or its
// base name: the pattern without a leading "./" or "/" and without a
// trailing "/", which makes dirOnly true (the pattern then excludes only
// directories). A pattern that leaves no glob (e.g. "", "/", "./") matches
// nothing, and a malformed one (e.g. "[abc") would match nothing either:
// both are errors, which quote the pattern and say what to write.
func ParseExclude(pattern string) (glob string, dirOnly bool, err error) {
	glob = strings.TrimPrefix(pattern, "./")
	glob = strings.TrimLeft(glob, "/")
	if strings.HasSuffix(glob, "/") {
		dirOnly = true
		glob = strings.TrimRight(glob, "/")
	}
	if glob == "" {
		return "", false, fmt.Errorf("exclude pattern %q matches nothing: give a glob such as \"*.jar\" or \"cache/\"", pattern)
	}
	if _, err := path.Match(glob, ""); err != nil {
		return "", false, fmt.Errorf("exclude pattern %q is not a glob (%w): close each '[' with ']' and end no pattern with a lone '\\', e.g. \"*.jar\", \"cache/\" or \"region/r.[0-9]*.mca\"", pattern, err)
	}
	return glob, dirOnly, nil
}
