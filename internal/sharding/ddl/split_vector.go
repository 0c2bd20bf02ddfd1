package ddl

// splitVector (spec: sharding.md "The auto split task"; MongoDB 7.0's split_vector.cpp and
// split_vector_command.cpp): a shard picks split points for a range of a collection by
// scanning the shard key index. The selection (SelectSplitPoints) is pure over a restartable
// key scan so that it can be tested without a server; SplitVector feeds it from the node's
// own commands (listIndexes, collStats, and a find over the index with min/max and
// returnKey, which is an index scan of [min, max) in key order).

import (
	"context"
	"log/slog"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/shardkey"
)

// maxObjectsPerChunk is splitVector's default maxChunkObjects (kMaxObjectPerChunk).
const maxObjectsPerChunk = 250000

// maxUserBSONSize bounds the reply's split keys (BSONObjMaxUserSize).
const maxUserBSONSize = 16 * 1024 * 1024

// SplitVectorRequest is splitVector's content ({splitVector: ns, keyPattern, min, max,
// maxChunkSize (MB) | maxChunkSizeBytes, maxSplitPoints, maxChunkObjects, force}). Zero
// means absent for the optional numbers.
type SplitVectorRequest struct {
	NS                string
	KeyPattern        bsoncore.Document
	Min, Max          bsoncore.Document // both empty: the whole collection
	Force             bool
	MaxSplitPoints    int64
	MaxChunkObjects   int64
	MaxChunkSizeBytes int64
}

