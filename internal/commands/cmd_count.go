package commands

import (
	"bytes"
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query/plan"
	"humongo/internal/service"
)

func addCount(r *service.Registry) {
	add(r, &service.Command{
		Name:      "count",
		Auth:      service.AuthOnNS(auth.Find),
		Handler:   runCount,
		Help:      "count objects in collection",
		Secondary: service.SecondaryOptIn,
	})
}

type countArgs struct {
	ns  string
	req plan.Request
}

func countParse(env *service.Env, cmd bsoncore.Document) (countArgs, error) {
	const name = "count"
	var a countArgs
	if err := checkStrict(cmd, name, "query", "limit", "skip", "hint", "collation", "fields", "let", "encryptionInformation"); err != nil {
		return a, err
	}
	ns, err := findCollName(env, name, commandArg(cmd))
	if err != nil {
		return a, err
	}
	a.ns = ns
	a.req.NS = ns
	if a.req.Filter, err = findDocArg(name, "query", lookup(cmd, "query")); err != nil {
		return a, err
	}
	if _, err = findDocArg(name, "fields", lookup(cmd, "fields")); err != nil {
		return a, err
	}
	if a.req.Vars, err = findLetArg(name, cmd); err != nil {
		return a, err
	}
	if a.req.Hint, err = findHintArg(name, lookup(cmd, "hint")); err != nil {
		return a, err
	}
	if v := lookup(cmd, "limit"); v.Type != 0 {
		n, err := intArg(name, "limit", v)
		if err != nil {
			return a, err
		}
		// count takes |limit| (a negative limit meant "single batch" in the legacy protocol).
		if n < 0 {
			n = -n
		}
		a.req.Limit = n
	}
	if a.req.Skip, _, err = findNonNegative(name, "skip", lookup(cmd, "skip")); err != nil {
		return a, err
	}
	if err := findParseCollation(name, lookup(cmd, "collation"), &a.req); err != nil {
		return a, err
	}
	a.req.CountOnly = true
	findFillRequestDefaults(env, &a.req)
	return a, nil
}

func runCount(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db := env.State.DB
	if db == nil {
		return nil, mongoerr.New(mongoerr.InternalError, "server has no storage")
	}
	a, err := countParse(env, cmd)
	if err != nil {
		return nil, err
	}
	if _, _, isView, err := viewLookup(ctx, env, a.ns); err != nil {
		return nil, err
	} else if isView {
		return countView(ctx, env, cmd)
	}
	op := db.NewOp(ctx)
	defer op.Close()
	if err := rcApplyRU(ctx, op.RU); err != nil { // readConcern (repl/concern)
		return nil, err
	}
	rd, release, err := op.OpenRead(ctx, a.ns, operation.ReadOwned) // the read seam (operation/read.go)
	if err != nil {
		return nil, err
	}
	defer release()
	// Without a query this is the record store's fast count (plan.Count), unless an
	// ownership filter must hide orphans.
	n, err := rd.Count(ctx, op.RU, a.req)
	if err != nil {
		return nil, err
	}
	return doc(func(b []byte) []byte {
		return bsoncore.AppendInt32Element(b, "n", int32(min(n, 1<<31-1)))
	}), nil
}

// countView counts through a view: the view's pipeline, the count's $match/$skip/$limit
// and a final $count.
func countView(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	r, err := viewReadRequest(env, "count", bytes.Clone(cmd))
	if err != nil {
		return nil, err
	}
	docs, err := aggDrain(ctx, env, r)
	if err != nil {
		return nil, err
	}
	var n int64
	if len(docs) > 0 {
		n, _ = lookup(docs[0], "count").AsInt64OK()
	}
	return doc(func(b []byte) []byte {
		return bsoncore.AppendInt32Element(b, "n", int32(min(n, 1<<31-1)))
	}), nil
}

func countExplain(ctx context.Context, env *service.Env, cmd bsoncore.Document, v plan.Verbosity) (bsoncore.Document, bsoncore.Document, error) {
	a, err := countParse(env, cmd)
	if err != nil {
		return nil, nil, err
	}
	return explainPlan(ctx, env, a.ns, a.req, v)
}
