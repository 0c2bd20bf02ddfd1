package commands

import (
	"bytes"
	"context"
	"math"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/service"
)

func addCollMod(r *service.Registry) {
	add(r, &service.Command{
		Name:    "collMod",
		Auth:    service.AuthCollMod(false),
		Handler: runCollMod,
		Help:    "Sets collection options.\nExample: { collMod: 'foo', index: {keyPattern: {a: 1}, expireAfterSeconds: 600} }",
		Writes:  true,
	})
}

// ddlCollModIndex is a parsed collMod.index argument.
type ddlCollModIndex struct {
	keyPattern    bsoncore.Document
	name          string
	expire        *int64
	hidden        *bool
	unique        *bool
	prepareUnique *bool
	forceNonUniq  bool
}

// runCollMod changes collection options (validator, validationLevel, validationAction, a
// clustered collection's expireAfterSeconds, cappedSize/cappedMax) and index options
// (expireAfterSeconds, hidden, prepareUnique, unique) under the collection X lock.
//
// Converting an index to unique first requires prepareUnique: true, then scans the index for
// duplicate keys; duplicates fail with CannotConvertIndexToUnique (359) and a `violations`
// array of {ids: [...]} groups. dryRun: true only runs that check. Note: the write path does
// not enforce prepareUnique yet (index.Index only knows unique), so while prepareUnique is set
// new duplicates are still accepted; the conversion then reports them.
func runCollMod(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "collMod"
	ns, err := ddlCollectionNS(env, cmd)
	if err != nil {
		return nil, err
	}
	if err := checkStrict(cmd, c, "index", "validator", "validationLevel", "validationAction",
		"expireAfterSeconds", "dryRun", "viewOn", "pipeline", "changeStreamPreAndPostImages",
		"timeseries", "recordPreImages", "cappedSize", "cappedMax", "collectionUUID"); err != nil {
		return nil, err
	}
	if _, _, isView, err := viewLookup(ctx, env, ns); err != nil {
		return nil, err
	} else if isView {
		return viewCollMod(ctx, env, ns, cmd)
	}
	if lookup(cmd, "viewOn").Type != 0 || lookup(cmd, "pipeline").Type != 0 {
		if _, ok := db.Catalog.Latest().ByNS(ns); ok {
			return nil, mongoerr.Newf(mongoerr.InvalidOptions, "ns %s is a collection, not a view", ns)
		}
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist")
	}
	if lookup(cmd, "timeseries").Type != 0 {
		return nil, mongoerr.New(mongoerr.NotImplemented, "time-series collections are not supported yet")
	}
	dryRun, err := ddlBoolArg(c, "dryRun", lookup(cmd, "dryRun"))
	if err != nil {
		return nil, err
	}
	var ixReq *ddlCollModIndex
	if v := lookup(cmd, "index"); v.Type != 0 {
		if ixReq, err = ddlParseCollModIndex(v); err != nil {
			return nil, err
		}
	}
	if dryRun && (ixReq == nil || ixReq.unique == nil) {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "dryRun requires an index conversion to unique")
	}
	// Collection option changes, as (field, value) in the order given.
	var changes []bsoncore.Element
	if v := lookup(cmd, "validator"); v.Type != 0 {
		if _, ok := v.DocumentOK(); !ok {
			return nil, typeMismatch(c, "validator", v.Type, "object")
		}
	}
	if _, err := ddlEnumArg(c, "validationLevel", lookup(cmd, "validationLevel"), "off", "strict", "moderate"); err != nil {
		return nil, err
	}
	if _, err := ddlEnumArg(c, "validationAction", lookup(cmd, "validationAction"), "error", "warn"); err != nil {
		return nil, err
	}
	if err := validValidateOptions(ns, cmd); err != nil {
		return nil, err
	}
	if v := lookup(cmd, ddlPreAndPostImagesField); v.Type != 0 {
		enabled, err := ddlParsePreAndPostImages(c, v)
		if err != nil {
			return nil, err
		}
		if _, _, isView, err := viewLookup(ctx, env, ns); err != nil {
			return nil, err
		} else if isView {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "option not supported on a view: "+ddlPreAndPostImagesField)
		}
		if enabled {
			if err := ddlCheckPreAndPostImagesAllowed(ns); err != nil {
				return nil, err
			}
		}
	}
	elems, _ := cmd.Elements()
	for _, e := range elems {
		switch e.Key() {
		case ddlPreAndPostImagesField:
			// Logged in its canonical form; secondaries store it as the primary does
			// (oplog.applyCollMod drops a disabled option).
			enabled, _ := ddlParsePreAndPostImages(c, e.Value())
			changes = append(changes, bsoncore.AppendDocumentElement(nil, ddlPreAndPostImagesField,
				bsoncore.NewDocumentBuilder().AppendBoolean("enabled", enabled).Build()))
		case "validator", "validationLevel", "validationAction":
			changes = append(changes, e)
		case "expireAfterSeconds", "cappedSize", "cappedMax":
			changes = append(changes, e)
		}
	}

	op := db.NewOp(ctx)
	defer op.Close()
	var reply bsoncore.Document
	err = op.DDL(ctx, ns, func() error {
		reply = nil
		m, ok := db.Catalog.Latest().ByNS(ns)
		if !ok {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist")
		}
		if v := lookup(cmd, "collectionUUID"); v.Type != 0 {
			if err := ddlCheckCollectionUUID(v, m); err != nil {
				return err
			}
		}
		if len(changes) > 0 && !dryRun {
			opts, err := ddlCollModOptions(m, changes)
			if err != nil {
				return err
			}
			if !bytes.Equal(opts, operation.UserOptions(m)) {
				if err := db.Catalog.UpdateOptions(op.RU, ns, opts); err != nil {
					return err
				}
				if ix, ok := m.Index(catalog.IDIndexName); ok && m.Clustered {
					if spec := ddlClusteredIDSpec(opts); !bytes.Equal(spec, ix.Spec) {
						if err := db.Catalog.ReplaceIndexSpec(op.RU, ns, ix.Name, spec); err != nil {
							return err
						}
					}
				}
			}
		}
		if ixReq != nil {
			r, err := ddlCollModApplyIndex(op, m, ixReq, dryRun)
			if err != nil {
				return err
			}
			reply = r
		}
		if dryRun {
			return nil
		}
		// Logged as given: {collMod: coll, <option changes>, index: {...}}; a collMod that
		// changes nothing is logged too, as MongoDB does (change streams see a modify).
		return db.Observer().OnCollMod(op.RU, ns, m.UUID, doc(func(b []byte) []byte {
			b = bsoncore.AppendStringElement(b, "collMod", m.Coll())
			for _, e := range changes {
				b = append(b, e...)
			}
			if v := lookup(cmd, "index"); v.Type != 0 {
				b = bsoncore.AppendValueElement(b, "index", v)
			}
			return b
		}))
	})
	if err != nil {
		return nil, err
	}
	if reply == nil {
		return emptyDoc, nil
	}
	return reply, nil
}