// ParseSplitVector reads a splitVector command with split_vector_command.cpp's checks (its
// errmsg-only failures carry InvalidOptions here, as the router's split does).
func ParseSplitVector(cmd bsoncore.Document) (SplitVectorRequest, error) {
	var r SplitVectorRequest
	ns, ok := cmd.Index(0).Value().StringValueOK()
	if !ok || !strings.Contains(ns, ".") || strings.HasPrefix(ns, ".") || strings.HasSuffix(ns, ".") {
		return r, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	r.NS = ns
	objField := func(f string) bsoncore.Document {
		d, _ := cmd.Lookup(f).DocumentOK()
		if len(d) <= 5 {
			return nil
		}
		return d
	}
	if r.KeyPattern = objField("keyPattern"); r.KeyPattern == nil {
		return r, mongoerr.New(mongoerr.InvalidOptions, "no key pattern found in splitVector")
	}
	r.Min, r.Max = objField("min"), objField("max")
	if (r.Min == nil) != (r.Max == nil) {
		return r, mongoerr.New(mongoerr.InvalidOptions, "either provide both min and max or leave both empty")
	}
	r.Force = truthy(cmd.Lookup("force"))
	number := func(f string) (int64, bool) {
		v := cmd.Lookup(f)
		fl, ok := bsonutil.ToFloat64(v)
		if !ok || v.Type == bsoncore.TypeBoolean {
			return 0, false
		}
		return safeNumberLong(fl), true
	}
	if n, ok := number("maxSplitPoints"); ok {
		r.MaxSplitPoints = n
	}
	if n, ok := number("maxChunkObjects"); ok {
		if n <= 0 {
			return r, mongoerr.New(mongoerr.InvalidOptions, "maxChunkObjects must be greater than 0")
		}
		r.MaxChunkObjects = n
	}
	if mb, ok := number("maxChunkSize"); ok {
		if mb < 1 || mb > 1024 {
			return r, mongoerr.New(mongoerr.InvalidOptions, "maxChunkSize must lie within the range [1MB, 1024MB]")
		}
		r.MaxChunkSizeBytes = mb << 20
	} else if b, ok := number("maxChunkSizeBytes"); ok {
		if b < 1<<20 || b > 1<<30 {
			return r, mongoerr.New(mongoerr.InvalidOptions, "The specified max chunk size must lie within the range [1MB, 1024MB]")
		}
		r.MaxChunkSizeBytes = b
	}
	return r, nil
}

// safeNumberLong is BSONElement::safeNumberLong: NaN is 0, out of range saturates.
func safeNumberLong(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// KeyScan scans the shard key index over the requested range in key order, calling yield
// with each key (shard key fields only, in pattern order) until yield returns false. It can
// be called more than once (force scans twice).
type KeyScan func(ctx context.Context, yield func(key bsoncore.Document) bool) error

// SplitPointsInput is what SelectSplitPoints reads besides the scan: the collection's size
// estimates (collection-wide, as MongoDB's numRecords and dataSize) and the request's limits.
type SplitPointsInput struct {
	DataSize, RecCount int64
	Force              bool
	MaxSplitPoints     int64
	MaxChunkObjects    int64
	MaxChunkSizeBytes  int64
	Log                *slog.Logger // nil: no warnings logged
	NS                 string
}

// SplitPoints is splitVector's answer: the split keys, and whether the range holds a single
// shard key value (then no split is possible however big it grows: a jumbo candidate).
type SplitPoints struct {
	Keys      []bsoncore.Document
	SingleKey bool
}

// SelectSplitPoints is splitVector's selection: nothing when the collection's data is
// smaller than the max chunk size (force makes that size the data size, i.e. split in the
// middle), otherwise every keyCount-th key where keyCount makes each piece half the max chunk
// size (or maxChunkObjects), never the same key twice (all documents of one key value stay in
// one chunk) and nothing at all when the range holds a single key value. It returns
// OperationFailed when the range holds no key.
func SelectSplitPoints(ctx context.Context, in SplitPointsInput, scan KeyScan) (SplitPoints, error) {
	maxObjects := in.MaxChunkObjects
	if maxObjects == 0 {
		maxObjects = maxObjectsPerChunk
	}
	maxBytes := in.MaxChunkSizeBytes
	if in.Force {
		maxBytes = in.DataSize
	}
	if maxBytes <= 0 {
		return SplitPoints{}, mongoerr.New(mongoerr.InvalidOptions, "need to specify the desired max chunk size")
	}
	if in.DataSize < maxBytes || in.RecCount == 0 {
		return SplitPoints{}, nil
	}
	avgRecSize := in.DataSize / in.RecCount
	if avgRecSize <= 0 {
		avgRecSize = 1
	}
	keyCount := maxBytes / (2 * avgRecSize)
	if maxObjects > 0 && maxObjects < keyCount {
		keyCount = maxObjects
	}

	// The first key is a sentinel (removed at the end): a split key is never the range's
	// first key, and a key equal to the previous split key is skipped (too frequent), so a
	// range of a single key value gets none. MongoDB reads the last key first to log that
	// case; here the scan itself notices it (distinct stays false).
	force := in.Force
	var (
		splitKeys                      []bsoncore.Document
		respSize, currCount, numChunks int64
		tooFrequent                    []bsoncore.Document
		distinct                       bool
	)
	for {
		stop := false
		err := scan(ctx, func(k bsoncore.Document) bool {
			if splitKeys == nil {
				splitKeys = []bsoncore.Document{k}
			} else if !distinct && bsonutil.CompareDocuments(k, splitKeys[0]) != 0 {
				distinct = true
			}
			currCount++
			if currCount > keyCount && !force {
				switch bsonutil.CompareDocuments(k, splitKeys[len(splitKeys)-1]) {
				case 0:
					if len(tooFrequent) == 0 || bsonutil.CompareDocuments(tooFrequent[len(tooFrequent)-1], k) != 0 {
						tooFrequent = append(tooFrequent, k)
					}
				default:
					add := int64(len(k)) + 2
					if respSize+add > maxUserBSONSize {
						stop = true
						return false
					}
					respSize += add
					splitKeys = append(splitKeys, k)
					currCount = 0
					numChunks++
				}
			}
			if in.MaxSplitPoints > 0 && numChunks >= in.MaxSplitPoints {
				stop = true
				return false
			}
			return true
		})
		if err != nil {
			return SplitPoints{}, err
		}
		if splitKeys == nil {
			return SplitPoints{}, mongoerr.New(mongoerr.OperationFailed, "can't open a cursor to scan the range (desired range is possibly empty)")
		}
		if !distinct {
			if in.Log != nil {
				in.Log.Warn("Possible low cardinality key detected in range. Range contains only a single key.",
					"namespace", in.NS, "key", bsonutil.FormatDoc(splitKeys[0]))
			}
			return SplitPoints{SingleKey: true}, nil
		}
		if !force || stop {
			break
		}
		// A forced split counted the keys in the first pass; the second splits at half.
		force = false
		keyCount = currCount / 2
		currCount = 0
	}
	if in.Log != nil {
		for _, k := range tooFrequent {
			in.Log.Warn("Possible low cardinality key detected", "namespace", in.NS, "key", bsonutil.FormatDoc(k))
		}
	}
	return SplitPoints{Keys: splitKeys[1:]}, nil
}

// ExtendRangeBound is KeyPattern::extendRangeBound: bound (a prefix of the index key
// pattern's fields) completed with MinKey for the remaining ascending fields (MaxKey for
// descending ones), flipped when upperInclusive.
func ExtendRangeBound(indexKey, bound bsoncore.Document, upperInclusive bool) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	n := 0
	if elems, err := bound.Elements(); err == nil {
		for _, e := range elems {
			b.AppendValue(e.Key(), e.Value())
		}
		n = len(elems)
	}
	pat, _ := indexKey.Elements()
	for i := n; i < len(pat); i++ {
		order := 1
		if f, ok := bsonutil.ToFloat64(pat[i].Value()); ok && f < 0 {
			order = -1
		}
		if upperInclusive {
			order = -order
		}
		if order > 0 {
			b.AppendMinKey(pat[i].Key())
		} else {
			b.AppendMaxKey(pat[i].Key())
		}
	}
	return b.Build()
}

// shardKeyIndex is findShardKeyPrefixedIndex without requireSingleKey: an index with the
// shard key as a prefix that is not sparse, partial or hidden and has the simple collation.
func shardKeyIndex(p *shardkey.Pattern, indexes []IndexSpec) (IndexSpec, bool) {
	for _, ix := range indexes {
		if ix.Sparse || ix.Partial || ix.Hidden || ix.Collation != nil || !isPrefixOf(p, ix.Key) {
			continue
		}
		return ix, true
	}
	return IndexSpec{}, false
}

// SplitVector runs splitVector on this node (local runs its commands): the collection's
// shard key index is scanned over [Min, Max) (the whole collection without bounds).
func SplitVector(ctx context.Context, local RunFunc, log *slog.Logger, r SplitVectorRequest) (SplitPoints, error) {
	p, err := shardkey.Parse(r.KeyPattern)
	if err != nil {
		return SplitPoints{}, err
	}
	db, coll, _ := strings.Cut(r.NS, ".")
	docs, err := cursorAll(ctx, local, db, coll, bsoncore.NewDocumentBuilder().AppendString("listIndexes", coll).Build())
	if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
		return SplitPoints{}, mongoerr.New(mongoerr.NamespaceNotFound, "ns not found")
	}
	if err != nil {
		return SplitPoints{}, err
	}
	specs := make([]IndexSpec, len(docs))
	for i, d := range docs {
		specs[i] = ParseIndexSpec(d)
	}
	ix, ok := shardKeyIndex(p, specs)
	if !ok {
		return SplitPoints{}, mongoerr.Newf(mongoerr.IndexNotFound, "couldn't find index over splitting key %s", bsonutil.FormatDoc(r.KeyPattern))
	}
	minKey := ExtendRangeBound(ix.Key, r.Min, false)
	maxKey := ExtendRangeBound(ix.Key, r.Max, r.Max == nil)
	stats, err := local(ctx, db, bsoncore.NewDocumentBuilder().AppendString("collStats", coll).Build())
	if err != nil {
		return SplitPoints{}, err
	}
	in := SplitPointsInput{Force: r.Force, MaxSplitPoints: r.MaxSplitPoints, MaxChunkObjects: r.MaxChunkObjects,
		MaxChunkSizeBytes: r.MaxChunkSizeBytes, Log: log, NS: r.NS}
	in.DataSize, _ = stats.Lookup("size").AsInt64OK()
	in.RecCount, _ = stats.Lookup("count").AsInt64OK()
	if in.DataSize == 0 {
		if f, ok := bsonutil.ToFloat64(stats.Lookup("size")); ok {
			in.DataSize = int64(f)
		}
	}
	scan := func(ctx context.Context, yield func(bsoncore.Document) bool) error {
		cmd := bsoncore.NewDocumentBuilder().AppendString("find", coll).
			AppendDocument("hint", ix.Key).AppendDocument("min", minKey).AppendDocument("max", maxKey).
			AppendBoolean("returnKey", true).AppendInt32("batchSize", 10000).Build()
		return scanCursor(ctx, local, db, coll, cmd, func(d bsoncore.Document) bool {
			return yield(shardKeyOfIndexKey(p, d))
		})
	}
	return SelectSplitPoints(ctx, in, scan)
}

