package commands

import (
	"bytes"
	"context"
	"math"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	collpkg "humongo/internal/collation"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/service"
)

func addCreate(r *service.Registry) {
	add(r, &service.Command{
		Name:    "create",
		Auth:    service.AuthCreate(false),
		Handler: runCreate,
		Help:    "explicitly creates a collection\n{ create: <string>[, capped: <bool>, size: <collSizeInBytes>, max: <nDocs>] }",
		Writes:  true,
	})
}

// ddlCreateFields are create's IDL fields (everything else but generic arguments is 40415).
var ddlCreateFields = []string{
	"capped", "size", "max", "autoIndexId", "idIndex", "storageEngine", "indexOptionDefaults",
	"validator", "validationLevel", "validationAction", "collation", "viewOn", "pipeline",
	"timeseries", "clusteredIndex", "expireAfterSeconds", "changeStreamPreAndPostImages",
	"encryptedFields", "temp", "flags", "recordPreImages",
}

// runCreate creates a collection. MongoDB 7.0 answers ok when the collection already exists
// with identical options, NamespaceExists (48) when the options differ.
func runCreate(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	ns, err := ddlCollectionNS(env, cmd)
	if err != nil {
		return nil, err
	}
	if err := checkStrict(cmd, "create", ddlCreateFields...); err != nil {
		return nil, err
	}
	if lookup(cmd, "viewOn").Type != 0 || lookup(cmd, "pipeline").Type != 0 {
		if txnStmtOf(ctx) != nil {
			return nil, mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot create a view in a multi-document transaction.")
		}
		return viewCreate(ctx, env, ns, cmd)
	}
	opts, err := ddlParseCreateOptions(cmd)
	if err != nil {
		return nil, err
	}
	if lookup(opts, ddlPreAndPostImagesField).Type != 0 {
		if err := ddlCheckPreAndPostImagesAllowed(ns); err != nil {
			return nil, err
		}
	}
	if err := validValidateOptions(ns, cmd); err != nil {
		return nil, err
	}
	if _, _, isView, err := viewLookup(ctx, env, ns); err != nil {
		return nil, err
	} else if isView {
		return nil, mongoerr.Newf(mongoerr.NamespaceExists, "Namespace %s already exists", ns)
	}
	op := db.NewOp(ctx)
	defer op.Close()
	if op.InTxn() {
		// In a transaction the collection must not exist yet, whatever its options
		// (MongoDB's create inside a transaction); it is created in the transaction's unit.
		if err := txnCheckLocalReadConcern(op, "create a collection"); err != nil {
			return nil, err
		}
		if _, ok := op.Catalog().ByNS(ns); ok {
			return nil, mongoerr.Newf(mongoerr.NamespaceExists, "Collection %s already exists.", ns)
		}
		if err := op.DDL(ctx, ns, func() error { return ddlCreateCollection(op, ns, opts) }); err != nil {
			return nil, err
		}
		return emptyDoc, nil
	}
	err = op.DDL(ctx, ns, func() error {
		if m, ok := db.Catalog.Latest().ByNS(ns); ok {
			existing := operation.UserOptions(m)
			if bytes.Equal(existing, opts) {
				return nil
			}
			return mongoerr.Newf(mongoerr.NamespaceExists,
				"namespace %s already exists, but with different options: %s", ns, existing)
		}
		return ddlCreateCollection(op, ns, opts)
	})
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// ddlCreateCollection creates ns with normalised options inside op's open unit. Clustered
// collections get the catalog entry with their clusteredIndex option and (from the catalog,
// so that secondaries applying the create get it too) a regular unique _id index that
// enforces the cluster key's uniqueness and serves _id lookups (listIndexes shows it as the
// clustered index).
func ddlCreateCollection(op *operation.Context, ns string, opts bsoncore.Document) error {
	m, err := op.DB.Catalog.CreateCollection(op.RU, ns, opts)
	if err != nil {
		return err
	}
	return op.LogCreate(m)
}

// ddlClusteredIDSpec is the internal _id index spec of a clustered collection with options
// opts. A collection-level expireAfterSeconds is carried on it, so the index package's TTL
// monitor expires documents by their _id date exactly as MongoDB's clustered TTL does.
func ddlClusteredIDSpec(opts bsoncore.Document) bsoncore.Document {
	v := lookup(opts, "expireAfterSeconds")
	if v.Type == 0 {
		return ddlIDIndexSpec
	}
	return ddlSetField(ddlIDIndexSpec, "expireAfterSeconds", v)
}

// ddlParseCreateOptions validates create's options and returns them in MongoDB's canonical
// order (CollectionOptions::toBSON), without uuid, so that an identical create compares equal
// byte for byte with the stored options.
func ddlParseCreateOptions(cmd bsoncore.Document) (bsoncore.Document, error) {
	const c = "create"
	capped, err := ddlBoolArg(c, "capped", lookup(cmd, "capped"))
	if err != nil {
		return nil, err
	}
	var size, maxDocs int64
	hasSize, hasMax := false, false
	if v := lookup(cmd, "size"); v.Type != 0 {
		if size, err = ddlSafeLong(c, "size", v); err != nil {
			return nil, err
		}
		// create's IDL validates size with {gte: 1} (51024) before CollectionOptions sees it.
		if size < 1 {
			return nil, mongoerr.Newf(mongoerr.Location51024, "BSON field 'size' value must be >= 1, actual value '%d'", size)
		}
		// MongoDB rounds capped sizes up to a multiple of 256 bytes.
		size = (size + 0xff) &^ 0xff
		hasSize = true
	}
	if v := lookup(cmd, "max"); v.Type != 0 {
		if maxDocs, err = ddlSafeLong(c, "max", v); err != nil {
			return nil, err
		}
		if maxDocs >= math.MaxInt32 {
			return nil, mongoerr.New(mongoerr.BadValue, "max in a capped collection has to be < 2^31 or not set")
		}
		hasMax = true
	}
	if capped && !hasSize {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "the 'size' field is required when 'capped' is true")
	}
	if !capped && (hasSize || hasMax) {
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"the 'capped' field needs to be true when either the 'size' or 'max' fields are present")
	}
	if v := lookup(cmd, "timeseries"); v.Type != 0 {
		return nil, mongoerr.New(mongoerr.NotImplemented, "time-series collections are not supported yet")
	}
	if v := lookup(cmd, "encryptedFields"); v.Type != 0 {
		return nil, mongoerr.New(mongoerr.NotImplemented, "queryable encryption is not supported")
	}
	storageEngine, err := findDocArg(c, "storageEngine", lookup(cmd, "storageEngine"))
	if err != nil {
		return nil, err
	}
	indexOptionDefaults, err := findDocArg(c, "indexOptionDefaults", lookup(cmd, "indexOptionDefaults"))
	if err != nil {
		return nil, err
	}
	validator, err := findDocArg(c, "validator", lookup(cmd, "validator"))
	if err != nil {
		return nil, err
	}
	collation, err := findDocArg(c, "collation", lookup(cmd, "collation"))
	if err != nil {
		return nil, err
	}
	if collation != nil {
		// Stored normalised (every option spelled out), as MongoDB does; the simple
		// collation is the default and is not stored.
		c, err := collpkg.Parse(collation)
		if err != nil {
			return nil, err
		}
		collation = nil
		if c != nil {
			collation = c.Spec()
		}
	}
	idIndex, err := findDocArg(c, "idIndex", lookup(cmd, "idIndex"))
	if err != nil {
		return nil, err
	}
	preImages := false
	if v := lookup(cmd, ddlPreAndPostImagesField); v.Type != 0 {
		if preImages, err = ddlParsePreAndPostImages(c, v); err != nil {
			return nil, err
		}
	}
	level, err := ddlEnumArg(c, "validationLevel", lookup(cmd, "validationLevel"), "off", "strict", "moderate")
	if err != nil {
		return nil, err
	}
	action, err := ddlEnumArg(c, "validationAction", lookup(cmd, "validationAction"), "error", "warn")
	if err != nil {
		return nil, err
	}
	autoIndexID := lookup(cmd, "autoIndexId")
	if autoIndexID.Type != 0 {
		if _, err := ddlBoolArg(c, "autoIndexId", autoIndexID); err != nil {
			return nil, err
		}
	}

	var clustered bsoncore.Document
	if v := lookup(cmd, "clusteredIndex"); v.Type != 0 {
		ci, ok := v.DocumentOK()
		if !ok {
			if v.Type == bsoncore.TypeBoolean {
				return nil, mongoerr.New(mongoerr.Location5979703,
					"The 'clusteredIndex' legacy format {clusteredIndex: <bool>} is only supported for specific internal collections and vice versa")
			}
			return nil, typeMismatch(c, "clusteredIndex", v.Type, "bool", "object")
		}
		if clustered, err = ddlParseClusteredIndex(ci); err != nil {
			return nil, err
		}
		if capped {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "Clustered collections cannot be capped")
		}
		if idIndex != nil {
			return nil, mongoerr.New(mongoerr.InvalidOptions,
				"The 'clusteredIndex' option is not supported with the 'idIndex' option")
		}
		if autoIndexID.Type != 0 && !truthy(autoIndexID) {
			return nil, mongoerr.New(mongoerr.Location6026501,
				"The 'clusteredIndex' option does not support {autoIndexId: false}")
		}
	}
	var expire *int64
	if v := lookup(cmd, "expireAfterSeconds"); v.Type != 0 {
		n, err := ddlSafeLong(c, "expireAfterSeconds", v)
		if err != nil {
			return nil, err
		}
		if clustered == nil {
			return nil, mongoerr.New(mongoerr.InvalidOptions,
				"'expireAfterSeconds' can be used only for clustered collections or timeseries collections")
		}
		if n < 0 {
			return nil, mongoerr.Newf(mongoerr.InvalidOptions,
				"TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
		}
		expire = &n
	}

	return doc(func(b []byte) []byte {
		if capped {
			b = bsoncore.AppendBooleanElement(b, "capped", true)
			b = ddlAppendNumber(b, "size", size)
			if hasMax && maxDocs > 0 {
				b = ddlAppendNumber(b, "max", maxDocs)
			}
		}
		if autoIndexID.Type != 0 {
			b = bsoncore.AppendBooleanElement(b, "autoIndexId", truthy(autoIndexID))
		}
		if preImages {
			// Stored only when enabled (MongoDB's CollectionOptions::appendBSON).
			b = bsoncore.AppendDocumentElement(b, ddlPreAndPostImagesField, ddlPreAndPostImagesOption)
		}
		if len(storageEngine) > 5 {
			b = bsoncore.AppendDocumentElement(b, "storageEngine", storageEngine)
		}
		if len(indexOptionDefaults) > 5 {
			b = bsoncore.AppendDocumentElement(b, "indexOptionDefaults", indexOptionDefaults)
		}
		if len(validator) > 5 {
			b = bsoncore.AppendDocumentElement(b, "validator", validator)
		}
		if level != "" {
			b = bsoncore.AppendStringElement(b, "validationLevel", level)
		}
		if action != "" {
			b = bsoncore.AppendStringElement(b, "validationAction", action)
		}
		if collation != nil {
			b = bsoncore.AppendDocumentElement(b, "collation", collation)
		}
		if clustered != nil {
			b = bsoncore.AppendDocumentElement(b, "clusteredIndex", clustered)
		}
		if expire != nil {
			b = bsoncore.AppendInt64Element(b, "expireAfterSeconds", *expire)
		}
		return b
	}), nil
}

