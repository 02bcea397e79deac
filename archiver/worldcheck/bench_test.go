package worldcheck

import "testing"

// BenchmarkCheck checks a generated world (a copy, 3 MiB) in full.
func BenchmarkCheck(b *testing.B) {
	dir := world(b)
	for b.Loop() {
		if _, err := Check(b.Context(), dir, Options{Now: testNow}); err != nil {
			b.Fatal(err)
		}
	}
}