// shardKeyOfIndexKey keeps the shard key fields of an index key (returnKey's document),
// in pattern order (orderShardKeyFields).
func shardKeyOfIndexKey(p *shardkey.Pattern, key bsoncore.Document) bsoncore.Document {
	vals := make([]bsoncore.Value, p.NumFields())
	elems, _ := key.Elements()
	for i := range vals {
		if i < len(elems) {
			vals[i] = elems[i].Value()
		} else {
			vals[i] = bsoncore.Value{Type: bsoncore.TypeNull}
		}
	}
	return p.KeyFromValues(vals...)
}

// scanCursor runs a cursor command and follows it, handing each document to yield (copied)
// until yield returns false; the cursor is killed when the scan stops early.
func scanCursor(ctx context.Context, run RunFunc, db, coll string, cmd bsoncore.Document, yield func(bsoncore.Document) bool) error {
	reply, err := run(ctx, db, cmd)
	for field := "firstBatch"; ; field = "nextBatch" {
		if err != nil {
			return err
		}
		id, _ := reply.Lookup("cursor", "id").AsInt64OK()
		batch, _ := reply.Lookup("cursor", field).ArrayOK()
		vals, _ := batch.Values()
		for _, v := range vals {
			d, _ := v.DocumentOK()
			if !yield(append(bsoncore.Document(nil), d...)) {
				if id != 0 {
					_, _ = run(ctx, db, bsoncore.NewDocumentBuilder().AppendString("killCursors", coll).
						AppendArray("cursors", bsoncore.NewArrayBuilder().AppendInt64(id).Build()).Build())
				}
				return nil
			}
		}
		if id == 0 {
			return nil
		}
		reply, err = run(ctx, db, bsoncore.NewDocumentBuilder().AppendInt64("getMore", id).AppendString("collection", coll).
			AppendInt32("batchSize", 10000).Build())
	}
}
