package tarstream

import (
	"path"

	"github.com/worldbackup/worldbackup/jobapi"
)

// DefaultExcludes are the exclude patterns used when none are configured:
// server jars, caches, logs and temp files, like docker-mc-backup.
// They are jobapi's, which the components' schema quotes.
var DefaultExcludes = jobapi.DefaultExcludes()

// pattern is one compiled exclude pattern.
type pattern struct {
	src     string // as given, for logs
	glob    string // without the trailing '/'
	dirOnly bool   // a trailing '/' restricts the pattern to directories
}

// matcher decides which entries are excluded from the archive.
type matcher []pattern

// ValidateExcludes reports the first malformed pattern in globs.
func ValidateExcludes(globs []string) error {
	_, err := compileExcludes(globs)
	return err
}

// compileExcludes checks and compiles glob patterns with
// jobapi.ParseExclude, the rule the components apply at preview. A pattern
// matches an entry when path.Match matches it against the entry's slash
// path relative to the world root or against its base name; a trailing '/'
// restricts it to directories (an excluded directory is not descended
// into).
func compileExcludes(globs []string) (matcher, error) {
	m := make(matcher, 0, len(globs))
	for _, g := range globs {
		glob, dirOnly, err := jobapi.ParseExclude(g)
		if err != nil {
			return nil, err
		}
		m = append(m, pattern{src: g, glob: glob, dirOnly: dirOnly})
	}
	return m, nil
}

// match returns the pattern that excludes the entry at rel (a slash path
// relative to the world root), or "" when none does.
func (m matcher) match(rel string, isDir bool) string {
	base := path.Base(rel)
	for _, p := range m {
		if p.dirOnly && !isDir {
			continue
		}
		if ok, _ := path.Match(p.glob, rel); ok {
			return p.src
		}
		if ok, _ := path.Match(p.glob, base); ok {
			return p.src
		}
	}
	return ""
}
