package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/validate"
)

func addValidate(r *service.Registry) {
	add(r, &service.Command{
		Name:      "validate",
		Auth:      service.AuthOnNS(auth.Validate),
		Handler:   runValidate,
		Help:      "Validate contents of a namespace by scanning its data structures for correctness.\nThis is a slow operation.\n\tAdd {full: true} option to do a more thorough check.",
		Secondary: service.SecondaryOptIn,
	})
}

// runValidate validates a collection with internal/validate in the foreground under the
// collection X lock (background: true is accepted and also runs in the foreground, which
// gives the same answer with stronger isolation).
func runValidate(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "validate"
	ns, err := ddlCollectionNS(env, cmd)
	if err != nil {
		return nil, err
	}
	if err := checkStrict(cmd, c, "full", "background", "repair", "enforceFastCount",
		"checkBSONConformance", "metadata", "scandata", "collectionUUID"); err != nil {
		return nil, err
	}
	full, err := ddlBoolArg(c, "full", lookup(cmd, "full"))
	if err != nil {
		return nil, err
	}
	background, err := ddlBoolArg(c, "background", lookup(cmd, "background"))
	if err != nil {
		return nil, err
	}
	repair, err := ddlBoolArg(c, "repair", lookup(cmd, "repair"))
	if err != nil {
		return nil, err
	}
	checkBSON, err := ddlBoolArg(c, "checkBSONConformance", lookup(cmd, "checkBSONConformance"))
	if err != nil {
		return nil, err
	}
	if background && full {
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"Running the validate command with both { background: true } and { full: true } is not supported.")
	}
	if background && repair {
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"Running the validate command with both { background: true } and { repair: true } is not supported.")
	}
	if repair {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "Running the validate command with { repair: true } can only be performed in standalone mode.")
	}
	op := db.NewOp(ctx)
	defer op.Close()
	scope, err := op.Locker.CollectionLock(ctx, ns, lock.ModeX)
	if err != nil {
		return nil, err
	}
	defer func() { _ = scope.Release() }()
	if v := lookup(cmd, "collectionUUID"); v.Type != 0 {
		m, ok := db.Catalog.Latest().ByNS(ns)
		if !ok {
			return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "Collection '%s' does not exist to validate.", ns)
		}
		if err := ddlCheckCollectionUUID(v, m); err != nil {
			return nil, err
		}
	}
	res, err := validate.ValidateWithOptions(ctx, db.Engine, db.Catalog, ns, validate.Options{
		Full: full || checkBSON, Logger: db.Log,
	})
	if err != nil {
		return nil, err
	}
	out := res.ToBSON()
	if res.Valid {
		return out, nil
	}
	return doc(func(b []byte) []byte {
		elems, _ := out.Elements()
		for _, e := range elems {
			b = append(b, e...)
		}
		return bsoncore.AppendStringElement(b, "advice",
			"A corrupt namespace has been detected. See http://dochub.mongodb.org/core/data-recovery for recovery steps.")
	}), nil
}
