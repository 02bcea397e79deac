// Package storetest is the conformance suite every archive store passes.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/archiver/store"
)

// Store is the surface of an archive store the suite exercises.
type Store interface {
	Ref(key string) string
	Put(ctx context.Context, key string, write func(io.Writer) error) (int64, error)
	CleanTemps(ctx context.Context, key string) ([]string, error)
	Remove(ctx context.Context, key string) error
	Holds(ctx context.Context, key string) (bool, error)
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	Lock(ctx context.Context, key string) (unlock func(), err error)
	List(ctx context.Context, dir string) ([]store.Object, error)
	Walk(ctx context.Context, dir string, fn func([]store.Object) error) error
}

// Run runs the conformance suite; newStore returns an empty store.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s Store)
	}{
		{"put then open", testPutOpen},
		{"put overwrites", testOverwrite},
		{"failed write leaves nothing", testFailedWrite},
		{"canceled put leaves nothing", testCanceled},
		{"clean temps discards a pending put", testCleanPending},
		{"clean temps spares other keys", testCleanOtherKey},
		{"remove", testRemove},
		{"holds committed and pending archives", testHolds},
		{"invalid keys", testInvalidKeys},
		{"refs", testRefs},
		{"lock is exclusive", testLock},
		{"list shows committed archives only", testList},
		{"walk pages through every depth", testWalk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newStore(t)) })
	}
}

func put(t *testing.T, s Store, key string, data []byte) {
	t.Helper()
	n, err := s.Put(t.Context(), key, func(w io.Writer) error {
		// Several writes, one larger than any sane buffer.
		if _, err := w.Write(data[:len(data)/2]); err != nil {
			return err
		}
		_, err := w.Write(data[len(data)/2:])
		return err
	})
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	if n != int64(len(data)) {
		t.Fatalf("Put(%q) returned size %d, wrote %d", key, n, len(data))
	}
}

func mustRead(t *testing.T, s Store, key string) []byte {
	t.Helper()
	r, err := s.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("Open(%q): %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading %q: %v", key, err)
	}
	return b
}

func mustBeAbsent(t *testing.T, s Store, key string) {
	t.Helper()
	r, err := s.Open(t.Context(), key)
	if err == nil {
		r.Close()
		t.Fatalf("%q exists, want it absent", key)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open(%q): %v, want an error wrapping fs.ErrNotExist", key, err)
	}
}

func mustHaveNoTemps(t *testing.T, s Store, key string) {
	t.Helper()
	removed, err := s.CleanTemps(t.Context(), key)
	if err != nil {
		t.Fatalf("CleanTemps(%q): %v", key, err)
	}
	if len(removed) > 0 {
		t.Fatalf("temp data left behind for %q: %v", key, removed)
	}
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func testPutOpen(t *testing.T, s Store) {
	for _, size := range []int{0, 1, 3 << 20} {
		data := payload(size)
		put(t, s, "srv/run.tar.zst", data)
		if got := mustRead(t, s, "srv/run.tar.zst"); !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes, want the %d written", len(got), len(data))
		}
		mustHaveNoTemps(t, s, "srv/run.tar.zst")
	}
}

func testOverwrite(t *testing.T, s Store) {
	put(t, s, "srv/run.tar", []byte("first attempt, longer than the second"))
	put(t, s, "srv/run.tar", []byte("second"))
	if got := mustRead(t, s, "srv/run.tar"); string(got) != "second" {
		t.Fatalf("read %q, want %q", got, "second")
	}
}

