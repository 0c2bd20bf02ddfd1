package commands

// Multi-document transactions: the glue between dispatch (the role's Begin/Finish) and
// internal/txn/participant. A command carrying autocommit: false is a statement of a
// transaction: txnBegin validates its session arguments as MongoDB's
// initializeOperationSessionInfo and validateSessionOptions do, checks the session out and
// starts or continues the transaction; the statement's operations then run in the
// transaction's storage unit (operation.Request.Txn), and the role's Finish ends the
// statement (a failed statement aborts the transaction). commitTransaction and
// abortTransaction end it.

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/repl/concern"
	"humongo/internal/service"
	"humongo/internal/sharding/shardstate"
	"humongo/internal/txn/participant"
	"humongo/internal/vclock"
)

// txnCommands may run inside a multi-document transaction (MongoDB 7.0's
// allowedInTransactions).
var txnCommands = map[string]bool{
	"abortTransaction": true, "aggregate": true, "commitTransaction": true, "delete": true,
	"distinct": true, "find": true, "findAndModify": true, "getMore": true, "insert": true,
	"killCursors": true, "update": true, "bulkWrite": true, "create": true, "createIndexes": true,
	"prepareTransaction": true,
}

// txnAdminCommands may run against the admin database inside a transaction.
var txnAdminCommands = map[string]bool{"abortTransaction": true, "commitTransaction": true, "prepareTransaction": true}

type txnStmtKey struct{}

// txnStmtOf returns the transaction statement ctx runs, or nil.
func txnStmtOf(ctx context.Context) *participant.Stmt {
	st, _ := ctx.Value(txnStmtKey{}).(*participant.Stmt)
	return st
}

// txnBegin starts or continues the transaction a command with autocommit belongs to; nil
// (no error) for every other command. The caller ends the statement.
func txnBegin(ctx context.Context, env *service.Env, c *service.Command, cmd bsoncore.Document) (*participant.Stmt, error) {
	if c.Name == "coordinateCommitTransaction" {
		// It carries the transaction's session fields but is not one of its statements:
		// the coordinator reaches the local participant through prepareTransaction.
		return nil, nil
	}
	ac := lookup(cmd, "autocommit")
	st := lookup(cmd, "startTransaction")
	tv := lookup(cmd, "txnNumber")
	if ac.Type == 0 {
		if st.Type != 0 {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "'startTransaction' field requires 'autocommit' field to also be specified")
		}
		if c.Name == "commitTransaction" || c.Name == "abortTransaction" {
			if tv.Type == 0 {
				return nil, mongoerr.Newf(mongoerr.InvalidOptions, "%s must be run within a transaction", c.Name)
			}
			return nil, mongoerr.New(mongoerr.InvalidOptions, "Must specify autocommit=false on all operations of a multi-statement transaction.")
		}
		return nil, nil
	}
	if tv.Type == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "'autocommit' field requires a transaction number to also be specified")
	}
	key, txnNumber, err := parseTxnNumber(env, cmd)
	if err != nil {
		return nil, err
	}
	if ac.Type != bsoncore.TypeBoolean {
		return nil, typeMismatch("OperationSessionInfo", "autocommit", ac.Type, "bool")
	}
	if ac.Boolean() {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Specifying autocommit=true is not allowed.")
	}
	start := false
	if st.Type != 0 {
		if st.Type != bsoncore.TypeBoolean {
			return nil, typeMismatch("OperationSessionInfo", "startTransaction", st.Type, "bool")
		}
		if !st.Boolean() {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "Specifying startTransaction=false is not allowed.")
		}
		start = true
	}
	if err := txnCheckCommand(env, c, cmd, start); err != nil {
		return nil, err
	}
	if !env.State.Repl.IsWritablePrimary() {
		return nil, mongoerr.New(mongoerr.NotWritablePrimary, "Transactions are only supported on the primary")
	}
	db, err := writeRequireDB(env)
	if err != nil {
		return nil, err
	}
	p := env.State.Params
	return participant.Of(db).Begin(ctx, participant.BeginArgs{
		Key: key, TxnNumber: txnNumber, Start: start, Command: c.Name, Term: env.State.Repl.Term,
		Lifetime:    time.Duration(p.Int("transactionLifetimeLimitSeconds")) * time.Second,
		LockTimeout: time.Duration(p.Int("maxTransactionLockRequestTimeoutMillis")) * time.Millisecond,
		Sharded:     env.State.Sharding.Role() == shardstate.RoleShardServer,
	})
}

