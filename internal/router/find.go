package router

// find through the router (MongoDB's ClusterFind): target the shards whose chunks the
// filter's shard-key bounds reach (an unsharded collection's primary shard, with UNSHARDED
// and the databaseVersion), pass a single-shard find through with its cursor id rewritten,
// and for several shards send each the find with limit = skip+limit and no skip, and merge:
// sorted streams by sort key, then skip, limit, batchSize, singleBatch and (when the shards
// could not be given it) the projection on the router.

import (
	"context"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/collation"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/query/expr"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
)

// clientOnlyFields are a client's generic command fields the router does not forward: the
// driver adds its own session, cluster time and $db to each shard request, and the versions
// are the router's to attach.
var clientOnlyFields = map[string]bool{"lsid": true, "$db": true, "$clusterTime": true, "txnNumber": true,
	"autocommit": true, "startTransaction": true, "$readPreference": true, "readPreference": true,
	"shardVersion": true, "databaseVersion": true, "$configTime": true, "$topologyTime": true,
	"$audit": true, "$client": true}

// forward copies cmd without the client-only fields, the fields in drop, and (when set)
// replacing fields: set's values replace the fields of those names or are appended.
func forward(cmd bsoncore.Document, drop map[string]bool, set bsoncore.Document) bsoncore.Document {
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(cmd)+len(set)))
	els, _ := cmd.Elements()
	for _, el := range els {
		k := el.Key()
		if clientOnlyFields[k] || drop[k] {
			continue
		}
		if set != nil {
			if _, err := set.LookupErr(k); err == nil {
				continue
			}
		}
		out = append(out, el...)
	}
	if set != nil {
		sels, _ := set.Elements()
		for _, el := range sels {
			out = append(out, el...)
		}
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

func rawDoc(d bsoncore.Document) bson.Raw { return bson.Raw(d) }

// firstArg is the command's first element's value.
func firstArg(cmd bsoncore.Document) bsoncore.Value { return lookupFirst(cmd) }

// collectionArg returns the namespace a collection command names.
func collectionArg(env *service.Env, cmd bsoncore.Document) (string, error) {
	v := firstArg(cmd)
	name, ok := v.StringValueOK()
	if !ok {
		if v.Type == bsoncore.TypeBinary {
			return "", mongoerr.Newf(mongoerr.CommandNotSupported, "%s by collection UUID is not supported by humongos", env.Command.Name)
		}
		return "", mongoerr.Newf(mongoerr.InvalidNamespace, "collection name has invalid type %s", bsonutil.TypeName(v.Type))
	}
	if name == "" {
		return "", mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s.'", env.DB)
	}
	return env.DB + "." + name, nil
}

// docArg returns an optional object field of cmd.
func docArg(cmdName string, cmd bsoncore.Document, field string) (bsoncore.Document, error) {
	v := cmd.Lookup(field)
	switch v.Type {
	case 0, bsoncore.TypeNull:
		return nil, nil
	case bsoncore.TypeEmbeddedDocument:
		return v.Document(), nil
	}
	return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'object'",
		cmdName, field, bsonutil.TypeName(v.Type))
}

// intField returns an optional integral number field of cmd; ok false when absent.
func intField(cmdName string, cmd bsoncore.Document, field string) (n int64, ok bool, err error) {
	v := cmd.Lookup(field)
	switch v.Type {
	case 0:
		return 0, false, nil
	case bsoncore.TypeInt32:
		return int64(v.Int32()), true, nil
	case bsoncore.TypeInt64:
		return v.Int64(), true, nil
	case bsoncore.TypeDouble:
		f := v.Double()
		if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, false, mongoerr.Newf(mongoerr.FailedToParse, "BSON field '%s.%s' value must be an integer, got %v", cmdName, field, f)
		}
		return int64(f), true, nil
	}
	return 0, false, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected types '[long, int, decimal, double']",
		cmdName, field, bsonutil.TypeName(v.Type))
}

// nonNegative is intField refusing negative values as find does (51024).
func nonNegative(cmdName string, cmd bsoncore.Document, field string) (int64, bool, error) {
	n, ok, err := intField(cmdName, cmd, field)
	if err == nil && n < 0 {
		err = mongoerr.Newf(mongoerr.Location51024, "BSON field '%s' value must be >= 0, actual value '%d'", field, n)
	}
	return n, ok, err
}

// readCollation parses a read's collation: the collator merges and deduplications use (nil
// for binary) and whether the query is collated (non-simple) for targeting.
func readCollation(cmdName string, cmd bsoncore.Document) (*collation.Collator, bool, error) {
	spec, err := docArg(cmdName, cmd, "collation")
	if err != nil || len(spec) <= 5 {
		return nil, false, err
	}
	c, err := collation.Parse(spec)
	if err != nil {
		return nil, false, err
	}
	return c, c != nil, nil
}

// targetShards returns the shards a read of r's collection with filter reaches.
func targetShards(r *catalogcache.Routing, filter bsoncore.Document, collated bool) ([]string, error) {
	if !r.Sharded() {
		return []string{r.DB.Primary}, nil
	}
	if filter == nil {
		filter = emptyDoc
	}
	return r.Table.ShardsForQuery(filter, collated)
}