func testFailedWrite(t *testing.T, s Store) {
	boom := errors.New("boom")
	for _, key := range []string{"srv/new.tar", "srv/existing.tar"} {
		if key == "srv/existing.tar" {
			put(t, s, key, []byte("old"))
		}
		_, err := s.Put(t.Context(), key, func(w io.Writer) error {
			w.Write(payload(2 << 20))
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Put: %v, want the write function's error", err)
		}
		if key == "srv/new.tar" {
			mustBeAbsent(t, s, key)
		} else if got := mustRead(t, s, key); string(got) != "old" {
			t.Fatalf("failed Put changed the existing archive to %d bytes", len(got))
		}
		mustHaveNoTemps(t, s, key)
	}
}

func testCanceled(t *testing.T, s Store) {
	ctx, cancel := context.WithCancel(t.Context())
	_, err := s.Put(ctx, "srv/run.tar", func(w io.Writer) error {
		w.Write([]byte("partial"))
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put: %v, want context.Canceled", err)
	}
	mustBeAbsent(t, s, "srv/run.tar")
	mustHaveNoTemps(t, s, "srv/run.tar")
}

// testCleanPending: the temp data of a Put in progress (which is what a
// killed attempt leaves behind) is discarded by CleanTemps; that Put fails.
func testCleanPending(t *testing.T, s Store) {
	started := make(chan struct{})
	proceed := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := s.Put(t.Context(), "srv/run.tar", func(w io.Writer) error {
			w.Write([]byte("partial"))
			close(started)
			<-proceed
			return nil
		})
		errc <- err
	}()
	<-started
	removed, err := s.CleanTemps(t.Context(), "srv/run.tar")
	if err != nil {
		t.Fatalf("CleanTemps: %v", err)
	}
	if len(removed) != 1 {
		t.Errorf("CleanTemps removed %v, want one temp", removed)
	}
	close(proceed)
	if err := <-errc; !errors.Is(err, store.ErrDiscarded) {
		t.Fatalf("Put after its temp data was discarded: %v, want an error wrapping store.ErrDiscarded", err)
	}
	mustBeAbsent(t, s, "srv/run.tar")
	mustHaveNoTemps(t, s, "srv/run.tar")
}

func testCleanOtherKey(t *testing.T, s Store) {
	started := make(chan struct{})
	proceed := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := s.Put(t.Context(), "srv/run-1.tar.zst.tar", func(w io.Writer) error {
			w.Write([]byte("other key"))
			close(started)
			<-proceed
			return nil
		})
		errc <- err
	}()
	<-started
	for _, key := range []string{"srv/run-1.tar.zst", "srv/run-1.tar", "other/run-1.tar.zst.tar"} {
		mustHaveNoTemps(t, s, key)
	}
	close(proceed)
	if err := <-errc; err != nil {
		t.Fatalf("Put of the other key: %v", err)
	}
	if got := mustRead(t, s, "srv/run-1.tar.zst.tar"); string(got) != "other key" {
		t.Fatalf("read %q", got)
	}
}

