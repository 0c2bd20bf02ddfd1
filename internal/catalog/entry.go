package catalog

// Durable catalog entry format (one BSON document per collection, keyed by
// recordid.Long(catalogID) in `_mdb_catalog`, or `_mdb_catalog_local` for the local database):
//
//	{ ident: "collection-<n>-<r>",
//	  idxIdent: { <index name>: "index-<n>-<r>", ... },
//	  ns: "db.coll",
//	  md: { ns: "db.coll",
//	        options: { uuid: BinData(4, ...), <other create options> },
//	        indexes: [ { spec: {v: 2, key: {...}, name: "...", <options>},
//	                     ready: bool, multikey: bool,
//	                     multikeyPaths: { <key field>: BinData(0, one byte per path component, 1 = array) },
//	                     head: NumberLong(0), backgroundSecondary: false,
//	                     buildUUID: BinData(4, ...)   // only while the build is in progress
//	                   }, ... ] } }
//
// This is MongoDB's shape, so $listCatalog can return md and idxIdent verbatim.

import (
	"errors"
	"fmt"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/storage"
)

const bsonSubtypeUUID = 4

// errCorrupt wraps storage.ErrCorrupt with the catalog entry that failed to decode.
func errCorrupt(format string, args ...any) error {
	return fmt.Errorf("catalog: corrupt entry: %s: %w", fmt.Sprintf(format, args...), storage.ErrCorrupt)
}

// encodeEntry renders m as a durable catalog entry.
func encodeEntry(m *CollectionMeta) []byte {
	dst := make([]byte, 0, 256+len(m.Options)+len(m.Indexes)*160)
	idx, dst := bsoncore.AppendDocumentStart(dst)
	dst = bsoncore.AppendStringElement(dst, "ident", m.Ident)
	var sub int32
	sub, dst = bsoncore.AppendDocumentElementStart(dst, "idxIdent")
	for i := range m.Indexes {
		dst = bsoncore.AppendStringElement(dst, m.Indexes[i].Name, m.Indexes[i].Ident)
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, sub)
	dst = bsoncore.AppendStringElement(dst, "ns", m.NS)

	var md int32
	md, dst = bsoncore.AppendDocumentElementStart(dst, "md")
	dst = bsoncore.AppendStringElement(dst, "ns", m.NS)
	dst = bsoncore.AppendDocumentElement(dst, "options", m.Options)
	var arr int32
	arr, dst = bsoncore.AppendArrayElementStart(dst, "indexes")
	for i := range m.Indexes {
		dst = appendIndexEntry(dst, itoa(i), &m.Indexes[i])
	}
	dst, _ = bsoncore.AppendArrayEnd(dst, arr)
	dst, _ = bsoncore.AppendDocumentEnd(dst, md)
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

func appendIndexEntry(dst []byte, key string, ix *IndexMeta) []byte {
	var d int32
	d, dst = bsoncore.AppendDocumentElementStart(dst, key)
	dst = bsoncore.AppendDocumentElement(dst, "spec", ix.Spec)
	dst = bsoncore.AppendBooleanElement(dst, "ready", ix.Ready)
	dst = bsoncore.AppendBooleanElement(dst, "multikey", ix.Multikey)
	if ix.MultikeyPaths != nil {
		var p int32
		p, dst = bsoncore.AppendDocumentElementStart(dst, "multikeyPaths")
		fields := keyFields(ix.KeyPattern)
		for i, f := range fields {
			var comps []bool
			if i < len(ix.MultikeyPaths) {
				comps = ix.MultikeyPaths[i]
			}
			b := make([]byte, len(comps))
			for j, c := range comps {
				if c {
					b[j] = 1
				}
			}
			dst = bsoncore.AppendBinaryElement(dst, f, 0, b)
		}
		dst, _ = bsoncore.AppendDocumentEnd(dst, p)
	}
	dst = bsoncore.AppendInt64Element(dst, "head", 0)
	dst = bsoncore.AppendBooleanElement(dst, "backgroundSecondary", false)
	if ix.BuildUUID != nil {
		dst = bsoncore.AppendBinaryElement(dst, "buildUUID", bsonSubtypeUUID, ix.BuildUUID[:])
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, d)
	return dst
}

// decodeEntry parses a durable catalog entry. Corrupt bytes return an error wrapping
// storage.ErrCorrupt; nothing panics.
func decodeEntry(id int64, raw []byte) (*CollectionMeta, error) {
	doc := bsoncore.Document(raw)
	if err := doc.Validate(); err != nil {
		return nil, errCorrupt("catalog id %d: %v", id, err)
	}
	m := &CollectionMeta{CatalogID: id}
	var ok bool
	if m.Ident, ok = lookupString(doc, "ident"); !ok {
		return nil, errCorrupt("catalog id %d: missing ident", id)
	}
	if m.NS, ok = lookupString(doc, "ns"); !ok {
		return nil, errCorrupt("catalog id %d: missing ns", id)
	}
	mdv, err := doc.LookupErr("md")
	if err != nil {
		return nil, errCorrupt("catalog id %d: missing md", id)
	}
	md, ok := mdv.DocumentOK()
	if !ok {
		return nil, errCorrupt("catalog id %d: md is not a document", id)
	}
	optv, err := md.LookupErr("options")
	if err != nil {
		return nil, errCorrupt("%s: missing md.options", m.NS)
	}
	if m.Options, ok = optv.DocumentOK(); !ok {
		return nil, errCorrupt("%s: md.options is not a document", m.NS)
	}
	m.Options = cloneDoc(m.Options)
	u, found, err := uuidFromOptions(m.Options)
	if err != nil || !found {
		return nil, errCorrupt("%s: bad or missing md.options.uuid", m.NS)
	}
	m.UUID = u
	decodeCollOptions(m)

	idxIdents := map[string]string{}
	if v, err := doc.LookupErr("idxIdent"); err == nil {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, errCorrupt("%s: idxIdent is not a document", m.NS)
		}
		elems, err := d.Elements()
		if err != nil {
			return nil, errCorrupt("%s: idxIdent: %v", m.NS, err)
		}
		for _, e := range elems {
			s, ok := e.Value().StringValueOK()
			if !ok {
				return nil, errCorrupt("%s: idxIdent.%s is not a string", m.NS, e.Key())
			}
			idxIdents[e.Key()] = s
		}
	}
	if v, err := md.LookupErr("indexes"); err == nil {
		arr, ok := v.ArrayOK()
		if !ok {
			return nil, errCorrupt("%s: md.indexes is not an array", m.NS)
		}
		vals, err := arr.Values()
		if err != nil {
			return nil, errCorrupt("%s: md.indexes: %v", m.NS, err)
		}
		for i, iv := range vals {
			d, ok := iv.DocumentOK()
			if !ok {
				return nil, errCorrupt("%s: md.indexes.%d is not a document", m.NS, i)
			}
			ix, err := decodeIndexEntry(d)
			if err != nil {
				return nil, errCorrupt("%s: md.indexes.%d: %v", m.NS, i, err)
			}
			if ix.Ident = idxIdents[ix.Name]; ix.Ident == "" {
				return nil, errCorrupt("%s: index %q has no idxIdent", m.NS, ix.Name)
			}
			m.Indexes = append(m.Indexes, ix)
		}
	}
	return m, nil
}

