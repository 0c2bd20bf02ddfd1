package configsvr

// Zones on the config server (spec: sharding.md "The config server" and the balancer's zone
// rules; MongoDB 7.0's ShardingCatalogManager::addShardToZone, removeShardFromZone,
// assignKeyRangeToZone and removeKeyRangeFromZone, sharding_catalog_manager_zone_operations.cpp):
// a zone is a name in a config.shards document's tags array; a zone range is a
// config.tags document {_id, ns, min, max, tag}. All zone changes are serialized by the
// Manager's zone lock (MongoDB's _kZoneOpLock) and written with majority write concern.
//
// The types at the end (Zone, ZoneSet, ExtendBound) are shared with the shard's initial
// split policy (internal/sharding/ddl), which reads config.tags when a collection is sharded.

import (
	"context"
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/shardkey"
)

// ParseShardZone reads {<name>: shardName, zone: zoneName}, the form of addShardToZone,
// removeShardFromZone and their _configsvr halves (IDL: both fields required strings).
func ParseShardZone(name string, cmd bsoncore.Document) (shard, zone string, err error) {
	first, err := cmd.IndexErr(0)
	if err != nil {
		return "", "", mongoerr.Newf(mongoerr.FailedToParse, "%s: empty command", name)
	}
	shard, ok := first.Value().StringValueOK()
	if !ok {
		return "", "", mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'string'",
			name, first.Key(), typeName(first.Value().Type))
	}
	v, lerr := cmd.LookupErr("zone")
	if lerr != nil {
		return "", "", mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.zone' is missing but a required field", name)
	}
	zone, ok = v.StringValueOK()
	if !ok {
		return "", "", mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.zone' is the wrong type '%s', expected type 'string'",
			name, typeName(v.Type))
	}
	return shard, zone, nil
}

// ZoneRangeRequest is UpdateZoneKeyRangeRequest: a range of ns assigned to Zone, or removed
// from its zone when Remove (zone: null).
type ZoneRangeRequest struct {
	NS       string
	Min, Max bsoncore.Document
	Zone     string
	Remove   bool
}

// ParseZoneRange is UpdateZoneKeyRangeRequest::_parseFromCommand for the command name (the
// router's updateZoneKeyRange or the config server's _configsvrUpdateZoneKeyRange):
// {<name>: ns, min, max, zone: string|null}.
func ParseZoneRange(name string, cmd bsoncore.Document) (ZoneRangeRequest, error) {
	var r ZoneRangeRequest
	v, err := cmd.LookupErr(name)
	if err != nil {
		return r, mongoerr.Newf(mongoerr.NoSuchKey, "Missing expected field \"%s\"", name)
	}
	ns, ok := v.StringValueOK()
	if !ok {
		return r, mongoerr.Newf(mongoerr.TypeMismatch, "\"%s\" had the wrong type. Expected string, found %s", name, typeName(v.Type))
	}
	if !validNamespace(ns) {
		return r, mongoerr.Newf(mongoerr.InvalidNamespace, "%s is not a valid namespace", ns)
	}
	r.NS = ns
	bound := func(field string) (bsoncore.Document, error) {
		v, err := cmd.LookupErr(field)
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.NoSuchKey, "The field '%s' cannot be parsed :: caused by :: Missing expected field \"%s\"", field, field)
		}
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "The field '%s' cannot be parsed :: caused by :: \"%s\" had the wrong type. Expected object, found %s",
				field, field, typeName(v.Type))
		}
		if elems, _ := d.Elements(); len(elems) == 0 {
			return nil, mongoerr.Newf(mongoerr.BadValue, "The field '%s' cannot be empty", field)
		}
		return d, nil
	}
	if r.Min, err = bound("min"); err != nil {
		return r, err
	}
	if r.Max, err = bound("max"); err != nil {
		return r, err
	}
	if bsonutil.CompareDocuments(r.Min, r.Max) >= 0 {
		return r, mongoerr.Newf(mongoerr.FailedToParse, "min: %s should be less than max: %s",
			bsonutil.FormatDoc(r.Min), bsonutil.FormatDoc(r.Max))
	}
	z, err := cmd.LookupErr("zone")
	if err != nil {
		return r, mongoerr.New(mongoerr.NoSuchKey, "Missing expected field \"zone\"")
	}
	switch z.Type {
	case bsoncore.TypeString:
		r.Zone = z.StringValue()
	case bsoncore.TypeNull:
		r.Remove = true
	default:
		return r, mongoerr.Newf(mongoerr.TypeMismatch, "\"zone\" had the wrong type. Expected string or null, found %s", typeName(z.Type))
	}
	return r, nil
}

