// Package shard splits one stack's config (the program's, program/deploy)
// into stacks of a bounded number of servers and drives them concurrently
// through the Pulumi CLI, the program served to it inline (inline.go): the
// `fleet` command (program/fleet).
//
// The file state backend writes the whole state after every step, so one
// stack's `up` costs the square of its resources (issue 27); shards of at
// most Size servers keep each stack's state small, so a fleet costs
// linearly in its servers and keeps a checkpoint after every step.
//
// A server never moves between shards: Plan keeps each server in the shard
// that holds it (read from the shards' own config), and puts new servers
// into shards with room, then into new ones. Two stacks never manage the
// same Kubernetes object, not even for the length of one run.
package shard

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Server is one entry of worldbackup:servers, kept as it was written.
type Server struct {
	Name string
	Raw  json.RawMessage
}

// ParseServers decodes a worldbackup:servers value (a JSON list of objects
// with a name), keeping each entry's JSON as it is.
func ParseServers(value string) ([]Server, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(value), &raw); err != nil {
		return nil, fmt.Errorf("worldbackup:servers must be a list of objects: %w", err)
	}
	servers := make([]Server, 0, len(raw))
	seen := map[string]bool{}
	for i, r := range raw {
		var s struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(r, &s); err != nil || s.Name == "" {
			return nil, fmt.Errorf("worldbackup:servers[%d] needs a name", i)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("worldbackup:servers[%d].name %q is listed twice", i, s.Name)
		}
		seen[s.Name] = true
		servers = append(servers, Server{Name: s.Name, Raw: r})
	}
	return servers, nil
}

// StackName is the name of shard i of the stack parent.
func StackName(parent string, i int) string {
	return fmt.Sprintf("%s.shard-%03d", parent, i)
}

// ShardIndex returns i when stack is StackName(parent, i).
func ShardIndex(parent, stack string) (int, bool) {
	rest, ok := strings.CutPrefix(stack, parent+".shard-")
	if !ok || len(rest) < 3 {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i >= 0 && StackName(parent, i) == stack
}

// Plan assigns servers (in config order) to shards of at most size
// servers. prev is what each existing shard holds now (by index). A server
// listed in a shard stays there; a new server goes to the lowest shard
// with room, else to a new shard after the highest. The result has an
// entry for every shard of prev and every new one: an empty list is a
// shard to destroy. Within a shard servers keep their config order.
func Plan(servers []string, prev map[int][]string, size int) map[int][]string {
	if size < 1 {
		size = 1
	}
	listed := map[string]bool{}
	for _, s := range servers {
		listed[s] = true
	}
	where := map[string]int{}
	plan := map[int][]string{}
	count := map[int]int{}
	for i, names := range prev {
		plan[i] = nil
		for _, n := range names {
			if _, dup := where[n]; listed[n] && !dup {
				where[n] = i
				count[i]++
			}
		}
	}
	next := 0
	for _, s := range servers {
		if _, ok := where[s]; ok {
			continue
		}
		for count[next] >= size {
			next++
		}
		where[s] = next
		count[next]++
	}
	for _, s := range servers {
		plan[where[s]] = append(plan[where[s]], s)
	}
	return plan
}

// Indices returns the shard indices of plan in ascending order.
func Indices(plan map[int][]string) []int {
	var idx []int
	for i := range plan {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return idx
}
