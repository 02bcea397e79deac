package image

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case
	args string
	line int
}

// parseDockerfile splits a Dockerfile into instructions (comments and
// parser directives dropped, backslash continuations joined).
func parseDockerfile(src string) []instruction {
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(src, "\n") {
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\"))
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(line)
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			continue
		}
		cmd, args, _ := strings.Cut(text, " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start})
	}
	return out
}

// keyValues parses `k=v k2="v 2"` (ENV, LABEL, ARG).
func keyValues(s string) ([][2]string, error) {
	var tokens []string
	var cur strings.Builder
	inQuote := false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
		case (r == ' ' || r == '\t') && !inQuote:
			if cur.Len() > 0 {
				tokens = append(tokens, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unbalanced quote in %q", s)
	}
	if cur.Len() > 0 {
		tokens = append(tokens, cur.String())
	}
	var kvs [][2]string
	for _, tok := range tokens {
		k, v, ok := strings.Cut(tok, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", tok)
		}
		kvs = append(kvs, [2]string{k, v})
	}
	return kvs, nil
}

// TestDockerfileMatchesImage checks that the Dockerfile at the repository
// root declares what Build puts in the image config.
func TestDockerfileMatchesImage(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	all := parseDockerfile(string(src))
	last := -1
	for i, in := range all {
		if in.cmd == "FROM" {
			last = i
		}
	}
	if last < 0 {
		t.Fatal("Dockerfile has no FROM")
	}
	if all[last].args != "scratch" {
		t.Errorf("final stage is FROM %s, want FROM scratch (the image is one layer on an empty base)", all[last].args)
	}
	final := all[last+1:]

	var (
		entrypoint, env []string
		user, workdir   string
		labels          = map[string]string{}
		args            = map[string]string{}
		entrypoints     int
	)
	for _, in := range final {
		switch in.cmd {
		case "ENTRYPOINT":
			entrypoints++
			if err := json.Unmarshal([]byte(in.args), &entrypoint); err != nil {
				t.Errorf("line %d: ENTRYPOINT must be the exec (JSON) form: %v", in.line, err)
			}
		case "ENV", "LABEL", "ARG":
			kvs, err := keyValues(in.args)
			if err != nil {
				t.Fatalf("line %d: %s: %v", in.line, in.cmd, err)
			}
			for _, kv := range kvs {
				switch in.cmd {
				case "ENV":
					env = append(env, kv[0]+"="+kv[1])
				case "LABEL":
					labels[kv[0]] = kv[1]
				case "ARG":
					args[kv[0]] = kv[1]
				}
			}
		case "USER":
			user = in.args
		case "WORKDIR":
			workdir = in.args
		case "CMD":
			t.Errorf("line %d: the image has no CMD (the Job passes the arguments)", in.line)
		}
	}
	if entrypoints != 1 || !slices.Equal(entrypoint, Entrypoint()) {
		t.Errorf("Dockerfile ENTRYPOINT %q (%d instructions), image entrypoint %q", entrypoint, entrypoints, Entrypoint())
	}
	if !slices.Equal(env, Env()) {
		t.Errorf("Dockerfile ENV %q, image env %q", env, Env())
	}
	if user != User || workdir != WorkingDir {
		t.Errorf("Dockerfile USER %q WORKDIR %q, image user %q workdir %q", user, workdir, User, WorkingDir)
	}

	// Labels: the same keys; fixed values equal; build-time values come from
	// ARGs whose defaults equal mkimage's defaults.
	o := Options{Binary: "unused"}.withDefaults()
	want := o.Labels()
	fromArg := map[string]string{
		LabelSource:   "SOURCE",
		LabelRevision: "REVISION",
		LabelVersion:  "VERSION",
		LabelCreated:  "CREATED",
	}
	gotKeys, wantKeys := mapKeys(labels), mapKeys(want)
	if !reflect.DeepEqual(gotKeys, wantKeys) {
		t.Errorf("Dockerfile LABEL keys %q, image label keys %q", gotKeys, wantKeys)
	}
	for key, wantValue := range want {
		got := labels[key]
		if arg, ok := fromArg[key]; ok {
			if got != "${"+arg+"}" {
				t.Errorf("LABEL %s=%q, want ${%s}", key, got, arg)
			}
			if args[arg] != wantValue {
				t.Errorf("ARG %s defaults to %q, mkimage defaults to %q", arg, args[arg], wantValue)
			}
			continue
		}
		if got != wantValue {
			t.Errorf("LABEL %s=%q, image has %q", key, got, wantValue)
		}
	}

	// The builder stage copies the same passwd and group files Build embeds.
	for _, f := range []string{"archiver/image/rootfs/etc/passwd", "archiver/image/rootfs/etc/group", "/etc/ssl/certs/ca-certificates.crt", "/rootfs/tmp", "chmod 1777"} {
		if !strings.Contains(string(src), f) {
			t.Errorf("Dockerfile does not mention %s", f)
		}
	}
}

func mapKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
