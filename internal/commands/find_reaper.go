package commands

import (
	"context"
	"sync"
	"time"

	"humongo/internal/service"
)

// StartCursorReaper runs the idle-cursor reaper (MongoDB's ClientCursorMonitor, every
// clientCursorMonitorFrequencySecs = 4 s): cursors idle longer than cursorTimeoutMillis are
// killed even when no other cursor activity happens. stop ends it and waits.
func StartCursorReaper(ctx context.Context, st *service.State) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		st.Cursors().Run(ctx, 4*time.Second)
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