func decodeIndexEntry(d bsoncore.Document) (IndexMeta, error) {
	var ix IndexMeta
	sv, err := d.LookupErr("spec")
	if err != nil {
		return ix, errors.New("missing spec")
	}
	spec, ok := sv.DocumentOK()
	if !ok {
		return ix, errors.New("spec is not a document")
	}
	if err := decodeIndexSpec(&ix, cloneDoc(spec)); err != nil {
		return ix, err
	}
	if v, err := d.LookupErr("ready"); err == nil {
		ix.Ready, _ = v.BooleanOK()
	}
	if v, err := d.LookupErr("multikey"); err == nil {
		ix.Multikey, _ = v.BooleanOK()
	}
	if v, err := d.LookupErr("buildUUID"); err == nil {
		st, b, ok := v.BinaryOK()
		if !ok || st != bsonSubtypeUUID || len(b) != 16 {
			return ix, errors.New("bad buildUUID")
		}
		var u UUID
		copy(u[:], b)
		ix.BuildUUID = &u
	}
	if v, err := d.LookupErr("multikeyPaths"); err == nil {
		pd, ok := v.DocumentOK()
		if !ok {
			return ix, errors.New("multikeyPaths is not a document")
		}
		fields := keyFields(ix.KeyPattern)
		ix.MultikeyPaths = make([][]bool, len(fields))
		for i, f := range fields {
			pv, err := pd.LookupErr(f)
			if err != nil {
				ix.MultikeyPaths[i] = make([]bool, pathLen(f))
				continue
			}
			_, b, ok := pv.BinaryOK()
			if !ok {
				return ix, fmt.Errorf("multikeyPaths.%s is not binary", f)
			}
			comps := make([]bool, len(b))
			for j, c := range b {
				comps[j] = c != 0
			}
			ix.MultikeyPaths[i] = comps
		}
	}
	return ix, nil
}

