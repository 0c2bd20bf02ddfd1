package filtering

import (
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
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
	if w, ok := db.Observer().(shardKeyUser); ok {
		w.SetShardKeyPatterns(rt.ShardKeyPattern)
	}
}

// shardKeyUser is the oplog writer's hook for documentKeys (oplog.Writer.SetShardKeyPatterns).
type shardKeyUser interface {
	SetShardKeyPatterns(func(ns string, uuid catalog.UUID) bsoncore.Document)
}

// ShardKeyPattern is the shard key pattern of ns when the runtime knows it sharded with
// this uuid, nil otherwise.
func (r *Runtime) ShardKeyPattern(ns string, uuid catalog.UUID) bsoncore.Document {
	m, ok := r.Collection(ns)
	if !ok || m == nil || !m.Sharded() || m.Table.UUID() != uuid {
		return nil
	}
	return m.Table.Pattern().Doc()
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
