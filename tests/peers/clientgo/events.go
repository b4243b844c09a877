package main

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// event is one JSON line on stdout, the peer's report to the test or benchmark harness.
type event struct {
	Event    string  `json:"event"`
	Identity string  `json:"identity"`
	Leader   string  `json:"leader"`
	Time     float64 `json:"time"`
}

// reporter writes events as JSON lines; safe for concurrent use (client-go calls back from
// several goroutines).
type reporter struct {
	mu  sync.Mutex
	enc *json.Encoder
	id  string
}

func newReporter(w io.Writer, identity string) *reporter {
	return &reporter{enc: json.NewEncoder(w), id: identity}
}

// emit writes one event stamped with the wall-clock time (unix seconds) at the call.
func (r *reporter) emit(name, leader string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(event{
		Event:    name,
		Identity: r.id,
		Leader:   leader,
		Time:     float64(now.UnixNano()) / 1e9,
	})
}