// txnCheckCommand refuses what may not run in a transaction: other commands, the local,
// config and (for all but commit/abort) admin databases, system collections, $out/$merge,
// and a writeConcern on a statement other than commit/abort.
func txnCheckCommand(env *service.Env, c *service.Command, cmd bsoncore.Document, start bool) error {
	name := c.Name
	if name == "count" {
		return mongoerr.New(mongoerr.OperationNotSupportedInTransaction,
			"Cannot run 'count' in a multi-document transaction. Please see http://dochub.mongodb.org/core/transaction-count for a recommended alternative.")
	}
	if !txnCommands[name] && !(name == "dbHash" && env.State.Params.Bool("enableTestCommands")) {
		return mongoerr.Newf(mongoerr.OperationNotSupportedInTransaction, "Cannot run '%s' in a multi-document transaction.", name)
	}
	if start {
		switch name {
		case "killCursors":
			return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot run killCursors as the first operation in a multi-document transaction.")
		case "commitTransaction":
			return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot start a transaction with a commit")
		case "abortTransaction":
			return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot start a transaction with an abort")
		case "prepareTransaction":
			return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot start a transaction with a prepare")
		}
	}
	switch db := env.DB; {
	case db == "local", db == "config", db == "admin" && !txnAdminCommands[name]:
		return mongoerr.Newf(mongoerr.OperationNotSupportedInTransaction, "Cannot run command against the '%s' database in a transaction.", db)
	}
	if coll, ok := commandArg(cmd).StringValueOK(); ok && name != "getMore" && strings.HasPrefix(coll, "system.") {
		return mongoerr.Newf(mongoerr.OperationNotSupportedInTransaction,
			"Cannot run command against the '%s.%s' collection in a transaction.", env.DB, coll)
	}
	if name != "commitTransaction" && name != "abortTransaction" && name != "prepareTransaction" && lookup(cmd, "writeConcern").Type != 0 {
		return mongoerr.New(mongoerr.InvalidOptions, "writeConcern is not allowed within a multi-statement transaction")
	}
	if name == "aggregate" {
		if arr, ok := lookup(cmd, "pipeline").ArrayOK(); ok {
			vals, _ := arr.Values()
			for _, v := range vals {
				d, ok := v.DocumentOK()
				if !ok {
					continue
				}
				if first, err := d.IndexErr(0); err == nil {
					switch k := first.Key(); k {
					case "$out", "$merge", "$changeStream", "$collStats", "$currentOp", "$indexStats", "$listSessions", "$listLocalSessions", "$planCacheStats":
						return mongoerr.Newf(mongoerr.OperationNotSupportedInTransaction,
							"Operation not permitted in transaction :: caused by :: Stage not supported inside of a multi-document transaction: %s", k)
					}
				}
			}
		}
		if explainArg := lookup(cmd, "explain"); explainArg.Type != 0 && truthyValue(explainArg) {
			return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot run 'explain' in a multi-document transaction.")
		}
	}
	return nil
}

func truthyValue(v bsoncore.Value) bool { return service.Truthy(v) }

// txnBeginOperation is BeginOperation for a transaction statement: the statement's
// operations run in the transaction's unit, whose snapshot the first statement opens at
// the read concern's point.
func txnBeginOperation(ctx context.Context, env *service.Env, stmt *participant.Stmt, cmd bsoncore.Document) (context.Context, *concern.OpState, error) {
	req := requestOf(cmd)
	req.Txn = stmt.Resources()
	ctx = context.WithValue(ctx, txnStmtKey{}, stmt)
	ctx = vclock.WithPeer(ctx, service.GossipPeer(env))
	ctx, ops, snap, err := concern.BeginTxn(operation.WithRequest(ctx, req), concernNode(env.State), cmd, stmt.First())
	if err != nil {
		return ctx, ops, err
	}
	if stmt.First() {
		if err := stmt.OpenSnapshot(snap.Source, snap.TS); err != nil {
			return ctx, ops, err
		}
		if snap.AtClusterTime && req.Txn != nil {
			req.Txn.AtClusterTime = snap.TS
		}
	}
	return ctx, ops, nil
}

// txnFinish ends a statement after its handler (and, for commit, its write concern): a
// statement that failed aborts the transaction.
func txnFinish(stmt *participant.Stmt, err error) {
	if _, ok := errors.AsType[*concern.WriteConcernReply](err); ok {
		err = nil // the commit happened; only its write concern failed
	}
	stmt.End(err)
}

// addTxnCommands registers commitTransaction and abortTransaction.
func addTxnCommands(r *service.Registry) {
	add(r, &service.Command{Name: "commitTransaction", Auth: service.AuthAnyUser, Handler: runCommitTransaction, AdminOnly: true,
		Help: "commit a multi-document transaction", Writes: true, Secondary: service.SecondaryNever})
	add(r, &service.Command{Name: "abortTransaction", Auth: service.AuthAnyUser, Handler: runAbortTransaction, AdminOnly: true,
		Help: "abort a multi-document transaction", Writes: true, Secondary: service.SecondaryNever})
	add(r, &service.Command{Name: "prepareTransaction", Auth: service.AuthInternal, Handler: runPrepareTransaction, AdminOnly: true,
		Help:   "Prepares a transaction on this shard; sent by a router or re-sent by the transaction commit coordinator for a cross-shard transaction",
		Writes: true, Secondary: service.SecondaryNever})
}

