package agg

// The foreign side of $lookup and $graphLookup (issue 10): how the documents whose joined
// field equals one of a set of values are found, without holding a large foreign collection
// in memory.
//
// The first probe of a Run decides the strategy. Through a Querier (the command layer's
// resolver) it runs the probe as a query; when the planner answers with an index scan, later
// probes are such queries too (an indexed nested-loop join, MongoDB's plan when foreignField
// is indexed) until there have been so many that a foreign collection small next to them is
// cheaper hashed (then the hash join below takes over). Otherwise the foreign collection is read once into a hash table
// keyed by the KeyStrings of the joined field, as long as it fits in LookupCacheBytes (a hash
// join); a larger one is scanned again, streamed, for each probe (a nested-loop join), so
// memory stays bounded whatever the foreign collection's size.

import (
	"context"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/keystring"
	"humongo/internal/query"
	"humongo/internal/query/expr"
)

const defaultStageMemoryBytes = 100 << 20

func (rc *runCtx) lookupCacheBytes() int64 {
	if rc.ac.LookupCacheBytes > 0 {
		return rc.ac.LookupCacheBytes
	}
	return defaultStageMemoryBytes
}

func (rc *runCtx) lookupMaxResultBytes() int64 {
	if rc.ac.LookupMaxResultBytes > 0 {
		return rc.ac.LookupMaxResultBytes
	}
	return defaultStageMemoryBytes
}

func (rc *runCtx) graphLookupMaxMemoryBytes() int64 {
	if rc.ac.GraphLookupMaxMemoryBytes > 0 {
		return rc.ac.GraphLookupMaxMemoryBytes
	}
	return defaultStageMemoryBytes
}

// joinMode is a foreignSide's strategy, chosen at its first probe.
type joinMode int

const (
	modeUndecided joinMode = iota
	modeIndexed            // one planner query per probe, served by an index
	modeCached             // the foreign collection hashed in memory
	modeScan               // one streamed scan of the foreign collection per probe
)

// foreignSide finds the foreign documents of one join stage in one Run.
type foreignSide struct {
	rc       *runCtx
	db, coll string // coll "" reads nothing
	// path is the joined field (foreignField, connectToField); nil for $lookup's pipeline
	// form without localField, whose probes return the whole collection.
	path []string
	// restrict and restrictDoc are $graphLookup's restrictSearchWithMatch (nil: none).
	restrict    *query.Matcher
	restrictDoc bsoncore.Document
	// skipMissing: a foreign document without the field never matches ($graphLookup: a
	// null in the frontier matches only explicit nulls). $lookup matches missing as null.
	skipMissing bool

	mode  joinMode
	index string // the index of modeIndexed
	// probes counts modeIndexed's queries; at nextLoad of them the collection is read into
	// the hash table if it has at most loadPerProbe documents per probe made so far.
	probes, nextLoad int64
	fi               *foreignIndex
	all              []bsoncore.Document // modeCached without path: the whole collection
}

// IndexName is the index the probes use ("" unless they are planner queries served by one).
func (fs *foreignSide) IndexName() string { return fs.index }

