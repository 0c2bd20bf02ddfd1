package applier

import (
	"context"

	"humongo/internal/repl/oplog"
)

// applySessions writes the session records a batch implies (MongoDB's SessionUpdateTracker;
// oplog/sessions.go): the primary does not log config.transactions updates, so for each
// session with a retryable write in the batch, its record moves to the session's newest
// entry of the batch, at that entry's timestamp. It runs after the batch's data writes and
// before lastApplied moves, so reads at lastApplied see records and data together, and
// under the batch's oplogTruncateAfterPoint, so a crash before it re-applies the batch.
func (a *Applier) applySessions(ctx context.Context, entries []*oplog.Entry) error {
	var t oplog.SessionTracker
	for _, e := range entries {
		t.Note(e)
	}
	updates := t.Updates()
	if len(updates) == 0 {
		return nil
	}
	ru := a.cfg.Engine.NewRecoveryUnit()
	defer ru.Close()
	return a.apply.ApplySessionUpdates(ctx, ru, updates)
}
