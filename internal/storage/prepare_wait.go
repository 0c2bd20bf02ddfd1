package storage

import (
	"context"
	"errors"

	"humongo/internal/optime"
)

// WaitPrepareConflict blocks until the prepared unit behind err, a prepare conflict, may have
// resolved (it, or some other prepared unit, committed or rolled back, or the engine closed),
// or until ctx is done, then returns context.Cause(ctx). It returns err itself when err is
// not a prepare conflict. For readers that cannot hand their whole attempt to
// PrepareConflictRetry (a query executor keeping its position across the wait): the caller
// must read again from a new view (AbandonSnapshot outside a unit of work, RefreshSnapshot
// inside one), or it meets the same conflict at once; a conflict with an already committed
// entry returns at once for that reason.
func WaitPrepareConflict(ctx context.Context, err error) error {
	var pc *prepareConflictError
	if !errors.As(err, &pc) {
		return err
	}
	select {
	case <-pc.resolved:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// CanRefreshSnapshot reports whether RefreshSnapshot would accept the unit as it is: it reads
// at a timestamp and its writes, if any, are isolated. A reader inside a unit of work asks
// before waiting out a prepare conflict, so that one that cannot continue in a new view gives
// up at once instead of waiting with its view pinned. (Unsaved cursors are the caller's
// business: it saves its own before RefreshSnapshot.)
func (ru *RecoveryUnit) CanRefreshSnapshot() bool {
	if ru.snapOpen {
		if ru.readTs == optime.MaxTimestamp {
			return false
		}
	} else if ru.src == ReadNoTimestamp {
		return false
	}
	return len(ru.ops) == 0 || ru.isolatedWrites
}