// probe streams the foreign documents whose joined field equals one of vals (missing values
// as null), each once.
func (fs *foreignSide) probe(ctx context.Context, vals []value) (Source, error) {
	if fs.coll == "" {
		return sliceSource(nil), nil
	}
	keys, uniq := fs.keysOf(vals)
	if fs.path != nil && len(uniq) == 0 {
		return sliceSource(nil), nil
	}
	if fs.mode == modeUndecided {
		if q, ok := fs.rc.ac.Resolver.(Querier); ok && fs.path != nil {
			src, index, err := q.Query(ctx, fs.db, fs.coll, fs.filter(uniq))
			if err != nil {
				return nil, err
			}
			if index != "" {
				fs.mode, fs.index, fs.probes, fs.nextLoad = modeIndexed, index, 1, firstLoadProbes
				return src, nil
			}
			src.Close()
		}
		cached, err := fs.load(ctx, -1)
		if err != nil {
			return nil, err
		}
		fs.mode = modeScan
		if cached {
			fs.mode = modeCached
		}
	}
	if fs.mode == modeIndexed && fs.probes >= fs.nextLoad {
		// Many probes: a foreign collection small next to the work done so far is cheaper
		// hashed. Each attempt reads at most as many documents as the probes made (times
		// loadPerProbe) and the next comes after twice the probes, so failed attempts cost
		// a bounded fraction of the join.
		fs.nextLoad *= 2
		cached, err := fs.load(ctx, fs.probes*loadPerProbe)
		if err != nil {
			return nil, err
		}
		if cached {
			fs.mode = modeCached
		}
	}
	switch fs.mode {
	case modeIndexed:
		fs.probes++
		src, _, err := fs.rc.ac.Resolver.(Querier).Query(ctx, fs.db, fs.coll, fs.filter(uniq))
		return src, err
	case modeCached:
		if fs.path == nil {
			return sliceSource(fs.all), nil
		}
		if len(keys) == 1 {
			// One key: its positions are already ascending and distinct.
			for k := range keys {
				pos := fs.fi.byKey[k]
				docs := make([]bsoncore.Document, len(pos))
				for j, i := range pos {
					docs[j] = fs.fi.docs[i]
				}
				return sliceSource(docs), nil
			}
		}
		var idx []int
		seen := map[int]bool{}
		for k := range keys {
			for _, i := range fs.fi.byKey[k] {
				if !seen[i] {
					seen[i] = true
					idx = append(idx, i)
				}
			}
		}
		slices.Sort(idx)
		docs := make([]bsoncore.Document, len(idx))
		for j, i := range idx {
			docs[j] = fs.fi.docs[i]
		}
		return sliceSource(docs), nil
	}
	// modeScan: stream the collection, keeping what matches.
	src, err := fs.rc.open(ctx, fs.db, fs.coll)
	if err != nil {
		return nil, err
	}
	if fs.path == nil {
		return src, nil
	}
	var kb keystring.Builder
	return &funcSrc{closeFn: src.Close, next: func(ctx context.Context) (bsoncore.Document, bool, error) {
		for {
			if err := ctx.Err(); err != nil {
				return nil, false, context.Cause(ctx)
			}
			d, ok, err := src.Next(ctx)
			if !ok || err != nil {
				return nil, false, err
			}
			if !fs.keep(d) {
				continue
			}
			for _, v := range fs.foreignValues(d) {
				if keys[fs.fiKey(&kb, v)] {
					return d, true, nil
				}
			}
		}
	}}, nil
}

// keysOf dedupes vals by KeyString (missing as null; under fs's skipMissing, missing values
// are dropped).
func (fs *foreignSide) keysOf(vals []value) (map[string]bool, []value) {
	keys := make(map[string]bool, len(vals))
	var uniq []value
	var kb keystring.Builder
	for _, v := range vals {
		if v.Type == 0 {
			if fs.skipMissing {
				continue
			}
			v = expr.Null
		}
		k := fs.fiKey(&kb, v)
		if !keys[k] {
			keys[k] = true
			uniq = append(uniq, v)
		}
	}
	return keys, uniq
}

func (fs *foreignSide) fiKey(kb *keystring.Builder, v value) string {
	kb.Reset(keystring.AllAscending)
	if v.Type == 0 {
		v = expr.Null
	}
	kb.AppendValue(expr.CollKey(fs.rc.coll, v))
	return string(kb.Bytes())
}

func (fs *foreignSide) keep(d bsoncore.Document) bool {
	if fs.restrict == nil {
		return true
	}
	m, err := fs.restrict.Matches(d)
	return err == nil && m
}