// decodeIndexSpec fills the spec-derived fields of ix from spec (which ix then owns).
func decodeIndexSpec(ix *IndexMeta, spec bsoncore.Document) error {
	ix.Spec = spec
	name, ok := lookupString(spec, "name")
	if !ok || name == "" {
		return errors.New("index spec has no name")
	}
	ix.Name = name
	kv, err := spec.LookupErr("key")
	if err != nil {
		return errors.New("index spec has no key")
	}
	if ix.KeyPattern, ok = kv.DocumentOK(); !ok {
		return errors.New("index key pattern is not a document")
	}
	if v, err := spec.LookupErr("v"); err == nil {
		if n, ok := v.AsInt64OK(); ok {
			ix.Version = int32(n)
		}
	}
	ix.Unique = lookupTruthy(spec, "unique")
	ix.Sparse = lookupTruthy(spec, "sparse")
	ix.Hidden = lookupTruthy(spec, "hidden")
	if v, err := spec.LookupErr("partialFilterExpression"); err == nil {
		ix.PartialFilterExpression, _ = v.DocumentOK()
	}
	if v, err := spec.LookupErr("collation"); err == nil {
		ix.Collation, _ = v.DocumentOK()
	}
	if v, err := spec.LookupErr("expireAfterSeconds"); err == nil {
		if n, ok := v.AsInt64OK(); ok {
			ix.ExpireAfterSeconds = &n
		} else if f, ok := v.DoubleOK(); ok {
			n := int64(f)
			ix.ExpireAfterSeconds = &n
		}
	}
	return nil
}

// decodeCollOptions fills the option-derived convenience fields of m.
func decodeCollOptions(m *CollectionMeta) {
	m.Capped = lookupTruthy(m.Options, "capped")
	m.PreAndPostImages = false
	if v, err := m.Options.LookupErr("changeStreamPreAndPostImages"); err == nil {
		if d, ok := v.DocumentOK(); ok {
			m.PreAndPostImages = lookupTruthy(d, "enabled")
		}
	}
	if v, err := m.Options.LookupErr("clusteredIndex"); err == nil {
		if _, isDoc := v.DocumentOK(); isDoc {
			m.Clustered = true
		} else {
			m.Clustered = truthy(v)
		}
	}
}

// uuidFromOptions extracts options.uuid.
func uuidFromOptions(opts bsoncore.Document) (UUID, bool, error) {
	var u UUID
	if len(opts) == 0 {
		return u, false, nil
	}
	v, err := opts.LookupErr("uuid")
	if err != nil {
		return u, false, nil
	}
	st, b, ok := v.BinaryOK()
	if !ok || st != bsonSubtypeUUID || len(b) != 16 {
		return u, true, fmt.Errorf("options.uuid must be a UUID (BinData subtype 4)")
	}
	copy(u[:], b)
	return u, true, nil
}

// buildOptions returns {uuid: u, <opts without uuid>}.
func buildOptions(u UUID, opts bsoncore.Document) (bsoncore.Document, error) {
	idx, dst := bsoncore.AppendDocumentStart(make([]byte, 0, len(opts)+32))
	dst = bsoncore.AppendBinaryElement(dst, "uuid", bsonSubtypeUUID, u[:])
	if len(opts) > 0 {
		elems, err := opts.Elements()
		if err != nil {
			return nil, err
		}
		for _, e := range elems {
			if e.Key() == "uuid" {
				continue
			}
			dst = append(dst, e...)
		}
	}
	dst, err := bsoncore.AppendDocumentEnd(dst, idx)
	return dst, err
}

// normalizeIndexSpec returns spec reordered as {v, key, name, <rest>} with v defaulted to 2
// and any legacy ns field removed, as MongoDB stores it.
func normalizeIndexSpec(spec bsoncore.Document) (bsoncore.Document, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	elems, err := spec.Elements()
	if err != nil {
		return nil, err
	}
	idx, dst := bsoncore.AppendDocumentStart(make([]byte, 0, len(spec)+16))
	if v, err := spec.LookupErr("v"); err == nil {
		n, ok := v.AsInt64OK()
		if !ok || (n != 1 && n != 2) {
			return nil, fmt.Errorf("index version must be 1 or 2")
		}
		dst = bsoncore.AppendInt32Element(dst, "v", int32(n))
	} else {
		dst = bsoncore.AppendInt32Element(dst, "v", 2)
	}
	for _, want := range []string{"key", "name"} {
		for _, e := range elems {
			if e.Key() == want {
				dst = append(dst, e...)
			}
		}
	}
	for _, e := range elems {
		switch e.Key() {
		case "v", "key", "name", "ns":
			continue
		}
		dst = append(dst, e...)
	}
	return bsoncore.AppendDocumentEnd(dst, idx)
}

