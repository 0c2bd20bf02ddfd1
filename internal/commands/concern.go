package commands

// Glue between the commands and repl/concern (read concern, write concern, cluster time):
// the dispatcher calls BeginOperation before a command (it gossips the incoming $clusterTime
// in and, for the read commands, validates readConcern, waits for afterClusterTime /
// atClusterTime and picks the read source the command's operations read from),
// FinishOperation after the handler (linearizable's no-op write confirmed by a majority,
// snapshot's atClusterTime in the cursor reply), and AppendClusterTime on every reply of a
// replica-set member. The write commands parse their writeConcern with writeParseConcern and
// wait for it with writeFinish.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/lock"
	"humongo/internal/operation"
	"humongo/internal/repl/concern"
	"humongo/internal/service"
	"humongo/internal/sharding/shardstate"
	"humongo/internal/storage"
	"humongo/internal/vclock"
)

// concernNode is st's view for repl/concern.
func concernNode(st *service.State) concern.Node {
	return concern.Node{DB: st.DB, Repl: st.Repl, State: &st.Concern, Member: st.Sharding.Role() != shardstate.RoleNone}
}

// BeginOperation records the command's session and shard versions for the operations it
// starts (operation.Request), gossips cmd's $clusterTime in and, for the read commands,
// applies their readConcern (wait, read source). The returned context carries the state the
// read paths and FinishOperation use.
func BeginOperation(ctx context.Context, env *service.Env, c *service.Command, cmd bsoncore.Document) (context.Context, *concern.OpState, error) {
	ctx = operation.WithRequest(ctx, requestOf(cmd))
	name := ""
	if c != nil {
		name = c.Name
	}
	ctx = vclock.WithPeer(ctx, service.GossipPeer(env))
	return concern.Begin(ctx, concernNode(env.State), name, cmd)
}

// requestOf reads the generic arguments every operation of cmd carries: lsid and txnNumber
// as sent (validated where they are used: retryable writes, session commands), and
// shardVersion / databaseVersion raw (the sharding layer will check them).
func requestOf(cmd bsoncore.Document) *operation.Request {
	r := &operation.Request{ShardVersion: lookup(cmd, "shardVersion"), DatabaseVersion: lookup(cmd, "databaseVersion"),
		Admission: new(lock.Admission)}
	if r.ShardVersion.Type != 0 || r.DatabaseVersion.Type != 0 {
		r.VersionedNS = versionedNS(cmd)
	}
	if d, ok := lookup(cmd, "lsid").DocumentOK(); ok {
		r.Session.LSID = d
	}
	if n, ok := lookup(cmd, "txnNumber").Int64OK(); ok {
		r.Session.TxnNumber, r.Session.HasTxnNumber = n, true
	}
	return r
}

// versionedNS is the namespace a versioned command's shardVersion / databaseVersion are for
// (MongoDB's ScopedSetShardRole over the invocation's ns()): "$db.<collection>" when the
// command's first value names a collection (explain: its inner command's), else "$db".
func versionedNS(cmd bsoncore.Document) string {
	db, _ := lookup(cmd, "$db").StringValueOK()
	elems, err := cmd.Elements()
	if err != nil || len(elems) == 0 {
		return db
	}
	v := elems[0].Value()
	if inner, ok := v.DocumentOK(); ok && elems[0].Key() == "explain" {
		if ie, err := inner.Elements(); err == nil && len(ie) > 0 {
			v = ie[0].Value()
		}
	}
	if coll, ok := v.StringValueOK(); ok && coll != "" {
		return db + "." + coll
	}
	return db
}

// FinishOperation completes the read concern after a successful handler.
func FinishOperation(ctx context.Context, env *service.Env, s *concern.OpState, reply bsoncore.Document) (bsoncore.Document, error) {
	return concern.Finish(ctx, concernNode(env.State), s, reply)
}

// AppendClusterTime appends `$clusterTime` (signed for env's sender) and `operationTime` to
// a replica-set member's reply; standalone replies are returned unchanged.
func AppendClusterTime(env *service.Env, s *concern.OpState, reply bsoncore.Document) bsoncore.Document {
	if env == nil || env.State == nil {
		return reply
	}
	return concern.AppendClusterTime(concernNode(env.State), s, reply, service.GossipPeer(env))
}

// writeParseConcern parses and validates a write command's writeConcern (the server's
// default applies on a replica-set member).
func writeParseConcern(env *service.Env, cmd bsoncore.Document) (concern.WriteConcern, error) {
	if env == nil || env.State == nil {
		return concern.ParseWriteConcern(concern.Node{}, cmd)
	}
	return concern.ParseWriteConcern(concernNode(env.State), cmd)
}

// writeFinish waits for wc after a write command's writes; a failed wait returns a
// *concern.WriteConcernReply.
func writeFinish(ctx context.Context, env *service.Env, wc concern.WriteConcern, reply bsoncore.Document) (bsoncore.Document, error) {
	if txnStmtOf(ctx) != nil {
		// A statement of a transaction: its writes are not durable anywhere until the
		// commit, which alone waits for the write concern (txnFinishConcern).
		return reply, nil
	}
	return concern.WaitForWrite(ctx, concernNode(env.State), wc, reply)
}

// txnFinishConcern waits for commitTransaction's or abortTransaction's write concern.
func txnFinishConcern(ctx context.Context, env *service.Env, wc concern.WriteConcern, reply bsoncore.Document) (bsoncore.Document, error) {
	return concern.WaitForWrite(ctx, concernNode(env.State), wc, reply)
}

// rcApplyRU makes ru read at the command's read-concern timestamp (no-op without one).
func rcApplyRU(ctx context.Context, ru *storage.RecoveryUnit) error {
	return concern.ApplyReadSource(ctx, ru)
}

// rcReapply points ru at rs's current timestamp before a getMore's snapshot.
func rcReapply(st *service.State, rs *operation.ReadSource, ru *storage.RecoveryUnit) error {
	return concern.Reapply(concernNode(st), rs, ru)
}
