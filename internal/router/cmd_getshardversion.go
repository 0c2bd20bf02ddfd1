package router

import (
	"context"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func getShardVersionCommand() *service.Command {
	return &service.Command{Name: "getShardVersion", Auth: service.AuthOnFullNS(auth.GetShardVersion), Aliases: []string{"getshardversion"}, Handler: runGetShardVersion,
		AdminOnly: true, Secondary: service.SecondaryAlways,
		Help: " example: { getShardVersion : 'alleyinsider.foo'  } "}
}

// maxUserSize is BSONObjMaxUserSize.
const maxUserSize = 16 * 1024 * 1024

// runGetShardVersion is mongos's getShardVersion from the router's catalog cache (refreshed
// first): for a database {primaryShard, version}; for a sharded collection
// {version: Timestamp(major, minor), versionEpoch, versionTimestamp} and, with fullMetadata,
// chunks: [[min, max], ...] (or exceededSize: true when they would not fit a reply).
func runGetShardVersion(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	v := lookupFirst(cmd)
	ns, ok := v.StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.BadValue, "namespace has invalid type %s", strings.ToLower(v.Type.String()))
	}
	db, coll, _ := strings.Cut(ns, ".")
	if coll == "" {
		c.Cache.OnStaleDatabaseVersion(db, nil)
		d, err := c.Cache.Database(ctx, db)
		if err != nil {
			return nil, err
		}
		return bsoncore.NewDocumentBuilder().AppendString("primaryShard", d.Primary).
			AppendDocument("version", d.Version.Doc()).Build(), nil
	}
	c.Cache.OnStaleShardVersion(ns, nil) // refreshed first, incrementally
	r, err := c.Cache.Routing(ctx, ns)
	if err != nil {
		return nil, err
	}
	if !r.Sharded() {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotSharded, "Collection %s is not sharded.", ns)
	}
	ver := r.Table.Version()
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = bsoncore.AppendTimestampElement(b, "version", ver.Major, ver.Minor)
	b = bsoncore.AppendObjectIDElement(b, "versionEpoch", ver.Epoch)
	b = bsoncore.AppendTimestampElement(b, "versionTimestamp", ver.Timestamp.T, ver.Timestamp.I)
	if v, err := cmd.LookupErr("fullMetadata"); err == nil && service.Truthy(v) {
		aidx, arr := bsoncore.AppendArrayElementStart(nil, "chunks")
		exceeded := false
		for i, ch := range r.Table.Chunks() {
			pidx, pair := bsoncore.AppendArrayElementStart(arr, strconv.Itoa(i))
			pair = bsoncore.AppendDocumentElement(pair, "0", ch.Min)
			pair = bsoncore.AppendDocumentElement(pair, "1", ch.Max)
			arr, _ = bsoncore.AppendArrayEnd(pair, pidx)
			if len(arr)+len(b) > maxUserSize-64 {
				exceeded = true
				break
			}
		}
		if exceeded {
			b = bsoncore.AppendBooleanElement(b, "exceededSize", true)
		} else {
			arr, _ = bsoncore.AppendArrayEnd(arr, aidx)
			b = append(b, arr...)
		}
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}
