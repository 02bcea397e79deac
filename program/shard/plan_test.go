package shard

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
)

func names(n int, prefix string) []string {
	var s []string
	for i := range n {
		s = append(s, fmt.Sprintf("%s%d", prefix, i))
	}
	return s
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []string
		prev    map[int][]string
		size    int
		want    map[int][]string
	}{
		{"fresh: fill in order", names(5, "s"), nil, 2, map[int][]string{0: {"s0", "s1"}, 1: {"s2", "s3"}, 2: {"s4"}}},
		{"a server stays in its shard", []string{"a", "b", "c"}, map[int][]string{1: {"a"}, 0: {"c"}}, 2,
			map[int][]string{0: {"b", "c"}, 1: {"a"}}},
		{"removed servers leave, an emptied shard is retired", []string{"a", "d"}, map[int][]string{0: {"a", "b"}, 1: {"c"}}, 2,
			map[int][]string{0: {"a", "d"}, 1: nil}},
		{"an emptied shard takes new servers before a new shard", []string{"a", "b", "n"}, map[int][]string{0: {"a", "b"}, 1: {"c"}}, 2,
			map[int][]string{0: {"a", "b"}, 1: {"n"}}},
		{"a full shard gets no more", []string{"x", "a", "b"}, map[int][]string{0: {"a", "b"}}, 2,
			map[int][]string{0: {"a", "b"}, 1: {"x"}}},
		{"a shard over the size keeps its servers", []string{"a", "b", "c", "n"}, map[int][]string{0: {"a", "b", "c"}}, 2,
			map[int][]string{0: {"a", "b", "c"}, 1: {"n"}}},
		{"a server two shards claim is planned once", []string{"a"}, map[int][]string{0: {"a"}, 3: {"a"}}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(tc.servers, tc.prev, tc.size)
			if tc.want == nil { // only: each server exactly once
				count := map[string]int{}
				for _, ns := range got {
					for _, n := range ns {
						count[n]++
					}
				}
				for _, s := range tc.servers {
					if count[s] != 1 {
						t.Fatalf("%s is in %d shards: %v", s, count[s], got)
					}
				}
				return
			}
			if !maps.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("Plan = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPlanGrowsWithoutMoving: a fleet that grows, shrinks and grows again
// never moves a server to another shard, and no shard exceeds the size.
func TestPlanGrowsWithoutMoving(t *testing.T) {
	const size = 7
	prev := map[int][]string{}
	home := map[string]int{}
	for step, servers := range [][]string{names(20, "a"), append(names(20, "a"), names(30, "b")...), names(30, "b"), append(names(30, "b"), names(25, "c")...)} {
		plan := Plan(servers, prev, size)
		seen := 0
		for i, ns := range plan {
			if len(ns) > size {
				t.Fatalf("step %d: shard %d holds %d servers, size %d", step, i, len(ns), size)
			}
			for _, n := range ns {
				seen++
				if h, ok := home[n]; ok && h != i {
					t.Fatalf("step %d: %s moved from shard %d to %d", step, n, h, i)
				}
				home[n] = i
			}
		}
		if seen != len(servers) {
			t.Fatalf("step %d: %d servers planned, want %d", step, seen, len(servers))
		}
		prev = map[int][]string{}
		for i, ns := range plan {
			if len(ns) > 0 {
				prev[i] = ns
			}
		}
	}
}

func TestShardIndex(t *testing.T) {
	for _, tc := range []struct {
		stack string
		i     int
		ok    bool
	}{{"prod.shard-000", 0, true}, {"prod.shard-012", 12, true}, {"prod.shard-1234", 1234, true}, {"prod", 0, false},
		{"prod.shard-12", 0, false}, {"prod.shard-abc", 0, false}, {"prod2.shard-000", 0, false}, {"prod.shard--01", 0, false}} {
		i, ok := ShardIndex("prod", tc.stack)
		if ok != tc.ok || (ok && i != tc.i) {
			t.Errorf("ShardIndex(prod, %q) = %d, %v; want %d, %v", tc.stack, i, ok, tc.i, tc.ok)
		}
		if ok && StackName("prod", i) != tc.stack {
			t.Errorf("StackName(prod, %d) = %q, want %q", i, StackName("prod", i), tc.stack)
		}
	}
}

func TestFor(t *testing.T) {
	str := func(s string) *string { return &s }
	servers, err := ParseServers(`[{"name":"a","schedule":"@daily-random"},{"name":"b"},{"name":"c","excludes":["x"]}]`)
	if err != nil {
		t.Fatal(err)
	}
	parent := Config{
		"worldbackup:image":     {Value: str("img:1")},
		"worldbackup:servers":   {Value: str("ignored"), ObjectValue: []any{}},
		"worldbackup:restores":  {Value: str(`[{"server":"c","archiveRef":"/r/c","sha256":"s"},{"server":"gone","archiveRef":"/r/g","sha256":"s"}]`), ObjectValue: []any{}},
		"worldbackup:renderDir": {Value: str("out")},
		"worldbackup:clusters":  {Value: str(`[{"name":"eu","kubeconfig":"secret"}]`), ObjectValue: []any{}, Secret: true},
	}
	first, err := For(parent, servers, []string{"c", "a"}, true, "/proj")
	if err != nil {
		t.Fatal(err)
	}
	if got := first.Text(KeyServers); got != `[{"name":"a","schedule":"@daily-random"},{"name":"c","excludes":["x"]}]` {
		t.Errorf("servers %s: want a and c, as written, in config order", got)
	}
	if got := first.Text(KeyRestores); got != `[{"server":"c","archiveRef":"/r/c","sha256":"s"},{"server":"gone","archiveRef":"/r/g","sha256":"s"}]` {
		t.Errorf("restores of the first shard %s: want c's and the one of an unlisted server", got)
	}
	if first.Text(KeyRenderDir) != "/proj/out" || first.Text("worldbackup:image") != "img:1" || !first["worldbackup:clusters"].Secret {
		t.Errorf("config %v: want renderDir absolute, the rest as the parent's (secrets secret)", first)
	}
	other, err := For(parent, servers, []string{"b"}, false, "/proj")
	if err != nil {
		t.Fatal(err)
	}
	if got := other.Text(KeyRestores); got != `[]` {
		t.Errorf("restores of another shard %s, want none", got)
	}
	// What `pulumi config set-all --json` reads: objects with value and objectValue.
	b, _ := json.Marshal(other)
	var back map[string]map[string]any
	if err := json.Unmarshal(b, &back); err != nil || back[KeyServers]["objectValue"] == nil || back[KeyServers]["value"] != `[{"name":"b"}]` {
		t.Errorf("JSON form %s: want servers with value and objectValue", b)
	}
	if parent.Text(KeyRenderDir) != "out" {
		t.Error("For changed the parent's config")
	}
}

func TestParseServersRefuses(t *testing.T) {
	for _, v := range []string{`{}`, `[{"nmae":"a"}]`, `[{"name":"a"},{"name":"a"}]`} {
		if _, err := ParseServers(v); err == nil {
			t.Errorf("ParseServers(%s) accepted it", v)
		}
	}
}