// keyFields returns the field names of a key pattern in order.
func keyFields(kp bsoncore.Document) []string {
	elems, err := kp.Elements()
	if err != nil {
		return nil
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		out[i] = e.Key()
	}
	return out
}

// pathLen is the number of dotted components in a field path.
func pathLen(f string) int {
	n := 1
	for i := 0; i < len(f); i++ {
		if f[i] == '.' {
			n++
		}
	}
	return n
}

// emptyMultikeyPaths returns all-false multikey paths for kp.
func emptyMultikeyPaths(kp bsoncore.Document) [][]bool {
	fields := keyFields(kp)
	out := make([][]bool, len(fields))
	for i, f := range fields {
		out[i] = make([]bool, pathLen(f))
	}
	return out
}

func lookupString(d bsoncore.Document, key string) (string, bool) {
	v, err := d.LookupErr(key)
	if err != nil {
		return "", false
	}
	return v.StringValueOK()
}

// truthy is MongoDB's "safeBool": booleans as themselves, numbers by != 0, anything else
// present counts as true except null/undefined.
func truthy(v bsoncore.Value) bool {
	switch v.Type {
	case bsoncore.TypeBoolean:
		b, _ := v.BooleanOK()
		return b
	case bsoncore.TypeNull, bsoncore.TypeUndefined:
		return false
	}
	if v.IsNumber() {
		f, ok := v.AsFloat64OK()
		return ok && f != 0
	}
	return true
}

func lookupTruthy(d bsoncore.Document, key string) bool {
	if len(d) == 0 {
		return false
	}
	v, err := d.LookupErr(key)
	return err == nil && truthy(v)
}

func cloneDoc(d bsoncore.Document) bsoncore.Document {
	if d == nil {
		return nil
	}
	return append(bsoncore.Document(nil), d...)
}

func itoa(i int) string { return strconv.Itoa(i) }

// cloneMeta returns a copy of m whose Indexes slice (and multikey paths) may be modified.
func cloneMeta(m *CollectionMeta) *CollectionMeta {
	c := *m
	c.Indexes = make([]IndexMeta, len(m.Indexes))
	copy(c.Indexes, m.Indexes)
	for i := range c.Indexes {
		c.Indexes[i].MultikeyPaths = clonePaths(c.Indexes[i].MultikeyPaths)
	}
	return &c
}

func clonePaths(p [][]bool) [][]bool {
	if p == nil {
		return nil
	}
	out := make([][]bool, len(p))
	for i := range p {
		out[i] = append([]bool(nil), p[i]...)
	}
	return out
}

// unionMultikey merges (multikey, paths) into ix and reports whether ix changed.
func unionMultikey(ix *IndexMeta, multikey bool, paths [][]bool) bool {
	changed := false
	if multikey && !ix.Multikey {
		ix.Multikey = true
		changed = true
	}
	if ix.MultikeyPaths == nil || paths == nil {
		return changed
	}
	for i := range paths {
		if i >= len(ix.MultikeyPaths) {
			break
		}
		for j, b := range paths[i] {
			if !b {
				continue
			}
			for len(ix.MultikeyPaths[i]) <= j {
				ix.MultikeyPaths[i] = append(ix.MultikeyPaths[i], false)
			}
			if !ix.MultikeyPaths[i][j] {
				ix.MultikeyPaths[i][j] = true
				changed = true
			}
		}
	}
	return changed
}

// coversMultikey reports whether ix already records (multikey, paths).
func coversMultikey(ix *IndexMeta, multikey bool, paths [][]bool) bool {
	if multikey && !ix.Multikey {
		return false
	}
	if ix.MultikeyPaths == nil || paths == nil {
		return true
	}
	for i := range paths {
		for j, b := range paths[i] {
			if b && (i >= len(ix.MultikeyPaths) || j >= len(ix.MultikeyPaths[i]) || !ix.MultikeyPaths[i][j]) {
				return false
			}
		}
	}
	return true
}
