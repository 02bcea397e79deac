package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// Keys of the program's config that the shards change.
const (
	KeyServers   = "worldbackup:servers"
	KeyRestores  = "worldbackup:restores"
	KeyRenderDir = "worldbackup:renderDir"
)

// Value is one config value in the form `pulumi config --json` prints and
// `pulumi config set-all --json` reads: Value is the text (an object's
// JSON), ObjectValue is set for an object.
type Value struct {
	Value       *string `json:"value"`
	ObjectValue any     `json:"objectValue,omitempty"`
	Secret      bool    `json:"secret,omitempty"`
}

// Config is a stack's config by full key.
type Config map[string]Value

// Text is the value of key ("" when unset).
func (c Config) Text(key string) string {
	if v, ok := c[key]; ok && v.Value != nil {
		return *v.Value
	}
	return ""
}

// object returns the object value holding raw JSON.
func object(raw []byte) Value {
	s := string(raw)
	var o any
	_ = json.Unmarshal(raw, &o)
	if o == nil {
		o = []any{}
	}
	return Value{Value: &s, ObjectValue: o}
}

// For returns the config of the shard holding names: parent's, with
// worldbackup:servers the shard's entries (in config order), the restores of
// its servers (restores of servers that no shard holds go to the shard
// with first set), and a relative renderDir made absolute against
// projectDir (a shard's inline program runs in another folder).
func For(parent Config, servers []Server, names []string, first bool, projectDir string) (Config, error) {
	c := Config{}
	for k, v := range parent {
		c[k] = v
	}
	var list []json.RawMessage
	for _, s := range servers {
		if slices.Contains(names, s.Name) {
			list = append(list, s.Raw)
		}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	sv := object(b)
	sv.Secret = parent[KeyServers].Secret
	c[KeyServers] = sv
	if r := parent.Text(KeyRestores); r != "" {
		var restores []json.RawMessage
		if err := json.Unmarshal([]byte(r), &restores); err != nil {
			return nil, fmt.Errorf("worldbackup:restores must be a list of objects: %w", err)
		}
		all := map[string]bool{}
		for _, s := range servers {
			all[s.Name] = true
		}
		mine := []json.RawMessage{}
		for _, raw := range restores {
			var e struct {
				Server string `json:"server"`
			}
			_ = json.Unmarshal(raw, &e)
			if slices.Contains(names, e.Server) || (first && !all[e.Server]) {
				mine = append(mine, raw)
			}
		}
		b, err := json.Marshal(mine)
		if err != nil {
			return nil, err
		}
		v := object(b)
		v.Secret = parent[KeyRestores].Secret
		c[KeyRestores] = v
	}
	if d := parent.Text(KeyRenderDir); d != "" && !filepath.IsAbs(d) {
		abs := filepath.Join(projectDir, d)
		v := parent[KeyRenderDir]
		v.Value = &abs
		c[KeyRenderDir] = v
	}
	return c, nil
}

// maxArgValue bounds a config value passed on the CLI's command line: Linux
// refuses an argument longer than 128 KiB (MAX_ARG_STRLEN), which a list
// of a thousand servers exceeds; a larger value goes through stdin.
const maxArgValue = 64 << 10

// CLIRunner runs the Pulumi CLI with args, stdin (nil: none) as its input.
type CLIRunner func(ctx context.Context, stdin io.Reader, args ...string) error

// SetConfig writes c as stack's config through run: the values up to
// maxArgValue in one `config set-all --json`, each larger one with `config
// set`, reading it from stdin as text (an object's JSON, which the program
// decodes as it decodes the object), a secret as a secret.
func SetConfig(ctx context.Context, run CLIRunner, stack string, c Config) error {
	small := Config{}
	var large []string
	for k, v := range c {
		if v.Value != nil && len(*v.Value) > maxArgValue {
			large = append(large, k)
			continue
		}
		small[k] = v
	}
	if len(small) > 0 {
		b, err := json.Marshal(small)
		if err != nil {
			return err
		}
		if err := run(ctx, nil, "config", "set-all", "--stack", stack, "--json", string(b)); err != nil {
			return err
		}
	}
	slices.Sort(large)
	for _, k := range large {
		mode := "--plaintext"
		if c[k].Secret {
			mode = "--secret"
		}
		if err := run(ctx, strings.NewReader(*c[k].Value), "config", "set", "--stack", stack, mode, k); err != nil {
			return fmt.Errorf("setting %s (%d bytes) through stdin: %w", k, len(*c[k].Value), err)
		}
	}
	return nil
}