// Command renders the request as the config server's _configsvrUpdateZoneKeyRange.
func (r ZoneRangeRequest) Command() bsoncore.Document {
	b := bsoncore.NewDocumentBuilder().AppendString("_configsvrUpdateZoneKeyRange", r.NS).
		AppendDocument("min", r.Min).AppendDocument("max", r.Max)
	if r.Remove {
		b.AppendNull("zone")
	} else {
		b.AppendString("zone", r.Zone)
	}
	return b.Build()
}

func validNamespace(ns string) bool {
	for i := 0; i < len(ns); i++ {
		if ns[i] == '.' {
			return i > 0 && i < len(ns)-1
		}
		if ns[i] == 0 {
			return false
		}
	}
	return false
}

// AddShardToZone adds zone to shard's tags (MongoDB: $addToSet on config.shards); a shard
// that does not exist is ShardNotFound.
func (m *Manager) AddShardToZone(ctx context.Context, shard, zone string) error {
	m.zones.Lock()
	defer m.zones.Unlock()
	n, err := m.update(ctx, "shards", str("_id", shard),
		bsoncore.NewDocumentBuilder().AppendDocument("$addToSet", str("tags", zone)).Build(), false)
	if err != nil {
		return err
	}
	if n == 0 {
		return mongoerr.Newf(mongoerr.ShardNotFound, "shard %s does not exist", shard)
	}
	return nil
}

// RemoveShardFromZone pulls zone from shard's tags, unless shard is the zone's last shard
// and a range of some collection is still assigned to the zone (ZoneStillInUse).
func (m *Manager) RemoveShardFromZone(ctx context.Context, shard, zone string) error {
	m.zones.Lock()
	defer m.zones.Unlock()
	docs, err := m.find(ctx, "shards", str("_id", shard), 1)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return mongoerr.Newf(mongoerr.ShardNotFound, "shard %s does not exist", shard)
	}
	inUse, err := m.shardRequiredByZone(ctx, shard, zone)
	if err != nil {
		return err
	}
	if inUse {
		return mongoerr.New(mongoerr.ZoneStillInUse, "cannot remove a shard from zone if a chunk range is associated with it")
	}
	n, err := m.update(ctx, "shards", str("_id", shard),
		bsoncore.NewDocumentBuilder().AppendDocument("$pull", str("tags", zone)).Build(), false)
	if err != nil {
		return err
	}
	if n == 0 {
		return mongoerr.Newf(mongoerr.ShardNotFound, "shard %s no longer exist", shard)
	}
	return nil
}

// shardRequiredByZone is _isShardRequiredByZoneStillInUse: shard is the only shard of zone
// and config.tags holds a range of zone.
func (m *Manager) shardRequiredByZone(ctx context.Context, shard, zone string) (bool, error) {
	docs, err := m.find(ctx, "shards", str("tags", zone), 2)
	if err != nil || len(docs) != 1 {
		return false, err
	}
	if id, _ := docs[0].Lookup("_id").StringValueOK(); id != shard {
		return false, nil
	}
	ranges, err := m.find(ctx, "tags", str("tag", zone), 1)
	return len(ranges) > 0, err
}

// UpdateZoneKeyRange assigns the range to its zone or removes it (zone: null).
func (m *Manager) UpdateZoneKeyRange(ctx context.Context, r ZoneRangeRequest) error {
	if r.Remove {
		return m.RemoveKeyRangeFromZone(ctx, r.NS, r.Min, r.Max)
	}
	return m.AssignKeyRangeToZone(ctx, r.NS, r.Min, r.Max, r.Zone)
}