// ddlCollModOptions applies collection-level changes to m's options.
func ddlCollModOptions(m *catalog.CollectionMeta, changes []bsoncore.Element) (bsoncore.Document, error) {
	opts := operation.UserOptions(m)
	for _, e := range changes {
		v := e.Value()
		key := e.Key()
		switch key {
		case "expireAfterSeconds":
			if !m.Clustered {
				return nil, mongoerr.New(mongoerr.InvalidOptions,
					"'expireAfterSeconds' option is only supported on clustered collections or timeseries")
			}
			if s, ok := v.StringValueOK(); ok {
				if s != "off" {
					return nil, mongoerr.Newf(mongoerr.InvalidOptions,
						"Invalid string value for the 'clusteredIndex::expireAfterSeconds' option. Got: '%s'. Accepted value is 'off'", s)
				}
				opts = ddlSetField(opts, key, bsoncore.Value{})
				continue
			}
			n, err := ddlSafeLong("collMod", key, v)
			if err != nil {
				return nil, err
			}
			if n < 0 {
				return nil, mongoerr.New(mongoerr.InvalidOptions,
					"TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
			}
			opts = ddlSetField(opts, key, bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, n)})
		case "cappedSize", "cappedMax":
			if !m.Capped {
				return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "collection %s is not capped", m.NS)
			}
			n, err := ddlSafeLong("collMod", key, v)
			if err != nil {
				return nil, err
			}
			// collMod's IDL: cappedSize {gte: 1} (51024).
			if key == "cappedSize" && n < 1 {
				return nil, mongoerr.Newf(mongoerr.Location51024, "BSON field 'cappedSize' value must be >= 1, actual value '%d'", n)
			}
			field := "size"
			if key == "cappedMax" {
				field = "max"
			} else {
				n = (n + 0xff) &^ 0xff
			}
			opts = ddlSetField(opts, field, ddlNumberValue(n))
		case ddlPreAndPostImagesField:
			// Stored only while enabled (MongoDB's CollectionOptions::appendBSON).
			if d, _ := v.DocumentOK(); lookup(d, "enabled").Boolean() {
				opts = ddlSetField(opts, key, v)
			} else {
				opts = ddlSetField(opts, key, bsoncore.Value{})
			}
		default:
			opts = ddlSetField(opts, key, v)
		}
	}
	return opts, nil
}

