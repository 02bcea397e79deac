package pulumitools_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/internal/pulumitools"
	"github.com/worldbackup/worldbackup/internal/stacktest"
)

func TestPathOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"indices ascend", []string{"a:s[2].name", "a:s[0].name", "a:s[1].name"}, []string{"a:s[0].name", "a:s[1].name", "a:s[2].name"}},
		{"by value, not by text", []string{"a:s[10].name", "a:s[9].name", "a:s[100].x", "a:s[2].name"}, []string{"a:s[2].name", "a:s[9].name", "a:s[10].name", "a:s[100].x"}},
		{"nested arrays", []string{"a:s[1].e[10]", "a:s[1].e[2]", "a:s[0].e[1]", "a:s[1].name"}, []string{"a:s[0].e[1]", "a:s[1].e[2]", "a:s[1].e[10]", "a:s[1].name"}},
		{"leading zeros", []string{"a:x007", "a:x10", "a:x7"}, []string{"a:x007", "a:x7", "a:x10"}},
		{"plain keys", []string{"a:runId", "a:image", "a:backupClaim"}, []string{"a:backupClaim", "a:image", "a:runId"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			if got := pulumitools.PathOrder(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("PathOrder(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Errorf("PathOrder changed its argument to %q", tc.in)
			}
		})
	}
}

// TestSetConfigManyServers sets a list of 12 servers by path through the
// real CLI (`config set-all --path`): in map order, servers[2] (or
// servers[10]) would often come before servers[1] and fail with "array
// index out of range" (48 keys: a random order that happens to work is
// rare). The second call replaces the first one's config.
func TestSetConfigManyServers(t *testing.T) {
	tools := stacktest.Require(t)
	const n = 12
	cfg := map[string]string{"worldbackup:image": "registry.example/archiver:test"}
	var want []string
	for i := range n {
		name := fmt.Sprintf("srv-%02d", i)
		want = append(want, name)
		cfg[fmt.Sprintf("worldbackup:servers[%d].name", i)] = name
		cfg[fmt.Sprintf("worldbackup:servers[%d].excludes[0]", i)] = "logs/"
		cfg[fmt.Sprintf("worldbackup:servers[%d].excludes[1]", i)] = "cache/"
		cfg[fmt.Sprintf("worldbackup:servers[%d].excludes[2]", i)] = fmt.Sprintf("*.%d", i)
	}
	s := tools.InlineStack(t, "setconfig", func(*pulumi.Context) error { return nil },
		map[string]string{"worldbackup:runId": "old", "worldbackup:servers[0].name": "old"})
	stacktest.SetConfig(t, s, cfg)
	all, err := s.GetAllConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var servers []struct {
		Name     string   `json:"name"`
		Excludes []string `json:"excludes"`
	}
	if err := json.Unmarshal([]byte(all["worldbackup:servers"].Value), &servers); err != nil {
		t.Fatalf("worldbackup:servers = %q: %v", all["worldbackup:servers"].Value, err)
	}
	var got []string
	for i, sv := range servers {
		got = append(got, sv.Name)
		if w := []string{"logs/", "cache/", fmt.Sprintf("*.%d", i)}; !slices.Equal(sv.Excludes, w) {
			t.Errorf("servers[%d].excludes = %q, want %q", i, sv.Excludes, w)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("servers = %q, want %q", got, want)
	}
	if v := all["worldbackup:runId"].Value; v == "old" {
		t.Errorf("worldbackup:runId is %q: the old config is still set (want the project's default)", v)
	}
}