var emptyDoc = bsoncore.NewDocumentBuilder().Build()

// versionedFor returns, per shard, cmd with the versions routing r gives it.
func versionedFor(cmd bsoncore.Document, r *catalogcache.Routing, shards []string) map[string]bsoncore.Document {
	out := make(map[string]bsoncore.Document, len(shards))
	for _, s := range shards {
		out[s] = Versioned(cmd, r, s)
	}
	return out
}

// emptyCursorReply is the answer for a namespace whose database does not exist.
func emptyCursorReply(ns string) bsoncore.Document {
	return cursor.AppendReply(nil, 0, ns, cursor.ReplyOptions{First: true, BatchBeforeID: true})
}

// missingDatabase reports whether err says the database does not exist (the catalog
// cache's NamespaceNotFound).
func missingDatabase(err error) bool { return mongoerr.Is(err, mongoerr.NamespaceNotFound) }

func runFind(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "find"
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, err := collectionArg(env, cmd)
	if err != nil {
		return nil, err
	}
	filter, err := docArg(name, cmd, "filter")
	if err != nil {
		return nil, err
	}
	sortSpec, err := docArg(name, cmd, "sort")
	if err != nil {
		return nil, err
	}
	projSpec, err := docArg(name, cmd, "projection")
	if err != nil {
		return nil, err
	}
	skip, _, err := nonNegative(name, cmd, "skip")
	if err != nil {
		return nil, err
	}
	limit, _, err := nonNegative(name, cmd, "limit")
	if err != nil {
		return nil, err
	}
	batchSize, hasBatch, err := nonNegative(name, cmd, "batchSize")
	if err != nil {
		return nil, err
	}
	singleBatch, _ := cmd.Lookup("singleBatch").BooleanOK()
	if tailable, _ := cmd.Lookup("tailable").BooleanOK(); tailable {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "tailable cursors are not supported by humongos yet")
	}
	coll, collated, err := readCollation(name, cmd)
	if err != nil {
		return nil, err
	}
	var sortKey *expr.SortKey
	if len(sortSpec) > 5 {
		if sortKey, err = findSortKey(sortSpec); err != nil {
			return nil, err
		}
	}
	count := int64(cursor.DefaultFirstBatch)
	if hasBatch {
		count = batchSize // 0 opens a cursor with an empty first batch
	}
	var reply bsoncore.Document
	err = c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
		shards, err := targetShards(r, filter, collated)
		if err != nil {
			return err
		}
		src := &mergeSource{}
		fwd := cmd
		if len(shards) > 1 {
			set := bsoncore.NewDocumentBuilder()
			if limit > 0 {
				set.AppendInt64("limit", limit+skip)
			}
			if hasBatch && batchSize > 0 {
				set.AppendInt64("batchSize", batchSize+skip)
			}
			drop := map[string]bool{"skip": true, "singleBatch": true}
			if sortKey != nil && projSpec != nil {
				// The merge needs the sort fields: project on the router.
				drop["projection"] = true
				if src.project, err = routerProjection(filter, projSpec, coll); err != nil {
					return err
				}
			}
			fwd = forward(cmd, drop, set.Build())
			src.sort, src.collator, src.skip, src.limit = sortKey, coll, skip, limit
		} else {
			fwd = forward(cmd, nil, nil)
		}
		cursors, err := openCursors(ctx, c, env.DB, shards, versionedFor(fwd, r, shards))
		if err != nil {
			return err
		}
		src.cursors = cursors
		reply, err = firstBatchReply(ctx, env, cmd, ns, src, count, singleBatch, true)
		return err
	})
	if missingDatabase(err) {
		return emptyCursorReply(ns), nil
	}
	return reply, err
}

// findSortKey parses find's sort; {$meta: ...} components cannot be merged on the router.
func findSortKey(spec bsoncore.Document) (*expr.SortKey, error) {
	els, _ := spec.Elements()
	for _, el := range els {
		if el.Value().Type == bsoncore.TypeEmbeddedDocument {
			return nil, mongoerr.New(mongoerr.CommandNotSupported, "humongos cannot merge a $meta sort across shards yet")
		}
	}
	return expr.NewSortKey(spec)
}

// routerProjection returns a function applying projection spec on the router, with the
// filter's match details for positional projections.
func routerProjection(filter, spec bsoncore.Document, coll *collation.Collator) (func(bsoncore.Document) (bsoncore.Document, error), error) {
	if filter == nil {
		filter = emptyDoc
	}
	opts := query.ParseOptions{AllowExpr: true, AllowJSONSchema: true}
	if coll != nil {
		opts.Collator = coll
	}
	m, err := query.Parse(filter, opts)
	if err != nil {
		return nil, err
	}
	p, err := query.ParseProjection(spec, m)
	if err != nil {
		return nil, err
	}
	return func(doc bsoncore.Document) (bsoncore.Document, error) {
		var d query.MatchDetails
		if _, err := m.MatchesWithDetails(doc, &d); err != nil {
			return nil, err
		}
		out, err := p.Apply(doc, &d, nil)
		return bsoncore.Document(out), err
	}, nil
}