func ddlNumberValue(n int64) bsoncore.Value {
	if n > -(1<<30) && n < 1<<30 {
		return bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, int32(n))}
	}
	return bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, n)}
}

// ddlSetField replaces field key of d in place (or appends it); a zero Value removes it.
func ddlSetField(d bsoncore.Document, key string, v bsoncore.Value) bsoncore.Document {
	return doc(func(b []byte) []byte {
		elems, _ := d.Elements()
		done := false
		for _, e := range elems {
			if e.Key() != key {
				b = append(b, e...)
				continue
			}
			if v.Type != 0 {
				b = bsoncore.AppendValueElement(b, key, v)
			}
			done = true
		}
		if !done && v.Type != 0 {
			b = bsoncore.AppendValueElement(b, key, v)
		}
		return b
	})
}

func ddlBoolValue(x bool) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeBoolean, Data: bsoncore.AppendBoolean(nil, x)}
}

// ddlParseCollModIndex parses collMod's `index` document.
func ddlParseCollModIndex(v bsoncore.Value) (*ddlCollModIndex, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, typeMismatch("collMod", "index", v.Type, "object")
	}
	elems, err := d.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid index argument: %v", err)
	}
	r := &ddlCollModIndex{}
	hasName := false
	boolPtr := func(field string, v bsoncore.Value) (*bool, error) {
		if v.Type != bsoncore.TypeBoolean {
			return nil, typeMismatch("collMod.index", field, v.Type, "bool")
		}
		x := v.Boolean()
		return &x, nil
	}
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "keyPattern":
			kp, ok := v.DocumentOK()
			if !ok {
				return nil, typeMismatch("collMod.index", "keyPattern", v.Type, "object")
			}
			r.keyPattern = kp
		case "name":
			s, ok := v.StringValueOK()
			if !ok {
				return nil, typeMismatch("collMod.index", "name", v.Type, "string")
			}
			r.name, hasName = s, true
		case "expireAfterSeconds":
			n, err := ddlSafeLong("collMod.index", "expireAfterSeconds", v)
			if err != nil {
				return nil, err
			}
			if n < 0 || n > math.MaxInt32 {
				return nil, mongoerr.New(mongoerr.InvalidOptions,
					"TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
			}
			r.expire = &n
		case "hidden":
			if r.hidden, err = boolPtr("hidden", v); err != nil {
				return nil, err
			}
		case "unique":
			if r.unique, err = boolPtr("unique", v); err != nil {
				return nil, err
			}
			if !*r.unique {
				return nil, mongoerr.New(mongoerr.BadValue, "collMod.index.unique can only be set to true")
			}
		case "prepareUnique":
			if r.prepareUnique, err = boolPtr("prepareUnique", v); err != nil {
				return nil, err
			}
		case "forceNonUnique":
			f, err := boolPtr("forceNonUnique", v)
			if err != nil {
				return nil, err
			}
			r.forceNonUniq = *f
		default:
			return nil, mongoerr.Newf(codeUnknownField, "BSON field 'collMod.index.%s' is an unknown field.", e.Key())
		}
	}
	if r.keyPattern != nil && hasName {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Cannot specify both key pattern and name.")
	}
	if r.keyPattern == nil && !hasName {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Must specify either index name or key pattern.")
	}
	if r.expire == nil && r.hidden == nil && r.unique == nil && r.prepareUnique == nil && !r.forceNonUniq {
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"no expireAfterSeconds, hidden, unique, or prepareUnique field")
	}
	if r.unique != nil && r.forceNonUniq {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "collMod does not support converting an index to 'unique' and to 'forceNonUnique' at the same time")
	}
	return r, nil
}

