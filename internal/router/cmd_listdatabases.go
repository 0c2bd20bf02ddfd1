package router

// listDatabases through the router (MongoDB 7.0's cluster_list_databases_cmd): every shard
// is asked, and the config server for the config and admin databases (which live there; the
// shards' own copies are not the cluster's); sizes of a database held by several shards are
// summed, each entry tells the shards' sizes, and the filter applies to the merged entries.

import (
	"context"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/service"
)

type dbSizes struct {
	name   string
	size   int64
	empty  bool
	shards []shardSize
}

type shardSize struct {
	shard string
	size  int64
}

func runListDatabases(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	nameOnly := false
	if v := cmd.Lookup("nameOnly"); v.Type != 0 {
		b, ok := v.BooleanOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'listDatabases.nameOnly' is the wrong type '%s', expected type 'bool'",
				bsonutil.TypeName(v.Type))
		}
		nameOnly = b
	}
	var filter *query.Matcher
	if v := cmd.Lookup("filter"); v.Type != 0 && v.Type != bsoncore.TypeNull {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'listDatabases.filter' is the wrong type '%s', expected type 'object'",
				bsonutil.TypeName(v.Type))
		}
		if filter, err = query.Parse(d, query.ParseOptions{}); err != nil {
			return nil, err
		}
	}
	// A user without listDatabases on the cluster sees only the databases it holds a
	// privilege in (the shards answer the router's internal user with all of them).
	visible, err := service.ListDatabasesFilter(env.Auth, cmd)
	if err != nil {
		return nil, err
	}
	shards, err := c.allShards(ctx)
	if err != nil {
		return nil, err
	}
	shards = append(shards, configShard)
	idx, q := bsoncore.AppendDocumentStart(nil)
	q = bsoncore.AppendInt32Element(q, "listDatabases", 1)
	q, _ = bsoncore.AppendDocumentEnd(q, idx)
	replies := c.broadcast(ctx, "admin", shards, func(string) bsoncore.Document { return q })
	if err := firstError(replies); err != nil {
		return nil, err
	}
	merged := map[string]*dbSizes{}
	for _, sr := range replies {
		arr, _ := sr.reply.Lookup("databases").ArrayOK()
		vals, _ := arr.Values()
		for _, v := range vals {
			d, ok := v.DocumentOK()
			if !ok {
				continue
			}
			name, _ := d.Lookup("name").StringValueOK()
			internal := name == "admin" || name == "config"
			if name == "" || name == "local" || internal != (sr.shard == configShard) || !visible(name) {
				continue
			}
			e := merged[name]
			if e == nil {
				e = &dbSizes{name: name, empty: true}
				merged[name] = e
			}
			size := replyInt(d, "sizeOnDisk")
			e.size += size
			if emp, ok := d.Lookup("empty").BooleanOK(); !ok || !emp {
				e.empty = false
			}
			e.shards = append(e.shards, shardSize{shard: sr.shard, size: size})
		}
	}
	names := make([]string, 0, len(merged))
	for n := range merged {
		names = append(names, n)
	}
	slices.Sort(names)
	var total int64
	idx, out := bsoncore.AppendDocumentStart(nil)
	aidx, out := bsoncore.AppendArrayElementStart(out, "databases")
	k := 0
	for _, n := range names {
		e := merged[n]
		didx, entry := bsoncore.AppendDocumentStart(nil)
		entry = bsoncore.AppendStringElement(entry, "name", n)
		if !nameOnly {
			entry = bsoncore.AppendInt64Element(entry, "sizeOnDisk", e.size)
			entry = bsoncore.AppendBooleanElement(entry, "empty", e.empty)
			sidx, s := bsoncore.AppendDocumentElementStart(entry, "shards")
			for _, ss := range e.shards {
				s = bsoncore.AppendInt64Element(s, ss.shard, ss.size)
			}
			entry, _ = bsoncore.AppendDocumentEnd(s, sidx)
		}
		entry, _ = bsoncore.AppendDocumentEnd(entry, didx)
		if filter != nil {
			if ok, err := filter.Matches(entry); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
		}
		total += e.size
		out = bsoncore.AppendDocumentElement(out, itoa(k), entry)
		k++
	}
	out, _ = bsoncore.AppendArrayEnd(out, aidx)
	if !nameOnly {
		out = bsoncore.AppendInt64Element(out, "totalSize", total)
		out = bsoncore.AppendInt64Element(out, "totalSizeMb", total/(1<<20))
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out, nil
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