// foreignValues are the values of d's joined field an equality query matches: each value
// reached, an array's elements and the array itself; missing as null unless skipMissing.
func (fs *foreignSide) foreignValues(d bsoncore.Document) []value {
	var out []value
	walkPath(d, fs.path, func(v value) {
		if v.Type == bsoncore.TypeArray {
			vals, _ := expr.ArrayValues(v)
			out = append(out, vals...)
		}
		out = append(out, v)
	})
	if fs.skipMissing {
		kept := out[:0]
		for _, v := range out {
			if v.Type != 0 {
				kept = append(kept, v)
			}
		}
		out = kept
	}
	return out
}

// filter is the find filter of a probe for vals: {path: {$in: vals}}, regular expressions
// compared as values ({$eq: re}: in $in they would match as patterns), with
// restrictSearchWithMatch and, where a null could match a missing field that must not, an
// $exists.
func (fs *foreignSide) filter(vals []value) bsoncore.Document {
	field := strings.Join(fs.path, ".")
	var plain, regexes []value
	hasNull := false
	for _, v := range vals {
		switch v.Type {
		case bsoncore.TypeRegex:
			regexes = append(regexes, v)
		case bsoncore.TypeNull, bsoncore.TypeUndefined:
			// A query may not compare with undefined; null matches it too.
			hasNull = true
			plain = append(plain, expr.Null)
		default:
			plain = append(plain, v)
		}
	}
	var clauses []value
	if len(plain) > 0 {
		clauses = append(clauses, expr.Doc(expr.DocOf(field, expr.Doc(expr.DocOf("$in", expr.Array(plain))))))
	}
	for _, re := range regexes {
		clauses = append(clauses, expr.Doc(expr.DocOf(field, expr.Doc(expr.DocOf("$eq", re)))))
	}
	cond := expr.DocOf("$or", expr.Array(clauses))
	if len(clauses) == 1 {
		cond = clauses[0].Document()
	}
	var parts []value
	if fs.restrictDoc != nil {
		parts = append(parts, expr.Doc(fs.restrictDoc))
	}
	parts = append(parts, expr.Doc(cond))
	if fs.skipMissing && hasNull {
		parts = append(parts, expr.Doc(expr.DocOf(field, expr.Doc(expr.DocOf("$exists", expr.Bool(true))))))
	}
	if len(parts) == 1 {
		return parts[0].Document()
	}
	return expr.DocOf("$and", expr.Array(parts))
}

// Switching an indexed join to a hash join (foreignSide.probe).
const (
	firstLoadProbes = 1000
	// loadPerProbe is about what one indexed probe costs in sequentially read documents.
	loadPerProbe = 16
)

// load reads the foreign collection into memory (hashed by the joined field when there is
// one), unless it needs more than LookupCacheBytes or has more than maxDocs documents
// (maxDocs < 0: any number): then it reports false and keeps nothing.
func (fs *foreignSide) load(ctx context.Context, maxDocs int64) (bool, error) {
	src, err := fs.rc.open(ctx, fs.db, fs.coll)
	if err != nil {
		return false, err
	}
	defer src.Close()
	limit := fs.rc.lookupCacheBytes()
	var mem int64
	fi := &foreignIndex{coll: fs.rc.coll, byKey: map[string][]int{}}
	for {
		if err := ctx.Err(); err != nil {
			return false, context.Cause(ctx)
		}
		d, ok, err := src.Next(ctx)
		if err != nil {
			return false, err
		}
		if !ok {
			break
		}
		if maxDocs--; maxDocs == -1 {
			return false, nil
		}
		if !fs.keep(d) {
			continue
		}
		i := len(fi.docs)
		fi.docs = append(fi.docs, d)
		mem += int64(len(d)) + 24
		if fs.path != nil {
			seen := map[string]bool{}
			for _, v := range fs.foreignValues(d) {
				k := fi.key(v)
				if !seen[k] {
					seen[k] = true
					fi.byKey[k] = append(fi.byKey[k], i)
					mem += int64(len(k)) + 48
				}
			}
		}
		if mem > limit {
			return false, nil
		}
	}
	if fs.path == nil {
		fs.all = fi.docs
	} else {
		fs.fi = fi
	}
	return true, nil
}
