package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"sync"
	"time"
)

// Mem keeps archives in memory: the store of unit tests. The zero value is
// not usable; call NewMem.
type Mem struct {
	mu      sync.Mutex
	objs    map[string][]byte
	times   map[string]time.Time              // commit time of each object
	pending map[string]map[*bytes.Buffer]bool // uncommitted Puts by key
	locks   map[string]chan struct{}
}

// NewMem returns an empty in-memory store.
func NewMem() *Mem {
	return &Mem{
		objs:    map[string][]byte{},
		times:   map[string]time.Time{},
		pending: map[string]map[*bytes.Buffer]bool{},
		locks:   map[string]chan struct{}{},
	}
}

// Ref returns "mem://" followed by key.
func (m *Mem) Ref(key string) string { return "mem://" + key }

// Put stores what write writes under key when write returns nil; on error
// nothing is stored.
func (m *Mem) Put(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	buf := new(bytes.Buffer)
	m.mu.Lock()
	if m.pending[key] == nil {
		m.pending[key] = map[*bytes.Buffer]bool{}
	}
	m.pending[key][buf] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.pending[key], buf)
		m.mu.Unlock()
	}()

	if err := write(buf); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.pending[key][buf] {
		return 0, fmt.Errorf("committing %q: %w", key, ErrDiscarded)
	}
	m.objs[key] = buf.Bytes()
	m.times[key] = time.Now()
	return int64(buf.Len()), nil
}

// CleanTemps discards the uncommitted Puts of key, which then fail, and
// returns one name per discarded Put.
func (m *Mem) CleanTemps(ctx context.Context, key string) ([]string, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var removed []string
	for range m.pending[key] {
		removed = append(removed, m.Ref(key)+".tmp")
	}
	delete(m.pending, key)
	return removed, nil
}

// Remove deletes key's archive; a missing archive is not an error.
func (m *Mem) Remove(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	delete(m.times, key)
	return nil
}

// Holds reports whether the store holds anything of key: its committed
// archive, or a Put of it not finished.
func (m *Mem) Holds(ctx context.Context, key string) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.objs[key]
	return ok || len(m.pending[key]) > 0, nil
}

// Open returns a reader of key's archive, or an error wrapping
// fs.ErrNotExist.
func (m *Mem) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("opening %q: %w", key, fs.ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// Lock takes an exclusive lock on key, waiting while another holder has it.
func (m *Mem) Lock(ctx context.Context, key string) (unlock func(), err error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	for {
		m.mu.Lock()
		held, ok := m.locks[key]
		if !ok {
			ch := make(chan struct{})
			m.locks[key] = ch
			m.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					m.mu.Lock()
					delete(m.locks, key)
					m.mu.Unlock()
					close(ch)
				})
			}, nil
		}
		m.mu.Unlock()
		select {
		case <-held:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Keys returns the keys of the stored archives, sorted.
func (m *Mem) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]string, 0, len(m.objs))
	for k := range m.objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Bytes returns the archive stored under key.
func (m *Mem) Bytes(key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	return b, ok
}