// AssignKeyRangeToZone is assignKeyRangeToZone: the zone must exist (some shard has it);
// on a sharded collection the bounds must be prefixes of its shard key and are extended to
// the full key with MinKey; hashed fields take only NumberLong, MinKey or MaxKey bounds; the
// range may not overlap another of the collection's ranges (the same range with the same
// zone is a no-op). The config.tags document is upserted by {ns, min}.
func (m *Manager) AssignKeyRangeToZone(ctx context.Context, ns string, min, max bsoncore.Document, zone string) error {
	if err := shardkey.CheckKeyForMetadataStorage(min); err != nil {
		return err
	}
	if err := shardkey.CheckKeyForMetadataStorage(max); err != nil {
		return err
	}
	m.zones.Lock()
	defer m.zones.Unlock()
	shards, err := m.find(ctx, "shards", str("tags", zone), 1)
	if err != nil {
		return err
	}
	if len(shards) == 0 {
		return mongoerr.Newf(mongoerr.ZoneNotFound, "zone %s does not exist", zone)
	}
	min, max, key, err := m.fullShardKeyRange(ctx, ns, min, max)
	if err != nil {
		return err
	}
	if err := checkHashedRange(min, max, key); err != nil {
		return err
	}
	existing, err := m.Zones(ctx, ns)
	if err != nil {
		return err
	}
	var set ZoneSet
	for _, z := range existing {
		zmin, err := ExtendBound(key, z.Min)
		if err != nil {
			return err
		}
		zmax, err := ExtendBound(key, z.Max)
		if err != nil {
			return err
		}
		if err := set.Add(Zone{Min: zmin, Max: zmax, Name: z.Name}); err != nil {
			return err
		}
	}
	if err := set.Add(Zone{Min: min, Max: max, Name: zone}); err != nil {
		return err
	}
	doc := bsoncore.NewDocumentBuilder().AppendString("ns", ns).AppendDocument("min", min).
		AppendDocument("max", max).AppendString("tag", zone).Build()
	filter := bsoncore.NewDocumentBuilder().AppendString("ns", ns).AppendDocument("min", min).Build()
	_, err = m.update(ctx, "tags", filter, doc, true)
	return err
}

// RemoveKeyRangeFromZone is removeKeyRangeFromZone: it deletes the config.tags documents of
// ns with exactly these bounds (extended to the full shard key on a sharded collection);
// nothing to delete is a success.
func (m *Manager) RemoveKeyRangeFromZone(ctx context.Context, ns string, min, max bsoncore.Document) error {
	m.zones.Lock()
	defer m.zones.Unlock()
	min, max, _, err := m.fullShardKeyRange(ctx, ns, min, max)
	if err != nil {
		return err
	}
	filter := bsoncore.NewDocumentBuilder().AppendString("ns", ns).AppendDocument("min", min).AppendDocument("max", max).Build()
	cmd := bsoncore.NewDocumentBuilder().AppendString("delete", "tags").
		AppendArray("deletes", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", filter).AppendInt32("limit", 0).Build()).Build()).
		AppendDocument("writeConcern", majority()).Build()
	reply, err := m.Run(ctx, "config", cmd)
	if err != nil {
		return fmt.Errorf("write config.tags: %w", err)
	}
	return WriteReplyError(reply)
}

// fullShardKeyRange is includeFullShardKey: on a sharded collection, the bounds must be
// prefixes of the shard key and are extended to it; on another, the key pattern is the
// bounds' own fields (ChunkRange::extractKeyPattern), which must agree.
func (m *Manager) fullShardKeyRange(ctx context.Context, ns string, min, max bsoncore.Document) (bsoncore.Document, bsoncore.Document, bsoncore.Document, error) {
	docs, err := m.find(ctx, "collections", str("_id", ns), 1)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(docs) == 0 {
		key, err := rangeKeyPattern(min, max)
		return min, max, key, err
	}
	coll, err := configclient.ParseCollection(docs[0])
	if err != nil {
		return nil, nil, nil, err
	}
	key := coll.Pattern.Doc()
	for _, b := range []struct {
		name string
		doc  bsoncore.Document
	}{{"min", min}, {"max", max}} {
		if !isFieldNamePrefixOf(b.doc, key) {
			return nil, nil, nil, mongoerr.Newf(mongoerr.ShardKeyNotFound, "%s: %s is not a prefix of the shard key %s of ns: %s",
				b.name, bsonutil.FormatDoc(b.doc), bsonutil.FormatDoc(key), ns)
		}
	}
	emin, err := ExtendBound(key, min)
	if err != nil {
		return nil, nil, nil, err
	}
	emax, err := ExtendBound(key, max)
	return emin, emax, key, err
}

// rangeKeyPattern is ChunkRange::extractKeyPattern: min and max have the same field names
// in the same order; the pattern is {field: 1, ...}.
func rangeKeyPattern(min, max bsoncore.Document) (bsoncore.Document, error) {
	a, _ := min.Elements()
	b, _ := max.Elements()
	kb := bsoncore.NewDocumentBuilder()
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i].Key() != b[i].Key() || (i+1 < len(a)) != (i+1 < len(b)) {
			return nil, mongoerr.Newf(mongoerr.ShardKeyNotFound, "the shard key of min %s doesn't match with the shard key of max %s",
				bsonutil.FormatDoc(min), bsonutil.FormatDoc(max))
		}
		kb.AppendInt32(a[i].Key(), 1)
	}
	return kb.Build(), nil
}

