package commands

import (
	"bytes"
	"context"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/collation"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query/plan"
	"humongo/internal/service"
)

func addDistinct(r *service.Registry) {
	add(r, &service.Command{
		Name:      "distinct",
		Auth:      service.AuthOnNS(auth.Find),
		Handler:   runDistinct,
		Help:      "{ distinct : 'collection name' , key : 'a.b' , query : {} }",
		Secondary: service.SecondaryOptIn,
	})
}

// distinctMaxBytes is the reply cap (BSONObjMaxUserSize): larger results fail with 17217.
const distinctMaxBytes = 16 * 1024 * 1024

func distinctParse(env *service.Env, cmd bsoncore.Document) (string, string, plan.Request, error) {
	const name = "distinct"
	var req plan.Request
	if err := checkStrict(cmd, name, "key", "query", "collation", "hint", "let", "querySettings"); err != nil {
		return "", "", req, err
	}
	ns, err := findCollName(env, name, commandArg(cmd))
	if err != nil {
		return "", "", req, err
	}
	kv := lookup(cmd, "key")
	if kv.Type == 0 {
		return "", "", req, mongoerr.Newf(codeMissingField, "BSON field 'distinct.key' is missing but a required field")
	}
	if kv.Type != bsoncore.TypeString {
		return "", "", req, typeMismatch(name, "key", kv.Type, "string")
	}
	key := kv.StringValue()
	if key == "" {
		return "", "", req, mongoerr.New(mongoerr.Location40352, "FieldPath cannot be constructed with empty string")
	}
	if strings.HasPrefix(key, "$") {
		return "", "", req, mongoerr.Newf(mongoerr.Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
	}
	if req.Filter, err = findDocArg(name, "query", lookup(cmd, "query")); err != nil {
		return "", "", req, err
	}
	if req.Hint, err = findHintArg(name, lookup(cmd, "hint")); err != nil {
		return "", "", req, err
	}
	if req.Vars, err = findLetArg(name, cmd); err != nil {
		return "", "", req, err
	}
	if err := findParseCollation(name, lookup(cmd, "collation"), &req); err != nil {
		return "", "", req, err
	}
	req.NS = ns
	findFillRequestDefaults(env, &req)
	return ns, key, req, nil
}

func runDistinct(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db := env.State.DB
	if db == nil {
		return nil, mongoerr.New(mongoerr.InternalError, "server has no storage")
	}
	ns, key, req, err := distinctParse(env, cmd)
	if err != nil {
		return nil, err
	}
	var next func() (bsoncore.Document, bool, error)
	var qcoll *collation.Collator // the query's effective collation: values equal under it are one
	if _, _, isView, err := viewLookup(ctx, env, ns); err != nil {
		return nil, err
	} else if isView {
		// Through a view: the view's pipeline and the query's $match, then the same
		// extraction as for a collection.
		r, err := viewReadRequest(env, "distinct", bytes.Clone(cmd))
		if err != nil {
			return nil, err
		}
		src, err := aggStart(ctx, env, r)
		if err != nil {
			return nil, err
		}
		defer src.Close()
		qcoll = src.collation()
		next = func() (bsoncore.Document, bool, error) { return src.Next(ctx) }
	} else {
		op := db.NewOp(ctx)
		defer op.Close()
		if err := rcApplyRU(ctx, op.RU); err != nil { // readConcern (repl/concern)
			return nil, err
		}
		rd, release, err := op.OpenRead(ctx, ns, operation.ReadOwned) // the read seam (operation/read.go)
		if err != nil {
			return nil, err
		}
		defer release()
		ex, err := rd.Plan(ctx, op.RU, req)
		if err != nil {
			return nil, err
		}
		defer ex.Close()
		qcoll = ex.Collation()
		next = func() (bsoncore.Document, bool, error) {
			_, d, ok, err := ex.Next(ctx)
			return d, ok, err
		}
	}
	// Values are kept as owned copies and de-duplicated by BSON comparison; the reply lists
	// them in ascending BSON order, as MongoDB's BSONElementSet does.
	var vals []bsoncore.Value
	seen := map[string]int{}
	size := 0
	for {
		d, ok, err := next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		var ferr error
		_ = bsonutil.ExtractElements(d, key, true, func(v bsoncore.Value) {
			if ferr != nil {
				return
			}
			k := distinctKey(v)
			if _, dup := seen[k]; dup {
				return
			}
			size += len(v.Data) + 8
			if size > distinctMaxBytes {
				ferr = mongoerr.New(mongoerr.Location17217, "distinct too big, 16mb cap")
				return
			}
			seen[k] = len(vals)
			vals = append(vals, bsoncore.Value{Type: v.Type, Data: append([]byte(nil), v.Data...)})
		}, nil)
		if ferr != nil {
			return nil, ferr
		}
	}
	// Numerically equal values of different types (1, 1.0, NumberLong(1)) are one value.
	var cmpColl bsonutil.StringComparer // nil interface when coll is nil
	if qcoll != nil {
		cmpColl = qcoll
	}
	sort.SliceStable(vals, func(i, j int) bool { return bsonutil.CompareWithCollator(vals[i], vals[j], cmpColl) < 0 })
	out := vals[:0]
	for _, v := range vals {
		if len(out) > 0 && bsonutil.CompareWithCollator(out[len(out)-1], v, cmpColl) == 0 {
			continue
		}
		out = append(out, v)
	}
	return doc(func(b []byte) []byte {
		idx, b := bsoncore.AppendArrayElementStart(b, "values")
		for i, v := range out {
			b = bsoncore.AppendValueElement(b, itoa(int64(i)), v)
		}
		b, _ = bsoncore.AppendArrayEnd(b, idx)
		return b
	}), nil
}

// distinctKey is an exact-bytes de-duplication key (equal-by-value duplicates of different
// types are merged after sorting).
func distinctKey(v bsoncore.Value) string {
	return string(rune(v.Type)) + string(v.Data)
}

func distinctExplain(ctx context.Context, env *service.Env, cmd bsoncore.Document, v plan.Verbosity) (bsoncore.Document, bsoncore.Document, error) {
	ns, _, req, err := distinctParse(env, cmd)
	if err != nil {
		return nil, nil, err
	}
	return explainPlan(ctx, env, ns, req, v)
}
