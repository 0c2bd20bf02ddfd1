package ddl

import (
	"context"
	"time"

	"humongo/internal/failpoint"
	"humongo/internal/mongoerr"
)

// Fail points of the coordinators added after drop's, for tests that kill the primary
// shard's primary in the middle: before the create coordinator's commit phase runs, and in
// the rename coordinator's blockCRUDAndRename and renameMetadata phases.
var (
	fpCreateHang             = failpoint.Register("hangCreateCollectionCoordinatorBeforeCommit")
	fpRenameHangBeforeRename = failpoint.Register("hangRenameCollectionBeforeRename")
	fpRenameHangAfterRename  = failpoint.Register("hangRenameCollectionAfterParticipantsRenamed")
	fpDropDBHang             = failpoint.Register("hangDropDatabaseCoordinatorBeforeDrop")
	fpCollModHang            = failpoint.Register("collModBeforeConfigServerUpdate")
	// movePrimary's: after the clone before the commit, after the commit before the drop.
	fpMovePrimaryHangBeforeCommit = failpoint.Register("hangMovePrimaryCoordinatorBeforeCommit")
	fpMovePrimaryHangBeforeDrop   = failpoint.Register("hangMovePrimaryCoordinatorBeforeDropStaleData")
)

// retryingAll runs an idempotent step of a destructive phase until it succeeds or ctx
// ends: once a coordinator destroyed something it must finish (MongoDB retries such
// phases' errors indefinitely).
func (s *CoordinatorService) retryingAll(ns, op string, step func(context.Context) error) func(context.Context) error {
	return s.retrying(ns, op, step, func(error) bool { return true })
}

// retryingRetriable retries a step only after errors that say nothing about the request
// (a network error, a shard's failover); any other error ends the operation.
func (s *CoordinatorService) retryingRetriable(ns, op string, step func(context.Context) error) func(context.Context) error {
	return s.retrying(ns, op, step, transient)
}

// transient reports whether err is worth another try: no answer at all (network, server
// selection), or a retriable or not-primary code.
func transient(err error) bool {
	me, ok := mongoerr.As(err)
	if !ok {
		return true
	}
	return mongoerr.IsRetriableError(me.Code) || mongoerr.IsNotPrimaryError(me.Code)
}

func (s *CoordinatorService) retrying(ns, op string, step func(context.Context) error, again func(error) bool) func(context.Context) error {
	return func(ctx context.Context) error {
		delay := 100 * time.Millisecond
		for {
			err := step(ctx)
			if err == nil || ctx.Err() != nil || !again(err) {
				return err
			}
			s.cfg.Log.Warn("DDL coordinator step failed; retrying", "namespace", ns, "operation", op, "error", err.Error())
			if err := s.retryWait(ctx, delay); err != nil {
				return err
			}
			delay = min(2*delay, 2*time.Second)
		}
	}
}
