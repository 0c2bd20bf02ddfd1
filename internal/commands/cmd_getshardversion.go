package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addGetShardVersion(r *service.Registry) {
	add(r, &service.Command{
		Name:      "getShardVersion",
		Auth:      service.AuthOnFullNS(auth.GetShardVersion),
		Handler:   runGetShardVersion,
		Help:      " example: { getShardVersion : 'alleyinsider.foo'  } ",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

// runGetShardVersion is mongod's getShardVersion (7.0 get_shard_version_command.cpp): the
// config server connection string and this shard's known filtering metadata for the
// namespace, without refreshing it: global is the shard's placement version as a Timestamp
// (major, minor), or "UNKNOWN"; fullMetadata adds the collection and shard versions, the key
// pattern and the [min, max] pairs of the chunks this shard owns ({} when unsharded or
// unknown).
func runGetShardVersion(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	arg := commandArg(cmd)
	ns, ok := arg.StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.BadValue, "collection name has invalid type %s", bsonutil.TypeName(arg.Type))
	}
	if err := catalog.ValidateNS(ns); err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	rt, id, err := shardRuntime(env)
	if err != nil {
		return nil, err
	}
	full := truthy(lookup(cmd, "fullMetadata"))
	b := bsoncore.NewDocumentBuilder().AppendString("configServer", id.ConfigsvrConnectionString)
	m, known := rt.Collection(ns)
	if !known {
		b.AppendString("global", "UNKNOWN")
		if full {
			b.AppendDocument("metadata", bsoncore.NewDocumentBuilder().Build())
		}
		return b.Build(), nil
	}
	sv := m.ShardVersion()
	b.AppendTimestamp("global", sv.Major, sv.Minor)
	if full {
		md := bsoncore.NewDocumentBuilder()
		if m.Sharded() {
			cv := m.Table.Version()
			md.AppendTimestamp("collVersion", cv.Major, cv.Minor).
				AppendObjectID("collVersionEpoch", cv.Epoch).
				AppendTimestamp("collVersionTimestamp", cv.Timestamp.T, cv.Timestamp.I).
				AppendTimestamp("shardVersion", sv.Major, sv.Minor).
				AppendObjectID("shardVersionEpoch", sv.Epoch).
				AppendTimestamp("shardVersionTimestamp", sv.Timestamp.T, sv.Timestamp.I).
				AppendDocument("keyPattern", m.Table.Pattern().Doc())
			chunks := bsoncore.NewArrayBuilder()
			for _, c := range m.Table.Chunks() {
				if c.Shard == id.ShardName {
					chunks.AppendArray(bsoncore.NewArrayBuilder().AppendDocument(c.Min).AppendDocument(c.Max).Build())
				}
			}
			md.AppendArray("chunks", chunks.Build())
		}
		b.AppendDocument("metadata", md.Build())
	}
	return b.Build(), nil
}
