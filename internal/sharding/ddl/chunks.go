package ddl

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
)

// SplitRequest is splitChunk's content ({splitChunk: ns, from, keyPattern, epoch,
// timestamp, min, max, splitKeys}).
type SplitRequest struct {
	NS          string
	From        string
	KeyPattern  bsoncore.Document
	Gen         routing.Generation
	Min, Max    bsoncore.Document
	SplitKeys   []bsoncore.Document
	HasGenTimes bool
}

// SplitChunkCommand builds the splitChunk command a router sends to the chunk's owner.
func SplitChunkCommand(r SplitRequest) bsoncore.Document {
	keys := bsoncore.NewArrayBuilder()
	for _, k := range r.SplitKeys {
		keys.AppendDocument(k)
	}
	return bsoncore.NewDocumentBuilder().AppendString("splitChunk", r.NS).AppendString("from", r.From).
		AppendDocument("keyPattern", r.KeyPattern).AppendObjectID("epoch", r.Gen.Epoch).
		AppendTimestamp("timestamp", r.Gen.Timestamp.T, r.Gen.Timestamp.I).
		AppendDocument("min", r.Min).AppendDocument("max", r.Max).AppendArray("splitKeys", keys.Build()).Build()
}

func missingField(cmd, field string) error {
	return mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.%s' is missing but a required field", cmd, field)
}

func wrongType(cmd, field string, t bsoncore.Type, want string) error {
	return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type '%s'",
		cmd, field, typeName(t), want)
}

// ParseSplitChunk reads a splitChunk command.
func ParseSplitChunk(cmd bsoncore.Document) (SplitRequest, error) {
	const name = "splitChunk"
	var r SplitRequest
	ns, ok := cmd.Index(0).Value().StringValueOK()
	if !ok || !strings.Contains(ns, ".") {
		return r, mongoerr.New(mongoerr.InvalidNamespace, "invalid namespace specified for request")
	}
	r.NS = ns
	doc := func(field string) (bsoncore.Document, error) {
		v, err := cmd.LookupErr(field)
		if err != nil {
			return nil, missingField(name, field)
		}
		d, ok := v.DocumentOK()
		if !ok {
			return nil, wrongType(name, field, v.Type, "object")
		}
		return d, nil
	}
	var err error
	if r.KeyPattern, err = doc("keyPattern"); err != nil {
		return r, err
	}
	if r.Min, err = doc("min"); err != nil {
		return r, err
	}
	if r.Max, err = doc("max"); err != nil {
		return r, err
	}
	from, err := cmd.LookupErr("from")
	if err != nil {
		return r, missingField(name, "from")
	}
	if r.From, ok = from.StringValueOK(); !ok {
		return r, wrongType(name, "from", from.Type, "string")
	}
	ep, err := cmd.LookupErr("epoch")
	if err != nil {
		return r, missingField(name, "epoch")
	}
	if r.Gen.Epoch, ok = ep.ObjectIDOK(); !ok {
		return r, wrongType(name, "epoch", ep.Type, "objectId")
	}
	if t, i, ok := cmd.Lookup("timestamp").TimestampOK(); ok {
		r.Gen.Timestamp = bson.Timestamp{T: t, I: i}
		r.HasGenTimes = true
	}
	sk, err := cmd.LookupErr("splitKeys")
	if err != nil {
		return r, missingField(name, "splitKeys")
	}
	arr, ok := sk.ArrayOK()
	if !ok {
		return r, wrongType(name, "splitKeys", sk.Type, "array")
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return r, wrongType(name, "splitKeys", v.Type, "object")
		}
		r.SplitKeys = append(r.SplitKeys, d)
	}
	if len(r.SplitKeys) == 0 {
		return r, mongoerr.New(mongoerr.InvalidOptions, "need to provide the split points to chunk over")
	}
	return r, nil
}

// SplitChunk is the shard's splitChunk: it asks the config server to commit the split
// (_configsvrCommitChunkSplit, majority) and returns the config server's reply. The check
// against the shard's own filtering metadata is the versioning runtime's (not here): the
// config server checks the chunk against the authoritative catalog in any case.
func SplitChunk(ctx context.Context, remote *Remote, self string, r SplitRequest) (bsoncore.Document, error) {
	if r.From != self {
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "splitChunk for shard %s was sent to shard %s", r.From, self)
	}
	if !r.HasGenTimes {
		coll, _, sharded, err := remote.Catalog.Collection(ctx, r.NS, nil)
		if err != nil {
			return nil, err
		}
		if !sharded {
			return nil, mongoerr.Newf(mongoerr.NamespaceNotSharded, "Collection %s is not sharded.", r.NS)
		}
		r.Gen.Timestamp = coll.Gen.Timestamp
	}
	pts := bsoncore.NewArrayBuilder()
	for _, k := range r.SplitKeys {
		pts.AppendDocument(k)
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("_configsvrCommitChunkSplit", r.NS).
		AppendObjectID("collEpoch", r.Gen.Epoch).AppendTimestamp("collTimestamp", r.Gen.Timestamp.T, r.Gen.Timestamp.I).
		AppendDocument("min", r.Min).AppendDocument("max", r.Max).AppendArray("splitPoints", pts.Build()).
		AppendString("shard", self).AppendDocument("writeConcern", majority()).Build()
	return Run(ctx, remote.Config(), "admin", cmd)
}

// ParseBounds reads a [min, max] array of two documents (mergeChunks' bounds).
func ParseBounds(cmdName string, v bsoncore.Value) (min, max bsoncore.Document, err error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.bounds' is the wrong type '%s', expected type 'array'", cmdName, typeName(v.Type))
	}
	vals, _ := arr.Values()
	if len(vals) != 2 {
		return nil, nil, mongoerr.Newf(mongoerr.BadValue, "need exactly two elements in bounds, found %d", len(vals))
	}
	min, ok1 := vals[0].DocumentOK()
	max, ok2 := vals[1].DocumentOK()
	if !ok1 || !ok2 {
		return nil, nil, mongoerr.New(mongoerr.BadValue, "bounds must be objects")
	}
	if bsonutil.CompareDocuments(min, max) >= 0 {
		return nil, nil, mongoerr.Newf(mongoerr.BadValue, "min must be less than max in %s bounds: %s >= %s",
			cmdName, bsonutil.FormatDoc(min), bsonutil.FormatDoc(max))
	}
	return min, max, nil
}

// MergeChunks is the shard's mergeChunks ({mergeChunks: ns, bounds: [min, max]}): it reads
// the local collection's UUID and asks the config server to merge this shard's chunks
// filling [min, max) (_configsvrCommitChunksMerge, majority).
func MergeChunks(ctx context.Context, local RunFunc, remote *Remote, self, ns string, min, max bsoncore.Document) (bsoncore.Document, error) {
	db, coll, _ := strings.Cut(ns, ".")
	l, err := LocalCollection(ctx, local, db, coll)
	if err != nil {
		return nil, err
	}
	if !l.exists || l.isView {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "Collection %s does not exist on shard %s", ns, self)
	}
	validAfter := clusterTime(ctx, remote)
	cmd := bsoncore.NewDocumentBuilder().AppendString("_configsvrCommitChunksMerge", ns).
		AppendBinary("collUUID", 4, l.uuid[:]).
		AppendDocument("chunkRange", bsoncore.NewDocumentBuilder().AppendDocument("min", min).AppendDocument("max", max).Build()).
		AppendString("shard", self).AppendTimestamp("validAfter", validAfter.T, validAfter.I).
		AppendDocument("writeConcern", majority()).Build()
	return Run(ctx, remote.Config(), "admin", cmd)
}
