package commands

import (
	"bytes"
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/query/plan"
)

func init() {
	register(&Command{
		Name:      "count",
		Handler:   runCount,
		Help:      "count objects in collection",
		Secondary: SecondaryOptIn,
	})
	registerExplain("count", countExplain)
}

type countArgs struct {
	ns   string
	req  plan.Request
	fast bool
}

func countParse(env *Env, cmd bsoncore.Document) (countArgs, error) {
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
	a.fast = len(a.req.Filter) <= 5 && a.req.Hint.Type == 0
	findFillRequestDefaults(env, &a.req)
	return a, nil
}

func runCount(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
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
	meta, coll, release, err := op.ReadCollection(ctx, a.ns)
	if err != nil {
		return nil, err
	}
	defer release()
	var n int64
	switch {
	case meta == nil:
	case a.fast:
		// Fast count from the record store's counts (MongoDB's COUNT stage over no filter).
		n, _ = coll.RecordStore().Counts()
		n = max(n-a.req.Skip, 0)
		if a.req.Limit > 0 {
			n = min(n, a.req.Limit)
		}
	default:
		ex, err := plan.Prepare(ctx, op.RU, meta, coll, a.req)
		if err != nil {
			return nil, err
		}
		defer ex.Close()
		for {
			_, _, ok, err := ex.Next(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			n++
		}
	}
	return doc(func(b []byte) []byte {
		return bsoncore.AppendInt32Element(b, "n", int32(min(n, 1<<31-1)))
	}), nil
}

// countView counts through a view: the view's pipeline, the count's $match/$skip/$limit
// and a final $count.
func countView(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
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

func countExplain(ctx context.Context, env *Env, cmd bsoncore.Document, v plan.Verbosity) (bsoncore.Document, bsoncore.Document, error) {
	a, err := countParse(env, cmd)
	if err != nil {
		return nil, nil, err
	}
	return explainPlan(ctx, env, a.ns, a.req, v)
}
