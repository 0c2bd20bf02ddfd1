package checker

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// LostWrites records acknowledged writes and checks a final read-back against them. Each
// document is identified by a string id and carries a version that the workload increases on
// every write of that id (a counter field, or the value itself when values only grow). It is
// safe for concurrent use by the workload's clients.
type LostWrites struct {
	mu    sync.Mutex
	acked map[string]int64 // id -> highest acknowledged version
	n     int              // acknowledgements recorded
}

// NewLostWrites returns an empty recorder.
func NewLostWrites() *LostWrites { return &LostWrites{acked: make(map[string]int64)} }

// Ack records that the database acknowledged writing version of id. Writes that failed or
// timed out must not be recorded: their outcome is unknown and they may legitimately be lost.
func (l *LostWrites) Ack(id string, version int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if v, ok := l.acked[id]; !ok || version > v {
		l.acked[id] = version
	}
}

// Acked returns the number of acknowledgements recorded and the number of distinct ids.
func (l *LostWrites) Acked() (acks, ids int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, len(l.acked)
}

// Loss is one acknowledged write the final state does not reflect.
type Loss struct {
	ID    string
	Acked int64 // highest acknowledged version
	// Found is the version read back; meaningful only when Present.
	Found   int64
	Present bool
}

func (l Loss) String() string {
	if !l.Present {
		return fmt.Sprintf("%s: acknowledged version %d, document missing", l.ID, l.Acked)
	}
	return fmt.Sprintf("%s: acknowledged version %d, found older version %d", l.ID, l.Acked, l.Found)
}

// LostWritesReport is the result of LostWrites.Check.
type LostWritesReport struct {
	Acked   int    // distinct acknowledged ids
	Missing []Loss // acknowledged ids absent from the final state
	Stale   []Loss // ids whose final version is older than acknowledged
	// Unexpected counts ids present in the final state that were never acknowledged: not an
	// error (an unacknowledged write may have happened) but useful in logs.
	Unexpected int
}

// OK reports whether no acknowledged write was lost.
func (r LostWritesReport) OK() bool { return len(r.Missing) == 0 && len(r.Stale) == 0 }

func (r LostWritesReport) String() string {
	if r.OK() {
		return fmt.Sprintf("ok: %d acknowledged ids all present (%d unacknowledged ids also present)", r.Acked, r.Unexpected)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d acknowledged ids lost (%d missing, %d stale):", len(r.Missing)+len(r.Stale), r.Acked, len(r.Missing), len(r.Stale))
	const show = 20
	all := append(append([]Loss(nil), r.Missing...), r.Stale...)
	for i, x := range all {
		if i == show {
			fmt.Fprintf(&b, "\n  ... and %d more", len(all)-show)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(x.String())
	}
	return b.String()
}

// Check compares the final state (id -> version read back) with the acknowledged writes. A
// version newer than acknowledged is fine: a later write may have succeeded without its
// acknowledgement reaching the client.
func (l *LostWrites) Check(final map[string]int64) LostWritesReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := LostWritesReport{Acked: len(l.acked)}
	for id, want := range l.acked {
		got, ok := final[id]
		switch {
		case !ok:
			r.Missing = append(r.Missing, Loss{ID: id, Acked: want})
		case got < want:
			r.Stale = append(r.Stale, Loss{ID: id, Acked: want, Found: got, Present: true})
		}
	}
	for id := range final {
		if _, ok := l.acked[id]; !ok {
			r.Unexpected++
		}
	}
	byID := func(s []Loss) { sort.Slice(s, func(i, j int) bool { return s[i].ID < s[j].ID }) }
	byID(r.Missing)
	byID(r.Stale)
	return r
}
