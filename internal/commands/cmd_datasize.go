package commands

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/service"
)

func addDataSize(r *service.Registry) {
	add(r, &service.Command{
		Name:      "dataSize",
		Auth:      service.AuthOnFullNS(auth.Find),
		Aliases:   []string{"datasize"},
		Handler:   runDataSize,
		Help:      "determine data size for a set of data in a certain range\nexample: { dataSize:\"blog.posts\", keyPattern:{x:1}, min:{x:10}, max:{x:55} }",
		Secondary: service.SecondaryAlways,
	})
}

// runDataSize answers {size, numObjects, millis} for a namespace: from the fast counts for the
// whole collection, or by a collection scan for a [min, max) range of keyPattern's fields. A
// missing collection has size 0.
func runDataSize(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	start := time.Now()
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "dataSize"
	if err := checkStrict(cmd, c, "keyPattern", "min", "max", "estimate", "maxSize", "maxObjects"); err != nil {
		return nil, err
	}
	arg := commandArg(cmd)
	ns, ok := arg.StringValueOK()
	if !ok {
		return nil, typeMismatch(c, c, arg.Type, "string")
	}
	if err := catalog.ValidateNS(ns); err != nil {
		return nil, err
	}
	keyPattern, err := findDocArg(c, "keyPattern", lookup(cmd, "keyPattern"))
	if err != nil {
		return nil, err
	}
	minKey, err := findDocArg(c, "min", lookup(cmd, "min"))
	if err != nil {
		return nil, err
	}
	maxKey, err := findDocArg(c, "max", lookup(cmd, "max"))
	if err != nil {
		return nil, err
	}
	ranged := len(minKey) > 5 || len(maxKey) > 5
	if ranged && len(keyPattern) <= 5 {
		return nil, mongoerr.New(mongoerr.BadValue, "only key pattern and a range can be specified together")
	}
	op := db.NewOp(ctx)
	defer op.Close()
	// Orphans count: mongod's dataSize scans without a shard filter (the splitter and the
	// balancer size the data physically in a range).
	rd, release, err := op.OpenRead(ctx, ns, operation.ReadAllRecords) // the read seam (operation/read.go)
	if err != nil {
		return nil, err
	}
	defer release()
	m := rd.Meta()
	var size, n int64
	switch {
	case m == nil:
	case !ranged:
		n, size = db.Engine.Counts(m.Ident)
	default:
		fields, _ := keyPattern.Elements()
		// dataSize may not ignore prepare conflicts (mongod's default): a record a prepared
		// transaction wrote makes the scan wait for it to commit or abort and start over in a
		// new snapshot.
		err := db.Engine.PrepareConflictRetry(ctx, func() error {
			defer op.RU.AbandonSnapshot()
			n, size = 0, 0
			cur, err := rd.Records(op.RU)
			if err != nil {
				return err
			}
			defer cur.Close()
			for i := 0; ; i++ {
				_, raw, ok := cur.Next()
				if !ok {
					break
				}
				if i%1000 == 0 {
					if err := ddlCheckCtx(ctx); err != nil {
						return err
					}
				}
				if ddlInKeyRange(bsoncore.Document(raw), fields, minKey, maxKey) {
					n++
					size += int64(len(raw))
				}
			}
			return cur.Err()
		})
		if err != nil {
			return nil, err
		}
	}
	return doc(func(b []byte) []byte {
		b = ddlAppendNumber(b, "size", size)
		b = ddlAppendNumber(b, "numObjects", n)
		return bsoncore.AppendInt32Element(b, "millis", int32(time.Since(start).Milliseconds()))
	}), nil
}

var ddlNullValue = bsoncore.Value{Type: bsoncore.TypeNull}

// ddlInKeyRange reports whether doc's key (keyPattern's fields, missing as null) is within
// [minKey, maxKey) compared field by field in pattern order; an empty bound is unbounded.
func ddlInKeyRange(doc bsoncore.Document, fields []bsoncore.Element, minKey, maxKey bsoncore.Document) bool {
	cmpBound := func(bound bsoncore.Document) int {
		bvals, _ := bound.Values()
		for i, f := range fields {
			if i >= len(bvals) {
				return 0
			}
			v, ok := bsonutil.Lookup(doc, f.Key())
			if !ok {
				v = ddlNullValue
			}
			c := bsonutil.Compare(v, bvals[i])
			if desc, _ := service.AsFloat(f.Value()); desc < 0 {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	}
	if len(minKey) > 5 && cmpBound(minKey) < 0 {
		return false
	}
	if len(maxKey) > 5 && cmpBound(maxKey) >= 0 {
		return false
	}
	return true
}