// isFieldNamePrefixOf is BSONObj::isFieldNamePrefixOf: d's field names are the first
// fields of key, in order.
func isFieldNamePrefixOf(d, key bsoncore.Document) bool {
	a, _ := d.Elements()
	b, _ := key.Elements()
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i].Key() != b[i].Key() {
			return false
		}
	}
	return true
}

// checkHashedRange is checkHashedShardKeyRange: a hashed field's bounds are NumberLong,
// MinKey or MaxKey.
func checkHashedRange(min, max, key bsoncore.Document) error {
	kf, _ := key.Elements()
	a, _ := min.Elements()
	b, _ := max.Elements()
	for i, f := range kf {
		if s, ok := f.Value().StringValueOK(); !ok || s != "hashed" || i >= len(a) || i >= len(b) {
			continue
		}
		if !validHashedValue(a[i].Value()) || !validHashedValue(b[i].Value()) {
			return mongoerr.Newf(mongoerr.InvalidOptions,
				"there exists a field in the range %s -->> %s not of type NumberLong, MinKey, or MaxKey which corresponds to a hashed field in the shard key pattern %s",
				bsonutil.FormatDoc(min), bsonutil.FormatDoc(max), bsonutil.FormatDoc(key))
		}
	}
	return nil
}

func validHashedValue(v bsoncore.Value) bool {
	return v.Type == bsoncore.TypeInt64 || v.Type == bsoncore.TypeMinKey || v.Type == bsoncore.TypeMaxKey
}

// Zones reads the zone ranges of ns from config.tags on this node, sorted by min.
func (m *Manager) Zones(ctx context.Context, ns string) ([]Zone, error) {
	docs, err := FindAll(ctx, m.Run, "tags", str("ns", ns), bsoncore.NewDocumentBuilder().AppendInt32("min", 1).Build())
	if err != nil {
		return nil, err
	}
	out := make([]Zone, 0, len(docs))
	for _, d := range docs {
		z, err := ParseZone(d)
		if err != nil {
			return nil, err
		}
		out = append(out, z)
	}
	return out, nil
}

// update runs one update of config.<coll> with majority write concern and returns n.
func (m *Manager) update(ctx context.Context, coll string, q, u bsoncore.Document, upsert bool) (int64, error) {
	stmt := bsoncore.NewDocumentBuilder().AppendDocument("q", q).AppendDocument("u", u)
	if upsert {
		stmt.AppendBoolean("upsert", true)
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("update", coll).
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(stmt.Build()).Build()).
		AppendDocument("writeConcern", majority()).Build()
	reply, err := m.Run(ctx, "config", cmd)
	if err != nil {
		return 0, fmt.Errorf("write config.%s: %w", coll, err)
	}
	if err := WriteReplyError(reply); err != nil {
		return 0, err
	}
	n, _ := reply.Lookup("n").AsInt64OK()
	return n, nil
}

func str(k, v string) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString(k, v).Build()
}

// Zone is one zone range (TagsType / ZoneRange): [Min, Max) of a collection in zone Name.
type Zone struct {
	Min, Max bsoncore.Document
	Name     string
}

