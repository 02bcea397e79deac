package store

import (
	"fmt"
	"io"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkLocalPut writes a 256 MiB archive in 2 MiB aligned buffers (as
// tarstream hands them over) through Put, fsync and rename included, with
// O_DIRECT (on ext4 and XFS) and through the page cache with the background
// syncs. cpu: on a 2-core VM the copy into the page cache cost more CPU
// time than compressing the archive.
func BenchmarkLocalPut(b *testing.B) {
	const total, chunk = 256 << 20, 2 << 20
	buf := AlignedBuffer(chunk)[:chunk]
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for _, direct := range []bool{true, false} {
		b.Run(fmt.Sprintf("direct=%v", direct), func(b *testing.B) {
			l, err := NewLocal(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			l.noDirect = !direct
			b.SetBytes(total)
			cpu0 := cpuTime(b)
			for i := 0; b.Loop(); i++ {
				key := fmt.Sprintf("srv/run-%d.tar.zst", i)
				if _, err := l.Put(b.Context(), key, func(w io.Writer) error {
					for range total / chunk {
						if _, err := w.Write(buf); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				if err := l.Remove(b.Context(), key); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuTime(b)-cpu0).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// cpuTime returns the user and system CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
