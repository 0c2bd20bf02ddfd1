package router

// Updates that change a document's shard key (MongoDB 7.0: the shard's update stage checks
// whether the new key still belongs to it; if not, outside a retryable write or transaction
// it fails with IllegalOperation, inside one it throws WouldChangeOwningShard and the router
// deletes and re-inserts the document in a distributed transaction). Until the shards check
// ownership of updated keys (shardrt) and the router runs transactions, the router checks
// what it can see itself: a single update targeted by its query's exact shard key whose
// replacement document or $set gives the new shard key values literally. When that key
// belongs to another shard the update is refused: with MongoDB's IllegalOperation outside a
// retryable write, and with IllegalOperation saying the move is not supported inside one.
// Updates whose new key the router cannot compute ($inc, $unset, $rename, pipelines on
// shard key fields, $set of a parent of a shard key field) pass through unchecked.

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

// checkShardKeyUpdate returns the error for a single update of the document whose shard key
// the query pins (on shard from) when it visibly moves the document to another shard.
func checkShardKeyUpdate(rt *routing.RoutingTable, stmt, q bsoncore.Document, from string, retryable bool) error {
	newKey := newShardKey(rt.Pattern(), q, stmt.Lookup("u"))
	if newKey == nil {
		return nil
	}
	to, err := rt.ShardForKey(newKey)
	if err != nil || to == from {
		return nil
	}
	if !retryable {
		return mongoerr.New(mongoerr.IllegalOperation,
			"Must run update to shard key field in a multi-statement transaction or with retryWrites: true.")
	}
	return mongoerr.Newf(mongoerr.IllegalOperation,
		"this update changes the document's shard key so that it moves from shard %s to shard %s, which needs a distributed transaction that humongos does not run yet", from, to)
}

// newShardKey computes the shard key an update gives the document the query q pins, or nil
// when the router cannot tell.
func newShardKey(p *shardkey.Pattern, q bsoncore.Document, u bsoncore.Value) bsoncore.Document {
	upd, ok := u.DocumentOK()
	if !ok {
		return nil // a pipeline
	}
	first, err := upd.IndexErr(0)
	if err != nil {
		return nil
	}
	if !strings.HasPrefix(first.Key(), "$") {
		// A replacement: its own fields are the new key (missing ones null), except _id,
		// which a replacement keeps from the document when it has none.
		if p.HasID() {
			if _, err := upd.LookupErr("_id"); err != nil {
				return nil
			}
		}
		key, err := p.ExtractKey(upd)
		if err != nil {
			return nil
		}
		return key
	}
	vals := make([]bsoncore.Value, p.NumFields())
	changed := false
	for i, f := range p.Fields() {
		v, how := fieldAfterUpdate(upd, f)
		switch how {
		case fieldUnknown:
			return nil
		case fieldSet:
			changed = true
		case fieldUnchanged:
			if v = equalityValue(q, f); v.Type == 0 {
				return nil
			}
		}
		if v.Type == bsoncore.TypeArray {
			return nil
		}
		if i == p.HashedField() {
			if v, err = shardkey.HashValue(v); err != nil {
				return nil
			}
		}
		vals[i] = v
	}
	if !changed {
		return nil
	}
	return p.KeyFromValues(vals...)
}

type fieldChange int

const (
	fieldUnchanged fieldChange = iota
	fieldSet
	fieldUnknown
)

// fieldAfterUpdate says how an operator update changes field f: set to a literal by $set,
// untouched, or changed in a way the router does not compute.
func fieldAfterUpdate(upd bsoncore.Document, f string) (bsoncore.Value, fieldChange) {
	ops, _ := upd.Elements()
	var out bsoncore.Value
	how := fieldUnchanged
	for _, op := range ops {
		args, ok := op.Value().DocumentOK()
		if !ok {
			return bsoncore.Value{}, fieldUnknown
		}
		fields, _ := args.Elements()
		for _, e := range fields {
			k := e.Key()
			if op.Key() == "$rename" {
				if to, ok := e.Value().StringValueOK(); ok && overlaps(to, f) {
					return bsoncore.Value{}, fieldUnknown
				}
			}
			if !overlaps(k, f) {
				continue
			}
			if op.Key() == "$set" && k == f {
				out, how = e.Value(), fieldSet
				continue
			}
			if op.Key() == "$setOnInsert" {
				continue // only applies when an upsert inserts
			}
			return bsoncore.Value{}, fieldUnknown
		}
	}
	return out, how
}

// overlaps reports whether paths a and b are equal or one is a prefix of the other.
func overlaps(a, b string) bool {
	if a == b {
		return true
	}
	return strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".")
}

// equalityValue is the value q pins field f to ({f: v} or {f: {$eq: v}}), or the zero Value.
func equalityValue(q bsoncore.Document, f string) bsoncore.Value {
	v, err := q.LookupErr(f)
	if err != nil {
		return bsoncore.Value{}
	}
	if d, ok := v.DocumentOK(); ok {
		e, err := d.IndexErr(0)
		if err == nil && strings.HasPrefix(e.Key(), "$") {
			if e.Key() != "$eq" {
				return bsoncore.Value{}
			}
			return e.Value()
		}
	}
	if v.Type == bsoncore.TypeRegex {
		return bsoncore.Value{}
	}
	return v
}
