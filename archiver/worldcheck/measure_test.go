package worldcheck

import (
	"math/rand/v2"
	"testing"
)

// measuredKinds are the five damages issue 26 measures, each at
// placesPerKind random places; the sample mode checks sampleShare.
var measuredKinds = []string{
	"flipped byte in a chunk's payload",
	"truncated region file",
	"overlapping table entry",
	"chunk at the wrong coordinates",
	"broken level.dat",
}

const (
	placesPerKind = 20 // 100 places in all
	sampleShare   = 0.1
)

// wholeInSample are the damages the sample mode finds whatever its share:
// every location table, level.dat and player file is read whole.
var wholeInSample = map[string]bool{"truncated region file": true, "overlapping table entry": true, "broken level.dat": true}

// TestCorruptionDetectionRate damages copies of a generated world at 100
// seeded random places (20 of each kind) and checks that the full check
// names every one, and that the sample check (--chunks 10%) finds every
// damage to a table or level.dat; it logs the sample mode's detection rate
// per kind (README.md "Verifying a backup" quotes it).
func TestCorruptionDetectionRate(t *testing.T) {
	if testing.Short() {
		t.Skip("100 damaged worlds")
	}
	all := corruptions()
	var sampled, total int
	for _, name := range measuredKinds {
		damage := all[name]
		found := 0
		for place := range uint64(placesPerKind) {
			dir := world(t)
			r := rand.New(rand.NewPCG(place, 2626))
			file, chunk, word := damage(t, r, dir)
			full := check(t, dir, Options{})
			if full.Status != StatusFailed || !named(full.Problems, file, chunk, word) {
				t.Fatalf("%s, place %d: the full check did not name %s chunk %v with %q: %v", name, place, file, chunk, word, full.Problems)
			}
			sample := check(t, dir, Options{Share: sampleShare, Seed: place})
			if sample.Status == StatusFailed {
				found++
			} else if wholeInSample[name] {
				t.Fatalf("%s, place %d: the sample check missed a damage it reads whole (%s)", name, place, file)
			}
		}
		t.Logf("%-36s full %d/%d, sample %.0f%%: %d/%d", name, placesPerKind, placesPerKind, 100*sampleShare, found, placesPerKind)
		sampled += found
		total += placesPerKind
	}
	t.Logf("detected: full mode %d/%d; sample mode (%.0f%% of chunks) %d/%d = %.0f%%", total, total, 100*sampleShare, sampled, total, 100*float64(sampled)/float64(total))
}
