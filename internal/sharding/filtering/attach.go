package filtering

import (
	"sync/atomic"

	"humongo/internal/operation"
)

// runtimeOf is the node's runtime, once Attach has run (a shard's DB only).
var runtimeOf = operation.NewDecoration(func(*operation.DB) *holder { return &holder{} })

type holder struct{ rt atomic.Pointer[Runtime] }

// Attach makes rt the shard runtime of db: versioned requests are checked against it
// (DB.ShardCheck) and Of(db) returns it. Called once, before the server accepts connections.
func Attach(db *operation.DB, rt *Runtime) {
	runtimeOf.Get(db).rt.Store(rt)
	db.ShardCheck = rt.Check
}

// Of returns db's shard runtime, nil on a node that is not a shard.
func Of(db *operation.DB) *Runtime {
	if db == nil {
		return nil
	}
	h, ok := runtimeOf.Lookup(db)
	if !ok {
		return nil
	}
	return h.rt.Load()
}