// String is ZoneRange::toString.
func (z Zone) String() string {
	return bsonutil.FormatDoc(z.Min) + " -->> " + bsonutil.FormatDoc(z.Max) + "  on  " + z.Name
}

// ParseZone reads a config.tags document.
func ParseZone(d bsoncore.Document) (Zone, error) {
	var z Zone
	var ok bool
	if z.Min, ok = d.Lookup("min").DocumentOK(); !ok {
		return z, mongoerr.Newf(mongoerr.NoSuchKey, "config.tags document without min: %s", bsonutil.FormatDoc(d))
	}
	if z.Max, ok = d.Lookup("max").DocumentOK(); !ok {
		return z, mongoerr.Newf(mongoerr.NoSuchKey, "config.tags document without max: %s", bsonutil.FormatDoc(d))
	}
	if z.Name, ok = d.Lookup("tag").StringValueOK(); !ok {
		return z, mongoerr.Newf(mongoerr.NoSuchKey, "config.tags document without tag: %s", bsonutil.FormatDoc(d))
	}
	z.Min = append(bsoncore.Document(nil), z.Min...)
	z.Max = append(bsoncore.Document(nil), z.Max...)
	return z, nil
}

// ZoneSet is ZoneInfo: non-overlapping zone ranges ordered by their upper bound.
type ZoneSet struct {
	byMax []Zone
}

// Add is ZoneInfo::addRangeToZone: a range overlapping another is RangeOverlapConflict,
// unless it is the same range in the same zone (a no-op).
func (s *ZoneSet) Add(r Zone) error {
	upper := func(k bsoncore.Document) int {
		return sort.Search(len(s.byMax), func(i int) bool { return bsonutil.CompareDocuments(s.byMax[i].Max, k) > 0 })
	}
	minI, maxI := upper(r.Min), upper(r.Max)
	conflict := func(with Zone) error {
		return mongoerr.Newf(mongoerr.RangeOverlapConflict, "Zone range: %s is overlapping with existing: %s", r, with)
	}
	if minI != maxI {
		with := s.byMax[minI]
		if bsonutil.CompareDocuments(with.Min, r.Max) >= 0 {
			with = s.byMax[maxI]
		}
		if bsonutil.CompareDocuments(with.Min, r.Min) == 0 && bsonutil.CompareDocuments(with.Max, r.Max) == 0 && with.Name == r.Name {
			return nil
		}
		return conflict(with)
	}
	if minI < len(s.byMax) && bsonutil.CompareDocuments(r.Max, s.byMax[minI].Min) > 0 {
		return conflict(s.byMax[minI])
	}
	s.byMax = append(s.byMax, Zone{})
	copy(s.byMax[minI+1:], s.byMax[minI:])
	s.byMax[minI] = r
	return nil
}

// Ranges are the set's ranges in key order.
func (s *ZoneSet) Ranges() []Zone { return s.byMax }

// ExtendBound is KeyPattern::extendRangeBound(bound, false): bound's fields must be the
// first fields of key; the missing ones are appended as MinKey (MaxKey for a descending
// field).
func ExtendBound(key, bound bsoncore.Document) (bsoncore.Document, error) {
	kf, _ := key.Elements()
	bf, _ := bound.Elements()
	if len(bf) > len(kf) {
		return nil, mongoerr.Newf(mongoerr.Location16649, "keyPattern must contain all fields in bound: %s", bsonutil.FormatDoc(bound))
	}
	idx, d := bsoncore.AppendDocumentStart(nil)
	for i, e := range bf {
		if e.Key() != kf[i].Key() {
			return nil, mongoerr.Newf(mongoerr.Location16634, "field names of bound %s do not match those of keyPattern %s",
				bsonutil.FormatDoc(bound), bsonutil.FormatDoc(key))
		}
		d = bsoncore.AppendValueElement(d, e.Key(), e.Value())
	}
	for _, f := range kf[len(bf):] {
		t := bsoncore.TypeMinKey
		if n, ok := f.Value().AsInt64OK(); ok && n < 0 {
			t = bsoncore.TypeMaxKey
		}
		d = bsoncore.AppendHeader(d, t, f.Key())
	}
	d, _ = bsoncore.AppendDocumentEnd(d, idx)
	return d, nil
}
