package router

// Targeting one write statement (spec: sharding.md "Routing"; MongoDB's ChunkManagerTargeter
// targetInsert/targetUpdate/targetDelete). Unsharded collections go to their database's
// primary shard. For a sharded collection:
//
//   - an insert goes to the owner of its document's shard key (missing fields are null, as
//     MongoDB stores them);
//   - an upsert must name the whole shard key by equality in its query ("Failed to target
//     upsert by query");
//   - an update goes to the shards its query can match; when that is several, a replacement
//     is targeted by the replacement document's shard key, a multi update is broadcast to
//     them, and a single op-style update needs an _id equality (then it is broadcast, _id
//     being unique per shard key), other single updates run in two phases
//     (write_twophase.go);
//   - a delete with the whole shard key goes to its owner, a multi delete to the shards its
//     query can match, a single delete by _id is broadcast, other single deletes run in two
//     phases.

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/routing"
)

// targetStmt returns the shards statement i goes to, sorted, and whether it is a single
// update or delete without shard key that runs in two phases (write_twophase.go) over them.
func (b *writeBatch) targetStmt(r *catalogcache.Routing, i int) ([]string, bool, error) {
	if !r.Sharded() {
		return []string{r.DB.Primary}, false, nil
	}
	rt := r.Table
	stmt := b.stmts[i]
	switch b.kind {
	case kindInsert:
		s, err := rt.ShardForDoc(stmt)
		if err != nil {
			return nil, false, err
		}
		return []string{s}, false, nil
	case kindUpdate:
		return targetUpdate(rt, stmt, b.retry)
	default:
		return targetDelete(rt, stmt)
	}
}

// collatedOf reports whether a statement's collation is not the simple one.
func collatedOf(stmt bsoncore.Document) bool {
	c, ok := stmt.Lookup("collation").DocumentOK()
	if !ok {
		return false
	}
	loc, _ := c.Lookup("locale").StringValueOK()
	return loc != "simple"
}

// exactShardKey returns the shard key a filter pins by equality on every shard key field
// (MongoDB's extractShardKeyFromQuery), or nil.
func exactShardKey(rt *routing.RoutingTable, filter bsoncore.Document, collated bool) bsoncore.Document {
	key, ok := rt.Pattern().KeyFromEqualities(filter, collated)
	if !ok {
		return nil
	}
	return key
}

// isExactIDQuery reports whether filter has an equality on _id with a value an _id index
// lookup finds exactly (not a regex, array or operator document other than $eq), and the
// statement has the simple collation (MongoDB's isExactIdQuery).
func isExactIDQuery(filter bsoncore.Document, collated bool) bool {
	if collated {
		return false
	}
	v, err := filter.LookupErr("_id")
	if err != nil {
		return false
	}
	if d, ok := v.DocumentOK(); ok {
		e, err := d.IndexErr(0)
		if err != nil {
			return true // {_id: {}} is an equality to an empty document
		}
		if len(e.Key()) > 0 && e.Key()[0] == '$' {
			if e.Key() != "$eq" {
				return false
			}
			if n, _ := d.Elements(); len(n) != 1 {
				return false
			}
			v = e.Value()
		}
	}
	switch v.Type {
	case bsoncore.TypeArray, bsoncore.TypeRegex, bsoncore.TypeUndefined:
		return false
	}
	return true
}

// stmtDoc returns a statement's document field, TypeMismatch when it is of another type.
func stmtDoc(cmdName, field string, stmt bsoncore.Document, required bool) (bsoncore.Document, error) {
	v := stmt.Lookup(field)
	if v.Type == 0 {
		if required {
			return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.%s' is missing but a required field", cmdName, field)
		}
		return nil, nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'object'",
			cmdName, field, bsonutil.TypeName(v.Type))
	}
	return d, nil
}

// stmtBool reads an optional boolean statement field (numbers are accepted as MongoDB's
// "safe bool").
func stmtBool(stmt bsoncore.Document, field string) bool {
	v := stmt.Lookup(field)
	switch v.Type {
	case bsoncore.TypeBoolean:
		return v.Boolean()
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble:
		return replyInt(stmt, field) != 0 || (v.Type == bsoncore.TypeDouble && v.Double() != 0)
	}
	return false
}

func targetUpdate(rt *routing.RoutingTable, stmt bsoncore.Document, retryable bool) ([]string, bool, error) {
	q, err := stmtDoc("update.updates", "q", stmt, true)
	if err != nil {
		return nil, false, err
	}
	collated := collatedOf(stmt)
	u := stmt.Lookup("u")
	replacement, isDoc := u.DocumentOK()
	if isDoc {
		if e, err := replacement.IndexErr(0); err == nil && len(e.Key()) > 0 && e.Key()[0] == '$' {
			isDoc = false // an operator-style update
		}
	}
	if stmtBool(stmt, "upsert") {
		key := exactShardKey(rt, q, collated)
		if key == nil {
			return nil, false, mongoerr.New(mongoerr.ShardKeyNotFound, "Failed to target upsert by query :: could not extract exact shard key")
		}
		s, err := rt.ShardForKey(key)
		if err != nil {
			return nil, false, err
		}
		if err := checkShardKeyUpdate(rt, stmt, q, s, retryable); err != nil {
			return nil, false, err
		}
		return []string{s}, false, nil
	}
	if key := exactShardKey(rt, q, collated); key != nil && !stmtBool(stmt, "multi") {
		s, err := rt.ShardForKey(key)
		if err != nil {
			return nil, false, err
		}
		if err := checkShardKeyUpdate(rt, stmt, q, s, retryable); err != nil {
			return nil, false, err
		}
		return []string{s}, false, nil
	}
	shards, err := rt.ShardsForQuery(q, collated)
	if err != nil {
		return nil, false, err
	}
	if len(shards) == 1 {
		return shards, false, nil
	}
	if isDoc {
		s, err := rt.ShardForDoc(replacement)
		if err != nil {
			return nil, false, mongoerr.Newf(mongoerr.CodeOf(err), "Failed to target update by replacement document :: %s", errMsg(err))
		}
		return []string{s}, false, nil
	}
	// A single update matching on several shards: broadcast by exact _id, else in two
	// phases (MongoDB 7.0's updateOne without shard key).
	return shards, !stmtBool(stmt, "multi") && !isExactIDQuery(q, collated), nil
}

func targetDelete(rt *routing.RoutingTable, stmt bsoncore.Document) ([]string, bool, error) {
	q, err := stmtDoc("delete.deletes", "q", stmt, true)
	if err != nil {
		return nil, false, err
	}
	collated := collatedOf(stmt)
	if key := exactShardKey(rt, q, collated); key != nil {
		s, err := rt.ShardForKey(key)
		if err == nil {
			return []string{s}, false, nil
		}
	}
	shards, err := rt.ShardsForQuery(q, collated)
	if err != nil {
		return nil, false, err
	}
	return shards, len(shards) > 1 && replyInt(stmt, "limit") == 1 && !isExactIDQuery(q, collated), nil
}

func errMsg(err error) string {
	if me, ok := mongoerr.As(err); ok {
		return me.Msg
	}
	return err.Error()
}