func testRemove(t *testing.T, s Store) {
	put(t, s, "srv/a.tar", []byte("a"))
	put(t, s, "srv/b.tar", []byte("b"))
	if err := s.Remove(t.Context(), "srv/a.tar"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	mustBeAbsent(t, s, "srv/a.tar")
	if got := mustRead(t, s, "srv/b.tar"); string(got) != "b" {
		t.Fatalf("Remove of a touched b: %q", got)
	}
	if err := s.Remove(t.Context(), "srv/a.tar"); err != nil {
		t.Fatalf("Remove of a missing archive: %v, want nil", err)
	}
}

func testHolds(t *testing.T, s Store) {
	holds := func(key string) bool {
		t.Helper()
		ok, err := s.Holds(t.Context(), key)
		if err != nil {
			t.Fatalf("Holds(%q): %v", key, err)
		}
		return ok
	}
	if holds("srv/a.tar") {
		t.Fatal("Holds of a missing archive = true")
	}
	// A pending Put's temp data is held; a failed Put leaves nothing.
	var pending, other bool
	whilePending(t, s, "srv/a.tar", func() { pending, other = holds("srv/a.tar"), holds("srv/a.ta") })
	if !pending || other {
		t.Errorf("Holds during a pending Put = %v, of a key its name starts with %v; want true, false", pending, other)
	}
	if holds("srv/a.tar") {
		t.Error("Holds after a failed Put = true, want false")
	}
	put(t, s, "srv/a.tar", []byte("a"))
	put(t, s, "srv/sub/b.tar", []byte("b"))
	if !holds("srv/a.tar") || !holds("srv/sub/b.tar") {
		t.Error("Holds of committed archives = false")
	}
	// A folder (a prefix of keys) is no archive.
	if holds("srv") || holds("srv/sub") {
		t.Error("Holds of a folder = true, want false")
	}
	if err := s.Remove(t.Context(), "srv/a.tar"); err != nil {
		t.Fatal(err)
	}
	if holds("srv/a.tar") {
		t.Error("Holds after Remove = true")
	}
}

func testInvalidKeys(t *testing.T, s Store) {
	for _, key := range []string{"", ".", "..", "../x.tar", "/abs.tar", "a/../b.tar", "srv/.hidden.tar", ".srv/x.tar", "a//b.tar", `a\b.tar`, "srv/"} {
		_, err := s.Put(t.Context(), key, func(w io.Writer) error { return nil })
		if err == nil {
			t.Errorf("Put(%q) succeeded, want an invalid key error", key)
		}
		if _, err := s.Lock(t.Context(), key); err == nil {
			t.Errorf("Lock(%q) succeeded, want an invalid key error", key)
		}
		if err := s.Remove(t.Context(), key); err == nil {
			t.Errorf("Remove(%q) succeeded, want an invalid key error", key)
		}
		if _, err := s.Holds(t.Context(), key); err == nil {
			t.Errorf("Holds(%q) succeeded, want an invalid key error", key)
		}
	}
}

func testRefs(t *testing.T, s Store) {
	a, b := s.Ref("srv/a.tar"), s.Ref("srv/b.tar")
	if a == b || a != s.Ref("srv/a.tar") || !strings.HasSuffix(a, "a.tar") {
		t.Fatalf("refs %q and %q: want stable, distinct refs ending with the key's name", a, b)
	}
}

func testLock(t *testing.T, s Store) {
	unlock, err := s.Lock(t.Context(), "srv/run.tar")
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// Another key is independent.
	unlockOther, err := s.Lock(t.Context(), "srv/other.tar")
	if err != nil {
		t.Fatalf("Lock of another key: %v", err)
	}
	unlockOther()

	// A second holder waits: it gives up when its context ends...
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Lock(ctx, "srv/run.tar"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock: %v, want it to wait until its context ends", err)
	}
	// ...and gets the lock once the first holder lets go. A waiter whose
	// Lock fails fails the test rather than hanging it.
	type locked struct {
		unlock func()
		err    error
	}
	got := make(chan locked, 1)
	go func() {
		u, err := s.Lock(t.Context(), "srv/run.tar")
		got <- locked{u, err}
	}()
	select {
	case l := <-got:
		if l.err != nil {
			t.Fatalf("waiting Lock: %v", l.err)
		}
		t.Fatal("second Lock succeeded while the first was held")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	wait, cancelWait := context.WithTimeout(t.Context(), lockWait)
	defer cancelWait()
	var u func()
	select {
	case l := <-got:
		if l.err != nil {
			t.Fatalf("Lock after unlock: %v", l.err)
		}
		u = l.unlock
	case <-wait.Done():
		t.Fatalf("Lock still waiting %v after the holder unlocked", lockWait)
	}
	u()
	unlock() // a second call is harmless
	u2, err := s.Lock(t.Context(), "srv/run.tar")
	if err != nil {
		t.Fatalf("Lock after both unlocked: %v", err)
	}
	u2()
}

// lockWait bounds the wait for a lock its holder let go of.
const lockWait = 10 * time.Second

// whilePending runs fn while a Put of key has written part of its body and
// not finished (the Put then fails, abandoned).
func whilePending(t *testing.T, s Store, key string, fn func()) {
	t.Helper()
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(t.Context(), key, func(w io.Writer) error {
			w.Write([]byte("half"))
			close(started)
			<-release
			return errors.New("abandoned")
		})
		done <- err
	}()
	<-started
	fn()
	close(release)
	<-done
}

func testList(t *testing.T, s Store) {
	ctx := t.Context()
	if got, err := s.List(ctx, "srv"); err != nil || len(got) != 0 {
		t.Fatalf("List of an empty store = %v, %v; want nothing, nil", got, err)
	}
	before := time.Now().Add(-time.Second)
	put(t, s, "srv/b.tar.zst", []byte("bb"))
	put(t, s, "srv/a.tar", []byte("a"))
	put(t, s, "other/c.tar", []byte("c"))
	put(t, s, "srv/sub/d.tar", []byte("d"))
	// A pending Put is not listed.
	var got []store.Object
	var err error
	whilePending(t, s, "srv/pending.tar", func() { got, err = s.List(ctx, "srv") })
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var keys []string
	for _, o := range got {
		keys = append(keys, o.Key)
		if o.ModTime.Before(before) || o.ModTime.After(time.Now().Add(time.Second)) {
			t.Errorf("%s: ModTime %v is not the time of its Put", o.Key, o.ModTime)
		}
	}
	if want := []string{"srv/a.tar", "srv/b.tar.zst"}; strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Fatalf("List(srv) = %v, want %v", keys, want)
	}
	if got[1].Size != 2 {
		t.Errorf("size of srv/b.tar.zst = %d, want 2", got[1].Size)
	}
	if _, err := s.List(ctx, "../x"); err == nil {
		t.Error("List(../x) succeeded, want an invalid key error")
	}
}