// ddlParseClusteredIndex validates {key: {_id: 1}, unique: true, name?, v?} and returns it in
// the form MongoDB stores: {v: 2, key: {_id: 1}, name, unique: true}.
func ddlParseClusteredIndex(ci bsoncore.Document) (bsoncore.Document, error) {
	elems, err := ci.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid clusteredIndex: %v", err)
	}
	name := catalog.IDIndexName
	var key bsoncore.Document
	unique, hasUnique := false, false
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "key":
			d, ok := v.DocumentOK()
			if !ok {
				return nil, typeMismatch("create.clusteredIndex", "key", v.Type, "object")
			}
			key = d
		case "unique":
			if unique, err = ddlBoolArg("create.clusteredIndex", "unique", v); err != nil {
				return nil, err
			}
			hasUnique = true
		case "name":
			s, ok := v.StringValueOK()
			if !ok {
				return nil, typeMismatch("create.clusteredIndex", "name", v.Type, "string")
			}
			name = s
		case "v":
			n, err := intArg("create.clusteredIndex", "v", v)
			if err != nil {
				return nil, err
			}
			if n != 2 {
				return nil, mongoerr.Newf(mongoerr.Location5979704,
					"Invalid clusteredIndex specification %s; cannot create a clusteredIndex with v=%d", ci, n)
			}
		default:
			return nil, mongoerr.Newf(codeUnknownField, "BSON field 'create.clusteredIndex.%s' is an unknown field.", e.Key())
		}
	}
	if key == nil {
		return nil, mongoerr.New(codeMissingField, "BSON field 'clusteredIndex.key' is missing but a required field")
	}
	if !hasUnique {
		return nil, mongoerr.New(codeMissingField, "BSON field 'clusteredIndex.unique' is missing but a required field")
	}
	if !unique {
		return nil, mongoerr.New(mongoerr.Location5979700, "The clusteredIndex option requires unique: true to be specified")
	}
	kelems, _ := key.Elements()
	if len(kelems) != 1 || kelems[0].Key() != "_id" {
		return nil, mongoerr.New(mongoerr.InvalidIndexSpecificationOption,
			"The clusteredIndex option is only supported for key: {_id: 1}")
	}
	if f, ok := service.AsFloat(kelems[0].Value()); !ok || f != 1 {
		return nil, mongoerr.New(mongoerr.InvalidIndexSpecificationOption,
			"The clusteredIndex option is only supported for key: {_id: 1}")
	}
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendInt32Element(b, "v", 2)
		b = bsoncore.AppendDocumentElement(b, "key", ddlIDKey)
		b = bsoncore.AppendStringElement(b, "name", name)
		return bsoncore.AppendBooleanElement(b, "unique", true)
	}), nil
}

