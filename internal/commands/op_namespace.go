package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

// collectionScoped are the commands whose currentOp namespace is the collection they name
// ("db.coll", as mongod's Command::Invocation::ns gives), not "db.$cmd".
var collectionScoped = map[string]bool{
	"aggregate": true, "find": true, "getMore": true, "count": true, "distinct": true,
	"insert": true, "update": true, "delete": true, "findAndModify": true,
	"create": true, "drop": true, "collMod": true, "createIndexes": true, "dropIndexes": true,
	"listIndexes": true, "validate": true, "collStats": true, "killCursors": true,
}

// withOpNamespace wraps h so that the running operation reports its collection namespace.
func withOpNamespace(h service.Handler) service.Handler {
	return func(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
		if env.Op != nil {
			coll, ok := commandArg(cmd).StringValueOK()
			if env.Name == "getMore" {
				coll, ok = lookup(cmd, "collection").StringValueOK()
			}
			if ok && coll != "" {
				env.Op.SetNS(env.DB + "." + coll)
			}
		}
		return h(ctx, env, cmd)
	}
}