// runPrepareTransaction prepares the session's transaction (the participant half of
// two-phase commit): a shard server takes it from the transaction coordinator; elsewhere
// only test commands send it.
func runPrepareTransaction(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if _, aware := env.State.Sharding.Identity(); !aware && !env.State.Params.Bool("enableTestCommands") {
		return nil, mongoerr.New(mongoerr.ShardingStateNotInitialized,
			"Cannot accept sharding commands if sharding state has not been initialized with a shardIdentity document")
	}
	if txnSetHasArbiter(env) {
		return nil, mongoerr.New(mongoerr.ReadConcernMajorityNotEnabled, "'prepareTransaction' is not supported for replica sets with arbiters")
	}
	stmt := txnStmtOf(ctx)
	if stmt == nil {
		return nil, mongoerr.New(mongoerr.CommandFailed, "prepareTransaction must be run within a transaction")
	}
	wc, err := writeParseConcern(env, cmd)
	if err != nil {
		return nil, err
	}
	ot, err := stmt.Prepare(ctx)
	if err != nil {
		return nil, err
	}
	reply := bsoncore.NewDocumentBuilder().AppendTimestamp("prepareTimestamp", ot.TS.Secs(), ot.TS.Inc()).Build()
	return txnFinishConcern(ctx, env, wc, reply)
}

// txnSetHasArbiter reports whether the replica set's config has an arbiter.
func txnSetHasArbiter(env *service.Env) bool {
	if env.State.Repl == nil {
		return false
	}
	cfg, err := env.State.Repl.Config()
	if err != nil {
		return false
	}
	members, _ := cfg.Lookup("members").ArrayOK()
	vals, _ := members.Values()
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			if b, _ := d.Lookup("arbiterOnly").BooleanOK(); b {
				return true
			}
		}
	}
	return false
}

func runCommitTransaction(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	stmt := txnStmtOf(ctx)
	if stmt == nil {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "commitTransaction must be run within a transaction")
	}
	wc, err := writeParseConcern(env, cmd)
	if err != nil {
		return nil, err
	}
	if v := lookup(cmd, "commitTimestamp"); v.Type != 0 {
		s, i, ok := v.TimestampOK()
		if !ok {
			return nil, typeMismatch("CommitTransaction", "commitTimestamp", v.Type, "timestamp")
		}
		ts := optime.MakeTimestamp(s, i)
		if stmt.Txn.State() == participant.Prepared && !ts.IsNull() && ts >= stmt.Txn.PrepareOpTime().TS {
			// MongoDB refuses a commit its node cannot know is final: the prepare entry
			// must be majority committed (else this node may be a deposed primary).
			if env.State.Repl == nil || env.State.Repl.MajorityCommitted().TS < stmt.Txn.PrepareOpTime().TS {
				return nil, mongoerr.New(mongoerr.InvalidOptions,
					"commitTransaction for a prepared transaction cannot be run before its prepare oplog entry has been majority committed")
			}
		}
		if err := stmt.CommitPrepared(ctx, ts); err != nil {
			return nil, err
		}
		return txnFinishConcern(ctx, env, wc, emptyDoc)
	}
	if stmt.Txn.State() == participant.Prepared {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "commitTransaction must provide commitTimestamp to prepared transaction.")
	}
	if err := stmt.Commit(ctx); err != nil {
		return nil, err
	}
	return txnFinishConcern(ctx, env, wc, emptyDoc)
}

func runAbortTransaction(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	stmt := txnStmtOf(ctx)
	if stmt == nil {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "abortTransaction must be run within a transaction")
	}
	wc, err := writeParseConcern(env, cmd)
	if err != nil {
		return nil, err
	}
	if err := stmt.Abort(ctx); err != nil {
		return nil, err
	}
	return txnFinishConcern(ctx, env, wc, emptyDoc)
}

// txnAppendReadOnly appends readOnly (whether the transaction has written nothing so far)
// to a shard server's reply to a transaction statement: the router that sent it chooses the
// commit path and the recovery shard from it (MongoDB's TxnResponseMetadata). Replica-set
// members and the statements that end the transaction answer without it.
func txnAppendReadOnly(env *service.Env, stmt *participant.Stmt, reply bsoncore.Document) bsoncore.Document {
	if env.State.Sharding.Role() != shardstate.RoleShardServer || stmt.Txn == nil || stmt.Txn.State() != participant.InProgress {
		return reply
	}
	if len(reply) < 5 {
		reply = emptyDoc
	}
	out := make([]byte, 0, len(reply)+16)
	out = append(out, reply[:len(reply)-1]...)
	out = bsoncore.AppendBooleanElement(out, "readOnly", stmt.ReadOnly())
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}
