package router

// Failed-host retries (spec: sharding.md "Retrying internally"; MongoDB's AsyncRequestsSender
// with Shard::RetryPolicy::kIdempotent and kMaxNumFailedHostRetryAttempts): when a shard's
// primary is killed, steps down or is unreachable, a request the router may send again (a
// read, or a retryable write, which the shard answers from its session history the second
// time) is sent again to the primary the shard's client finds then. The driver inside
// client.ReplicaSet (SDAM) marks the failed member unknown on a network or "not primary"
// error and its server selection waits for the new primary, so the retry itself needs no
// backoff: the wait is in the selection, bounded by the request's context and the client's
// server selection timeout.
//
// Errors that never reached a shard's command processing are given MongoDB's codes here:
// a network failure, or a request the driver did not send because the member's connection
// pool was just cleared, is HostUnreachable; no member satisfying the read preference within the
// server selection timeout is FailedToSatisfyReadPreference, as mongos's
// ReplicaSetMonitor answers.

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"humongo/internal/mongoerr"
)

// transportError returns err, a driver error from a request to shard (a shard id, or the
// config server replica set's name), as the router answers it when the request never got a reply: HostUnreachable for a
// network error, FailedToSatisfyReadPreference when no suitable member was found in time
// (ctx not done: the selection's own timeout); nil if err is neither (a shard's reply, or
// the request's own deadline). The error wraps err: a selection timeout still matches
// context.DeadlineExceeded, so the catalog cache does not repeat a refresh whose selection
// already waited its full timeout.
func transportError(ctx context.Context, shard string, err error) error {
	var sse topology.ServerSelectionError
	if errors.As(err, &sse) {
		if ctx.Err() != nil {
			return nil
		}
		return mongoerr.Newf(mongoerr.FailedToSatisfyReadPreference,
			"Could not find host matching read preference { mode: \"primary\" } for set %s: %w", shard, err)
	}
	if ctx.Err() == nil && (mongo.IsNetworkError(err) || poolCleared(err)) {
		return mongoerr.Newf(mongoerr.HostUnreachable, "error communicating with shard %s: %w", shard, err)
	}
	return nil
}

// poolCleared reports whether err is the driver's "connection pool was cleared" (another
// request to the member failed on the network, e.g. its primary was killed): a request that
// was never sent, with no network label and no code of its own.
func poolCleared(err error) bool {
	var pe driver.RetryablePoolError
	return errors.As(err, &pe) && pe.Retryable()
}

// retryFailedHost runs send, and again after a retriable error (the primary stepped down, is
// shutting down or is unreachable), at most maxFailedHostRetries more times, while ctx lasts.
// Only for requests MongoDB sends with RetryPolicy::kIdempotent: reads, and retryable writes.
func retryFailedHost(ctx context.Context, send func() error) error {
	if txnFrom(ctx) != nil {
		// In a transaction a statement is not sent twice: the shard's part of the
		// transaction failed with it (the client retries the whole transaction).
		return send()
	}
	for attempt := 0; ; attempt++ {
		err := send()
		if err == nil || attempt >= maxFailedHostRetries || ctx.Err() != nil || !retriableCode(err) {
			return err
		}
	}
}

// retriableCode reports whether err, a router error, carries one of MongoDB's retriable codes
// (isRetriableError).
func retriableCode(err error) bool {
	return mongoerr.IsRetriableError(mongoerr.CodeOf(err))
}

// writesOutput reports whether cmd is an aggregate whose pipeline ends in $out or $merge: it
// writes, so it is not sent twice.
func writesOutput(cmd bsoncore.Document) bool {
	arr, ok := cmd.Lookup("pipeline").ArrayOK()
	if !ok {
		return false
	}
	vals, err := arr.Values()
	if err != nil || len(vals) == 0 {
		return false
	}
	last, ok := vals[len(vals)-1].DocumentOK()
	if !ok {
		return false
	}
	first, err := last.IndexErr(0)
	if err != nil {
		return false
	}
	return first.Key() == "$out" || first.Key() == "$merge"
}
