// Package failpoint is the process-wide fail point registry, MongoDB's FailPointRegistry: named
// switches that tests turn on with the `configureFailPoint` command to inject faults (errors,
// delays, closed connections, pauses between phases of a protocol).
//
// A package declares its fail points once, at init:
//
//	var hangBeforeCommit = failpoint.Register("hangBeforeCommit")
//
// and checks them where the fault belongs:
//
//	if data, ok := hangBeforeCommit.Evaluate(nil); ok { ... }
//
// Evaluating a disabled fail point is one atomic load, so fail points may sit on hot paths.
// Modes follow MongoDB: off, alwaysOn, {times: n} (fire n times, then turn off), {skip: n}
// (let n evaluations pass, then fire every time) and {activationProbability: p}.
package failpoint

import (
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Mode says when an enabled fail point fires.
type Mode int

const (
	Off Mode = iota
	AlwaysOn
	Times       // fire the next N evaluations, then turn off
	Skip        // pass the next N evaluations, then fire always
	Probability // fire with probability P
)

// FailPoint is one named fail point. Its methods are safe for concurrent use.
type FailPoint struct {
	name    string
	enabled atomic.Bool // fast path: false means Evaluate returns at once

	mu   sync.Mutex
	mode Mode
	n    int64   // remaining fires (Times) or passes (Skip)
	prob float64 // Probability
	data bsoncore.Document
	// entered counts fires since process start; entryCh is closed and replaced on each fire so
	// WaitForTimesEntered can block without polling.
	entered int64
	entryCh chan struct{}
}

var (
	regMu    sync.Mutex
	registry = map[string]*FailPoint{}
)

// Register returns the fail point called name, creating it on first use. Registering the
// same name twice returns the same fail point, so packages may declare it independently.
func Register(name string) *FailPoint {
	regMu.Lock()
	defer regMu.Unlock()
	if fp, ok := registry[name]; ok {
		return fp
	}
	fp := &FailPoint{name: name, entryCh: make(chan struct{})}
	registry[name] = fp
	return fp
}

// Get returns the registered fail point called name, or nil.
func Get(name string) *FailPoint {
	regMu.Lock()
	defer regMu.Unlock()
	return registry[name]
}

// Names returns the registered fail point names, sorted.
func Names() []string {
	regMu.Lock()
	defer regMu.Unlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Name returns the fail point's name.
func (fp *FailPoint) Name() string { return fp.name }

// Configure sets the mode, its argument (n for Times/Skip, p for Probability) and the data
// document (copied), and returns how many times the fail point had fired so far — the
// `count` that configureFailPoint reports.
func (fp *FailPoint) Configure(mode Mode, n int64, p float64, data bsoncore.Document) int64 {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	fp.mode, fp.n, fp.prob = mode, n, p
	fp.data = append(bsoncore.Document(nil), data...)
	on := mode != Off && !(mode == Times && n <= 0)
	if !on {
		fp.mode = Off
	}
	fp.enabled.Store(on)
	return fp.entered
}

// Disable turns the fail point off.
func (fp *FailPoint) Disable() { fp.Configure(Off, 0, 0, nil) }

// Enabled reports whether the fail point might fire (a cheap pre-check).
func (fp *FailPoint) Enabled() bool { return fp.enabled.Load() }

// Evaluate decides whether the fail point fires now. pred, if not nil, is asked first with the
// data document; an evaluation it rejects neither fires nor counts against {times}/{skip},
// which is how MongoDB's failCommand only counts commands it applies to. On a fire, Evaluate
// returns the data document (the caller must not modify it) and true.
func (fp *FailPoint) Evaluate(pred func(data bsoncore.Document) bool) (bsoncore.Document, bool) {
	if !fp.enabled.Load() {
		return nil, false
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.mode == Off {
		return nil, false
	}
	data := fp.data
	// pred runs under the lock so the decision and the counting are one atomic step; it must
	// therefore be quick and must not evaluate this fail point again.
	if pred != nil && !pred(data) {
		return nil, false
	}
	switch fp.mode {
	case Times:
		fp.n--
		if fp.n <= 0 {
			fp.mode = Off
			fp.enabled.Store(false)
		}
	case Skip:
		if fp.n > 0 {
			fp.n--
			return nil, false
		}
	case Probability:
		if rand.Float64() >= fp.prob {
			return nil, false
		}
	}
	fp.entered++
	close(fp.entryCh)
	fp.entryCh = make(chan struct{})
	return data, true
}

// TimesEntered returns how many times the fail point has fired.
func (fp *FailPoint) TimesEntered() int64 {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return fp.entered
}

// WaitForTimesEntered blocks until the fail point has fired at least n times in total, or
// ctx ends (returning its error).
func (fp *FailPoint) WaitForTimesEntered(ctx context.Context, n int64) error {
	for {
		fp.mu.Lock()
		entered, ch := fp.entered, fp.entryCh
		fp.mu.Unlock()
		if entered >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// PauseWhileSet waits while the fail point is on (MongoDB's pauseWhileSet), or until ctx
// ends (returning its error). Each check that finds it on counts as an entry, so a test sees
// the code waiting there (TimesEntered); checks are 20 ms apart: fail points are test hooks.
func (fp *FailPoint) PauseWhileSet(ctx context.Context) error {
	for {
		if _, on := fp.Evaluate(nil); !on {
			return nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// State describes a fail point for getParameter-style introspection and tests.
type State struct {
	Mode Mode
	N    int64
	Data bsoncore.Document
}

// State returns the fail point's current configuration.
func (fp *FailPoint) State() State {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return State{Mode: fp.mode, N: fp.n, Data: fp.data}
}
