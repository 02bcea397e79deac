// Package crashguard runs last-resort cleanups when a goroutine of the
// process panics.
//
// A panic on any goroutine ends the process, and the deferred calls of the
// other goroutines do not run: a backup whose pipeline goroutine (a pack
// writer, a stage of the stream) panicked would leave the game server with
// autosave off until the next run. So every goroutine a run starts defers
// Recover first thing, and a run registers, while the server is quiesced,
// the call that turns autosave back on (OnPanic). Recover runs the
// registered cleanups, then panics again with the same value: the process
// still crashes, with the panic's stack printed first.
//
// The registry is process-wide on purpose, like signal handling: a panic
// is the process's end, whichever goroutine it hits.
package crashguard

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"
)

var (
	mu    sync.Mutex
	next  int
	hooks = map[int]func(){}
)

// OnPanic registers fn to run when a goroutine that deferred Recover
// panics; cancel unregisters it. fn runs at most once.
func OnPanic(fn func()) (cancel func()) {
	var once sync.Once
	mu.Lock()
	id := next
	next++
	hooks[id] = func() { once.Do(fn) }
	mu.Unlock()
	return func() {
		mu.Lock()
		delete(hooks, id)
		mu.Unlock()
	}
}

// Recover, deferred first thing in a goroutine, runs the registered
// cleanups when the goroutine panics, then panics again with the same
// value. Without a panic it does nothing.
func Recover() {
	r := recover()
	if r == nil {
		return
	}
	// The stack of the panic itself: the one printed after the panic
	// again is Recover's.
	fmt.Fprintf(os.Stderr, "panic: %v\n\n%s\n", r, debug.Stack())
	mu.Lock()
	fns := make([]func(), 0, len(hooks))
	for _, fn := range hooks {
		fns = append(fns, fn)
	}
	mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	panic(r)
}
