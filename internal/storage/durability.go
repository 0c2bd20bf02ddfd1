package storage

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// journalFlusher makes NoSync commits durable: every JournalCommitInterval, or at once when a
// WaitUntilDurable caller is waiting, it syncs the WAL with one LogData(Sync). Waiters that
// arrive while a sync is running wait for the next round, because the running one may have
// started before their commits were written (group commit: one sync serves every waiter of
// a round).
type journalFlusher struct {
	e *Engine

	mu sync.Mutex
	// next is the round that the flusher's next sync will complete. Waiters wait on it.
	next *syncRound
	// err, once set, fails every later waiter (shutdown).
	err error

	wake chan struct{}
	// dirty is set by commits and metadata writes; the periodic sync is skipped when nothing
	// was written since the last one (waiters always get a sync).
	dirty atomic.Bool
}

type syncRound struct {
	done chan struct{}
	err  error
}

func newSyncRound() *syncRound { return &syncRound{done: make(chan struct{})} }

func (j *journalFlusher) init(e *Engine) {
	j.e = e
	j.next = newSyncRound()
	j.wake = make(chan struct{}, 1)
}

// run is the flusher goroutine, owned by the Engine and stopped through ctx.
func (j *journalFlusher) run(ctx context.Context) {
	t := time.NewTicker(j.e.opts.JournalCommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !j.dirty.Load() {
				continue
			}
		case <-j.wake:
		}
		j.syncOnce()
	}
}

// syncOnce syncs the WAL and completes the current round.
func (j *journalFlusher) syncOnce() {
	j.mu.Lock()
	r := j.next
	j.next = newSyncRound()
	j.mu.Unlock()
	// Cleared before the sync: a write racing with it sets dirty again for the next tick.
	j.dirty.Store(false)
	// LogData with Sync writes an empty record and syncs the WAL up to it, covering every
	// batch applied before this point.
	r.err = j.e.db.LogData(nil, pebble.Sync)
	if r.err != nil {
		j.e.logger.Error("journal sync failed", "err", r.err)
	}
	close(r.done)
}

// shutdown fails later waiters with err, then completes the pending round with a final
// sync (the caller has stopped run). Setting err first means no waiter can take a round
// that is never completed.
func (j *journalFlusher) shutdown(err error) {
	j.mu.Lock()
	j.err = err
	j.mu.Unlock()
	j.syncOnce()
}

// WaitUntilDurable returns once every commit that finished before the call is on disk.
func (e *Engine) WaitUntilDurable(ctx context.Context) error {
	j := &e.journal
	j.mu.Lock()
	if j.err != nil {
		j.mu.Unlock()
		return j.err
	}
	r := j.next
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
