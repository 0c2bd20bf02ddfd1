package storage

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"humongo/internal/mongoerr"
)

// IsWriteConflict reports whether err is a WriteConflict (mongoerr code 112).
func IsWriteConflict(err error) bool { return mongoerr.Is(err, mongoerr.WriteConflict) }

const (
	retryBackoffStart = time.Millisecond
	retryBackoffMax   = 100 * time.Millisecond
)

// WriteConflictRetry runs f until it returns something other than a WriteConflict, backing off
// exponentially (1 ms doubling to 100 ms, with jitter) between attempts. It returns ctx's
// error when ctx is done. f must open and commit its own WriteUnitOfWork.
func WriteConflictRetry(ctx context.Context, opName string, f func() error) error {
	backoff := retryBackoffStart
	var timer *time.Timer
	for attempt := 0; ; attempt++ {
		err := f()
		if !IsWriteConflict(err) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Full jitter in [backoff/2, backoff) spreads contending retries apart.
		d := backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)+1))
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		backoff = min(backoff*2, retryBackoffMax)
		if attempt > 0 && attempt%100 == 0 {
			slog.Debug("write conflict retries", "c", "STORAGE", "op", opName, "attempts", attempt)
		}
	}
}
