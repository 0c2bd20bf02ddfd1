package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
)

// replCoord returns the replication coordinator, or NoReplicationEnabled on a standalone
// (every replSet* command's answer there).
func replCoord(env *Env) (*coord.Coordinator, error) {
	if env.State.Repl == nil {
		return nil, mongoerr.New(mongoerr.NoReplicationEnabled, "not running with --replSet")
	}
	return env.State.Repl, nil
}

// CheckReplState is the dispatcher's replication gate (MongoDB's
// checkCanServeReadsFor / canAcceptWritesFor): on a replica-set member, commands that write
// need a writable primary (NotWritablePrimary 10107), and reads that are not secondary-ok by
// nature need the client's secondaryOk (a non-primary read preference) unless this node is
// primary (NotPrimaryNoSecondaryOk 13435). A standalone passes everything.
func CheckReplState(env *Env, c *Command, cmd bsoncore.Document) error {
	rc := env.State.Repl
	if rc == nil || c.SecondaryOk {
		return nil
	}
	if c.Writes {
		return rc.CheckCanAcceptWrites(env.DB)
	}
	return rc.CheckCanServeReads(env.DB, secondaryOkRequested(cmd))
}

// secondaryOkRequested: $readPreference with a mode other than primary, or the legacy
// $secondaryOk flag, lets a secondary serve the read.
func secondaryOkRequested(cmd bsoncore.Document) bool {
	if truthy(lookup(cmd, "$secondaryOk")) {
		return true
	}
	rp, ok := lookup(cmd, "$readPreference").DocumentOK()
	if !ok {
		return false
	}
	mode, _ := lookup(rp, "mode").StringValueOK()
	return mode != "" && mode != "primary"
}

// KillWritesForStepDown interrupts every running write command with cause (step-down kills
// the operations that conflict with the state change, MongoDB's killConflictingOperations).
func KillWritesForStepDown(st *State, reg *Registry, cause error) {
	for _, c := range st.Clients.Conns() {
		c.mu.Lock()
		op := c.op
		c.mu.Unlock()
		if op == nil {
			continue
		}
		if cmd := reg.Lookup(op.Name); cmd != nil && cmd.Writes {
			op.kill(cause)
		}
	}
}

// ReplStore keeps the coordinator's single-document local collections
// (local.system.replset, local.replset.election) in the storage engine.
type ReplStore struct{ DB *DB }

var _ coord.Store = ReplStore{}

// Load returns the collection's only document, or nil.
func (s ReplStore) Load(ctx context.Context, ns string) (bsoncore.Document, error) {
	op := s.DB.NewOp()
	defer op.Close()
	_, coll, release, err := op.ReadCollection(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer release()
	if coll == nil {
		return nil, nil
	}
	cur, err := coll.RecordStore().NewCursor(op.RU, false)
	if err != nil {
		return nil, err
	}
	_, doc, ok := cur.Next()
	if !ok {
		return nil, cur.Err()
	}
	return append(bsoncore.Document(nil), doc...), nil
}

// Save replaces the collection's only document; durable waits for the journal.
func (s ReplStore) Save(ctx context.Context, ns string, doc bsoncore.Document, durable bool) error {
	op := s.DB.NewOp()
	defer op.Close()
	err := op.WriteCollection(ctx, ns, true, func(coll *index.Collection) error {
		cur, err := coll.RecordStore().NewCursor(op.RU, false)
		if err != nil {
			return err
		}
		rid, old, ok := cur.Next()
		if err := cur.Err(); err != nil {
			return err
		}
		if ok {
			return coll.UpdateDocument(op.RU, rid, append(bsoncore.Document(nil), old...), doc)
		}
		_, err = coll.InsertDocument(op.RU, doc)
		return err
	})
	if err != nil || !durable {
		return err
	}
	return s.DB.Engine.WaitUntilDurable(ctx)
}