// ddlCollModApplyIndex applies an index modification inside op's unit and returns the reply.
func ddlCollModApplyIndex(op *operation.Context, m *catalog.CollectionMeta, r *ddlCollModIndex, dryRun bool) (bsoncore.Document, error) {
	var ix *catalog.IndexMeta
	if r.keyPattern != nil {
		var found []*catalog.IndexMeta
		for i := range m.Indexes {
			if m.Indexes[i].KeyPattern.String() == r.keyPattern.String() {
				found = append(found, &m.Indexes[i])
			}
		}
		if len(found) == 0 {
			return nil, mongoerr.Newf(mongoerr.IndexNotFound, "cannot find index %s for ns %s", r.keyPattern, m.NS)
		}
		if len(found) > 1 {
			return nil, mongoerr.Newf(mongoerr.AmbiguousIndexKeyPattern, "%d indexes found for key: %s, identify by name instead.", len(found), r.keyPattern)
		}
		ix = found[0]
	} else {
		var ok bool
		if ix, ok = m.Index(r.name); !ok {
			return nil, mongoerr.Newf(mongoerr.IndexNotFound, "cannot find index %s for ns %s", r.name, m.NS)
		}
	}
	if !ix.Ready {
		return nil, mongoerr.Newf(mongoerr.BackgroundOperationInProgressForNamespace,
			"cannot modify index %s of %s while it is being built", ix.Name, m.NS)
	}
	if ix.IsIDIndex() {
		if r.hidden != nil && *r.hidden {
			return nil, mongoerr.New(mongoerr.BadValue, "can't hide _id index")
		}
		if r.expire != nil {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "cannot set TTL on the _id index")
		}
	}
	spec := ix.Spec
	reply := []byte{}
	appendB := func(k string, v bool) { reply = bsoncore.AppendBooleanElement(reply, k, v) }
	if r.expire != nil {
		if ix.ExpireAfterSeconds == nil {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "no expireAfterSeconds field to update")
		}
		if *ix.ExpireAfterSeconds != *r.expire {
			reply = bsoncore.AppendInt64Element(reply, "expireAfterSeconds_old", *ix.ExpireAfterSeconds)
			reply = bsoncore.AppendInt64Element(reply, "expireAfterSeconds_new", *r.expire)
			spec = ddlSetField(spec, "expireAfterSeconds", bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, *r.expire)})
		}
	}
	if r.hidden != nil && ix.Hidden != *r.hidden {
		appendB("hidden_old", ix.Hidden)
		appendB("hidden_new", *r.hidden)
		if *r.hidden {
			spec = ddlSetField(spec, "hidden", ddlBoolValue(true))
		} else {
			spec = ddlSetField(spec, "hidden", bsoncore.Value{})
		}
	}
	oldPrepare := truthy(lookup(ix.Spec, "prepareUnique"))
	if r.prepareUnique != nil && oldPrepare != *r.prepareUnique {
		if ix.Unique && *r.prepareUnique {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "index is already unique")
		}
		appendB("prepareUnique_old", oldPrepare)
		appendB("prepareUnique_new", *r.prepareUnique)
		if *r.prepareUnique {
			spec = ddlSetField(spec, "prepareUnique", ddlBoolValue(true))
		} else {
			spec = ddlSetField(spec, "prepareUnique", bsoncore.Value{})
		}
	}
	if r.unique != nil && !ix.Unique {
		prepared := oldPrepare || (r.prepareUnique != nil && *r.prepareUnique)
		if !prepared && !ix.IsIDIndex() {
			return nil, mongoerr.New(mongoerr.InvalidOptions,
				"Cannot make index unique with 'prepareUnique=false'. Run 'collMod' to set it first.")
		}
		if err := ddlCheckUniqueConvertible(op, m, ix); err != nil {
			return nil, err
		}
		if dryRun {
			return emptyDoc, nil
		}
		appendB("unique_new", true)
		spec = ddlSetField(spec, "unique", ddlBoolValue(true))
		spec = ddlSetField(spec, "prepareUnique", bsoncore.Value{})
	} else if dryRun {
		return emptyDoc, nil
	}
	if r.forceNonUniq && ix.Unique && !ix.IsIDIndex() {
		appendB("unique_new", false)
		spec = ddlSetField(spec, "unique", bsoncore.Value{})
	}
	if !bytes.Equal(spec, ix.Spec) {
		if err := op.DB.Catalog.ReplaceIndexSpec(op.RU, m.NS, ix.Name, spec); err != nil {
			return nil, err
		}
	}
	return doc(func(b []byte) []byte { return append(b, reply...) }), nil
}

