package jobapi

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "36h", want: 36 * time.Hour},
		{in: "30d", want: 30 * 24 * time.Hour},
		{in: "2w", want: 14 * 24 * time.Hour},
		{in: "1w3d12h", want: (10*24 + 12) * time.Hour},
		{in: "90m", want: 90 * time.Minute},
		{in: "", wantErr: true},
		{in: "3x", wantErr: true},
		{in: "d", wantErr: true},
		{in: "-5h", wantErr: true},
		{in: "3d2w", wantErr: true},
		{in: "99999999999d", wantErr: true},
		{in: "1.5h", want: 90 * time.Minute},
		{in: "90s", want: 90 * time.Second},
		{in: "100000d", want: 100000 * 24 * time.Hour},
		{in: "200000d", wantErr: true},
		// Past what a time.Duration holds (about 292 years): an overflow
		// would wrap to a short or negative duration.
		{in: "30501w", wantErr: true},
		{in: "15251w", wantErr: true},
		{in: "15000w", want: 15000 * 7 * 24 * time.Hour},
		{in: "15000w9000d", wantErr: true},
		{in: "15000w2000000h", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
