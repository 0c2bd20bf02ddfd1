package coord

import "time"

// Clock is the coordinator's time: every reading of the time, every ticker and every timer
// of the coordinator comes from it (STYLE.md: inject time), so tests can hold time still or
// move it by hand (see the fake in clock_test.go). Deadlines of contexts that callers pass in
// remain on the real clock.
type Clock interface {
	Now() time.Time
	// NewTicker returns a ticker firing every d; Stop releases it.
	NewTicker(d time.Duration) Ticker
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// Ticker is a stoppable periodic channel (time.Ticker's two methods).
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// RealClock is the wall clock (the default).
type RealClock struct{}

func (RealClock) Now() time.Time                         { return time.Now() }
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (RealClock) NewTicker(d time.Duration) Ticker       { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }
