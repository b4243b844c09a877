package main

import "sync"

// terms tracks the current leadership term so that "stopped_leading" is reported exactly once
// per term, by whichever comes first: the leading context ending, a release about to be written,
// or client-go's OnStoppedLeading.
type terms struct {
	mu   sync.Mutex
	stop func()
}

// begin starts a term whose end is reported by calling report (once).
func (t *terms) begin(report func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stop = sync.OnceFunc(report)
}

// end reports the end of the current term, if there is one and it has not been reported.
func (t *terms) end() {
	t.mu.Lock()
	stop := t.stop
	t.mu.Unlock()
	if stop != nil {
		stop()
	}
}
