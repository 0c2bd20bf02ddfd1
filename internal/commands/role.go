package commands

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/lock"
	"humongo/internal/operation"
	"humongo/internal/repl/concern"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
	"humongo/internal/txn/participant"
)

// Role is humongod's service.Role: the data node's hooks around every command, wrapping the
// replication gate (CheckReplState), read and write concern (BeginOperation,
// FinishOperation), $clusterTime gossip (AppendClusterTime) and the topology version of a
// standalone or replica-set member.
type Role struct{ st *service.State }

// NewRole returns humongod's role over st.
func NewRole(st *service.State) *Role { return &Role{st: st} }

// Admit implements service.Role: on a replica-set member, writes need a writable primary and
// user reads secondaryOk on a secondary.
func (r *Role) Admit(env *service.Env, c *service.Command, cmd bsoncore.Document) error {
	return CheckReplState(env, c, cmd)
}

// Begin implements service.Role: $clusterTime gossip, readConcern waits, the read timestamp.
func (r *Role) Begin(ctx context.Context, env *service.Env, c *service.Command, cmd bsoncore.Document) (context.Context, any, error) {
	stmt, err := txnBegin(ctx, env, c, cmd)
	if err != nil {
		return ctx, nil, err
	}
	if stmt != nil {
		ctx, ops, err := txnBeginOperation(ctx, env, stmt, cmd)
		if err != nil {
			txnFinish(stmt, err)
			if ops == nil {
				return ctx, nil, err
			}
			return ctx, &roleOp{ops: ops}, err
		}
		return ctx, &roleOp{ops: ops, stmt: stmt}, nil
	}
	ctx, ops, err := BeginOperation(ctx, env, c, cmd)
	if ops == nil {
		return ctx, nil, err // no typed nil inside the token
	}
	return ctx, &roleOp{ops: ops}, err
}

// roleOp is the role's token for one command: its concern state and, inside a
// transaction, its statement.
type roleOp struct {
	ops  *concern.OpState
	stmt *participant.Stmt
}

func opsOf(op any) *concern.OpState {
	if r, ok := op.(*roleOp); ok {
		return r.ops
	}
	return nil
}

// Finish implements service.Role: linearizable and snapshot reads complete, and a write
// whose writes succeeded but whose write concern failed becomes ok: 1 with wce.
func (r *Role) Finish(ctx context.Context, env *service.Env, op any, reply bsoncore.Document, err error) (bsoncore.Document, bsoncore.Document, error) {
	if err == nil {
		reply, err = FinishOperation(ctx, env, opsOf(op), reply)
	}
	if r, ok := op.(*roleOp); ok && r.stmt != nil {
		if err == nil {
			reply = txnAppendReadOnly(env, r.stmt, reply)
		}
		txnFinish(r.stmt, err)
	}
	shardOnStaleError(ctx, env, reply, err)
	if wcr, ok := errors.AsType[*concern.WriteConcernReply](err); ok {
		return wcr.Reply, wcr.WCE, nil
	}
	return reply, nil, err
}

// Decorate implements service.Role: a replica-set member's $clusterTime and operationTime.
func (r *Role) Decorate(env *service.Env, op any, reply bsoncore.Document) bsoncore.Document {
	return AppendClusterTime(env, opsOf(op), reply)
}

// TopologyVersion implements service.Role.
func (r *Role) TopologyVersion() int64 {
	counter, _ := CurrentTopologyVersion(r.st)
	return counter
}

// Shutdown implements service.Role: idle cursors release their storage snapshots before the
// engine closes.
func (r *Role) Shutdown() { r.st.Cursors().Close() }

// NewState returns humongod's server-wide state over db (nil: a server without storage, as
// some protocol tests run). cfg.Params defaults to mongod's parameters (DefaultParamSpecs).
func NewState(db *operation.DB, cfg service.Config) *service.State {
	if cfg.Params == nil {
		cfg.Params = service.NewParams(DefaultParamSpecs())
	}
	if db != nil {
		watchTickets(cfg.Params, db)
	}
	st := service.NewState(cfg)
	if db != nil {
		st.DB = db
		// Committed inserts into capped collections wake this server's awaitData getMores
		// (find_cursor.go's findWaitChan picks the signal a cursor waits on).
		db.Colls.SetCappedInsertHook(st.Cursors().NotifyInsert)
		// A transaction that ends kills the cursors it opened; killSessions and friends
		// abort the sessions' transactions (after killing their running statements, so the
		// sessions can be checked out).
		participant.SetCursorKiller(db, func(ids []int64) { st.Cursors().Kill(ids) })
		st.Sessions.OnKill(func(match func(lsc.Key) bool) {
			participant.AbortAll(db, match, "session killed")
		})
	}
	return st
}

// watchTickets keeps db's admission-control pools at the sizes of the
// storageEngineConcurrent{Read,Write}Transactions parameters, at startup and after each
// setParameter.
func watchTickets(p *service.Params, db *operation.DB) {
	ts := db.Locks.Tickets()
	for name, h := range map[string]*lock.TicketHolder{
		"storageEngineConcurrentReadTransactions":  ts.Read,
		"storageEngineConcurrentWriteTransactions": ts.Write,
	} {
		p.Watch(name, func(v any) {
			if n, ok := v.(int64); ok && n > 0 {
				h.Resize(int(n))
			}
		})
	}
}

// Mongod is what a humongod server is built from: its state, mongod's registry and role.
type Mongod struct {
	State    *service.State
	Registry *service.Registry
	Role     *Role
}

// NewMongod returns humongod's state over db (see NewState), a fresh registry and the role.
func NewMongod(db *operation.DB, cfg service.Config) Mongod {
	st := NewState(db, cfg)
	return Mongod{State: st, Registry: NewRegistry(), Role: NewRole(st)}
}
