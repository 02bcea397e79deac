package worldgen

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize parses a byte count such as "512MiB", "2GiB", "64M", "1.5G" or
// "1048576". K, M, G and T (with or without "iB" or "B") are powers of 1024.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	upper := strings.ToUpper(t)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{
		{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
		{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
	} {
		if strings.HasSuffix(upper, u.suffix) {
			mult = u.mult
			t = strings.TrimSpace(t[:len(t)-len(u.suffix)])
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*float64(mult) >= 1<<62 {
		return 0, fmt.Errorf("size %q: want a non-negative number with an optional unit, like 512MiB, 2GiB or 1048576", s)
	}
	return int64(v * float64(mult)), nil
}

// FormatSize renders n bytes with a binary unit, like "512.0 MiB".
func FormatSize(n int64) string {
	const units = "KMGT"
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/(1<<10), 0
	for v >= 1<<10 && i < len(units)-1 {
		v /= 1 << 10
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}