// ddlMaxViolations bounds the duplicate groups a failed unique conversion reports.
const ddlMaxViolations = 1000

// ddlCheckUniqueConvertible scans the index in key order and fails with
// CannotConvertIndexToUnique when two entries share a key.
func ddlCheckUniqueConvertible(op *operation.Context, m *catalog.CollectionMeta, im *catalog.IndexMeta) error {
	coll, err := op.DB.Colls.ByUUID(m.UUID)
	if err != nil {
		return err
	}
	ix, ok, err := coll.Index(im.Name)
	if err != nil {
		return err
	}
	if !ok {
		return mongoerr.Newf(mongoerr.IndexNotFound, "cannot find index %s for ns %s", im.Name, m.NS)
	}
	cur, err := ix.NewCursor(op.RU, index.ScanOptions{})
	if err != nil {
		return err
	}
	defer cur.Close()
	var violations [][]bsoncore.Value
	var prev []byte
	var group []bsoncore.Value
	flush := func() {
		if len(group) > 1 && len(violations) < ddlMaxViolations {
			violations = append(violations, group)
		}
		group = nil
	}
	for cur.Next() {
		key := cur.KeyString()
		if prev == nil || !bytes.Equal(prev, key) {
			flush()
			prev = append(prev[:0], key...)
		}
		doc, found, err := coll.RecordStore().Get(op.RU, cur.RecordID())
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		id, err := bsoncore.Document(doc).LookupErr("_id")
		if err != nil {
			continue
		}
		group = append(group, bsoncore.Value{Type: id.Type, Data: append([]byte(nil), id.Data...)})
	}
	if err := cur.Err(); err != nil {
		return err
	}
	flush()
	if len(violations) == 0 {
		return nil
	}
	info := doc(func(b []byte) []byte {
		ai, b := bsoncore.AppendArrayElementStart(b, "violations")
		for i, g := range violations {
			gi, b2 := bsoncore.AppendDocumentElementStart(b, itoa(int64(i)))
			b = b2
			ii, b3 := bsoncore.AppendArrayElementStart(b, "ids")
			b = b3
			for j, id := range g {
				b = bsoncore.AppendValueElement(b, itoa(int64(j)), id)
			}
			b, _ = bsoncore.AppendArrayEnd(b, ii)
			b, _ = bsoncore.AppendDocumentEnd(b, gi)
		}
		b, _ = bsoncore.AppendArrayEnd(b, ai)
		return b
	})
	return mongoerr.New(ddlCodeCannotConvertIndexToUnique,
		"Cannot convert the index to unique. Please resolve conflicting documents before running collMod again.").WithInfo(info)
}