func testWalk(t *testing.T, s Store) {
	ctx := t.Context()
	walk := func(dir string) (keys []string, pages int) {
		t.Helper()
		err := s.Walk(ctx, dir, func(page []store.Object) error {
			if len(page) == 0 || len(page) > store.WalkPage {
				t.Errorf("a page of %d objects, want 1 to %d", len(page), store.WalkPage)
			}
			pages++
			for _, o := range page {
				keys = append(keys, o.Key)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Walk(%s): %v", dir, err)
		}
		return keys, pages
	}
	if keys, _ := walk("w"); len(keys) != 0 {
		t.Fatalf("Walk of an empty store = %v, want nothing", keys)
	}
	put(t, s, "w/00/a", []byte("a"))
	put(t, s, "w/00/b", []byte("bb"))
	put(t, s, "w/ff/c", []byte("c"))
	put(t, s, "w/d", []byte("d"))
	put(t, s, "wx/e", []byte("e"))
	put(t, s, "other/f", []byte("f"))
	// A pending Put is not walked.
	var keys []string
	whilePending(t, s, "w/00/pending", func() { keys, _ = walk("w") })
	slices.Sort(keys)
	if want := []string{"w/00/a", "w/00/b", "w/d", "w/ff/c"}; !slices.Equal(keys, want) {
		t.Fatalf("Walk(w) = %v, want %v", keys, want)
	}
	// More than a page: several pages, each object once.
	n := store.WalkPage + 5
	if testing.Short() {
		return
	}
	for i := range n {
		put(t, s, fmt.Sprintf("many/%02x/%05d", i%3, i), nil)
	}
	keys, pages := walk("many")
	if len(keys) != n || pages < 2 {
		t.Errorf("Walk(many): %d objects in %d pages, want %d in 2 or more", len(keys), pages, n)
	}
	slices.Sort(keys)
	if len(slices.Compact(keys)) != n {
		t.Errorf("Walk(many) handed some objects over twice")
	}
	// An error from fn stops the walk and comes back.
	stop := errors.New("stop")
	calls := 0
	if err := s.Walk(ctx, "many", func([]store.Object) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Walk with a failing fn = %v after %d calls, want %v after 1", err, calls, stop)
	}
	if err := s.Walk(ctx, "../x", func([]store.Object) error { return nil }); err == nil {
		t.Error("Walk(../x) succeeded, want an invalid key error")
	}
}