// ddlSafeLong parses an IDL "safeInt64" field.
func ddlSafeLong(cmdName, field string, v bsoncore.Value) (int64, error) {
	switch v.Type {
	case bsoncore.TypeInt32, bsoncore.TypeInt64:
		return intArg(cmdName, field, v)
	case bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		f, ok := service.AsFloat(v)
		if !ok || math.IsNaN(f) {
			return 0, mongoerr.Newf(mongoerr.BadValue, "BSON field '%s.%s' must be a number", cmdName, field)
		}
		return int64(f), nil // truncated, as safeNumberLong does
	}
	return 0, typeMismatch(cmdName, field, v.Type, "int", "long", "double", "decimal")
}

// ddlEnumArg parses an optional IDL enum string.
func ddlEnumArg(cmdName, field string, v bsoncore.Value, allowed ...string) (string, error) {
	if v.Type == 0 {
		return "", nil
	}
	s, ok := v.StringValueOK()
	if !ok {
		return "", typeMismatch(cmdName, field, v.Type, "string")
	}
	for _, a := range allowed {
		if s == a {
			return s, nil
		}
	}
	return "", mongoerr.Newf(mongoerr.BadValue, "Enumeration value '%s' for field '%s.%s' is not a valid value.", s, cmdName, field)
}
