package commands

import (
	"context"
	"errors"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/collation"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query"
	"humongo/internal/repl/indexbuild"
	"humongo/internal/service"
	"humongo/internal/storage"
)

func addCreateIndexes(r *service.Registry) {
	add(r, &service.Command{
		Name:    "createIndexes",
		Auth:    service.AuthOnNS(auth.CreateIndex),
		Handler: runCreateIndexes,
		Help:    "create indexes for a collection",
		Writes:  true,
	})
}

// ddlIndexSpecFields are the fields MongoDB 7.0 accepts in an index specification.
var ddlIndexSpecFields = map[string]bool{
	"key": true, "name": true, "v": true, "unique": true, "sparse": true,
	"partialFilterExpression": true, "expireAfterSeconds": true, "hidden": true, "collation": true,
	"background": true, "ns": true, "storageEngine": true, "weights": true, "default_language": true,
	"language_override": true, "textIndexVersion": true, "2dsphereIndexVersion": true, "bits": true,
	"min": true, "max": true, "bucketSize": true, "wildcardProjection": true,
	"coarsestIndexedLevel": true, "finestIndexedLevel": true, "dropDups": true, "clustered": true,
	"prepareUnique": true, "originalSpec": true, "columnstoreProjection": true,
	"columnstoreCompressor": true,
}

// errDDLDryRun rolls back a unit that only checked index specs against the catalog.
var errDDLDryRun = errors.New("ddl: dry run")

// runCreateIndexes creates indexes, creating the collection first when it does not exist.
// On an empty collection the indexes are added ready in one unit; otherwise each is built with
// index.Build (hybrid build: writers are blocked only while the build registers and commits,
// through the collection X lock) or, on a node that logs its writes, as one two-phase build
// (startIndexBuild / commitIndexBuild after the commitQuorum's votes; repl/indexbuild).
// Specs identical to existing indexes are skipped; when nothing is new the reply carries
// note: "all indexes already exist".
func runCreateIndexes(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "createIndexes"
	ns, err := ddlCollectionNS(env, cmd)
	if err != nil {
		return nil, err
	}
	if err := checkStrict(cmd, c, "indexes", "commitQuorum", "ignoreUnknownIndexOptions",
		"isTimeseriesNamespace", "collectionUUID"); err != nil {
		return nil, err
	}
	ignoreUnknown, err := ddlBoolArg(c, "ignoreUnknownIndexOptions", lookup(cmd, "ignoreUnknownIndexOptions"))
	if err != nil {
		return nil, err
	}
	// A replica-set member builds on non-empty collections with the two-phase protocol
	// (repl/indexbuild); a standalone builds alone and accepts no commitQuorum.
	logger, replicated := indexbuild.Replicated(db)
	quorum := indexbuild.DefaultCommitQuorum
	if v := lookup(cmd, "commitQuorum"); v.Type != 0 {
		if !replicated {
			return nil, mongoerr.New(mongoerr.BadValue, "Standalones can't specify commitQuorum")
		}
		if quorum, err = indexbuild.ParseCommitQuorum(v); err != nil {
			return nil, err
		}
	}
	var builds *indexbuild.Coordinator
	if replicated {
		builds = indexbuild.Of(db)
		builds.Attach(env.State.Repl)
		if err := builds.CheckQuorum(quorum); err != nil {
			return nil, err
		}
	}
	iv := lookup(cmd, "indexes")
	if iv.Type == 0 {
		return nil, mongoerr.New(codeMissingField, "BSON field 'createIndexes.indexes' is missing but a required field")
	}
	arr, ok := iv.ArrayOK()
	if iv.Type == bsoncore.TypeNull {
		// MongoDB reads the field as an object (BSONElement::embeddedObjectUserCheck) before
		// the IDL type check.
		return nil, mongoerr.New(mongoerr.Location10065, "invalid parameter: expected an object (indexes)")
	}
	if !ok {
		return nil, typeMismatch(c, "indexes", iv.Type, "array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid indexes array: %v", err)
	}
	if len(vals) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Must specify at least one index to create")
	}
	specs := make([]bsoncore.Document, 0, len(vals))
	for i, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, typeMismatch(c, "indexes."+itoa(int64(i)), v.Type, "object")
		}
		spec, err := ddlValidateIndexSpec(db, d, ignoreUnknown)
		if err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}

	op := db.NewOp(ctx)
	defer op.Close()
	if op.InTxn() {
		return txnCreateIndexes(ctx, op, ns, cmd, vals, specs)
	}
	created := false
	if _, ok := db.Catalog.Latest().ByNS(ns); !ok {
		if ddlIsSystem(ns) {
			return nil, mongoerr.Newf(mongoerr.IllegalOperation, "cannot write to '%s'", ns)
		}
		err := op.DDL(ctx, ns, func() error {
			if _, ok := db.Catalog.Latest().ByNS(ns); ok {
				return nil
			}
			created = true
			return ddlCreateCollection(op, ns, nil)
		})
		if err != nil {
			return nil, err
		}
	}

	// Under the collection X lock: sort specs into existing and new, and add the new ones
	// ready directly when the collection is empty.
	var before int
	var toBuild, added []bsoncore.Document
	var inProgress []string // requested indexes that another build is still building
	addedReady := false
	err = op.DDL(ctx, ns, func() error {
		toBuild, added, addedReady, inProgress = toBuild[:0], added[:0], false, inProgress[:0]
		m, ok := db.Catalog.Latest().ByNS(ns)
		if !ok {
			return mongoerr.Newf(mongoerr.NamespaceNotFound, "Collection %s was dropped", ns)
		}
		if v := lookup(cmd, "collectionUUID"); v.Type != 0 {
			if err := ddlCheckCollectionUUID(v, m); err != nil {
				return err
			}
		}
		before = len(ddlIndexSpecs(m))
		for i, s := range specs {
			if m.Clustered && ddlIsIDKey(lookup(s, "key")) {
				continue // the clustered index already covers {_id: 1}
			}
			if def := lookup(m.Options, "collation"); def.Type == bsoncore.TypeEmbeddedDocument &&
				lookup(vals[i].Document(), "collation").Type == 0 {
				// An index without a collation of its own takes the collection default.
				s = ddlSetField(s, "collation", def)
				specs[i] = s
			}
			im, err := db.Catalog.AddIndex(op.RU, ns, s, true, nil)
			if mongoerr.Is(err, mongoerr.IndexAlreadyExists) {
				name, _ := lookup(s, "name").StringValueOK()
				if ix, ok := m.Index(name); ok && !ix.Ready {
					inProgress = append(inProgress, name)
				}
				continue
			}
			if err != nil {
				return err
			}
			toBuild = append(toBuild, s)
			added = append(added, im.Spec)
		}
		if len(toBuild) == 0 {
			return errDDLDryRun
		}
		if n, _ := db.Engine.Counts(m.Ident); n == 0 {
			if empty, err := ddlCollectionEmpty(op, m); err != nil || empty {
				addedReady = empty
				if err != nil {
					return err
				}
				return db.Observer().OnCreateIndexes(op.RU, ns, m.UUID, added)
			}
		}
		return errDDLDryRun
	})
	if err != nil && !errors.Is(err, errDDLDryRun) {
		return nil, err
	}
	twoPhase := false
	switch {
	case len(toBuild) > 0 && !addedReady && replicated:
		twoPhase = true
		if err := builds.TwoPhaseBuild(ctx, logger, ns, toBuild, quorum); err != nil {
			return nil, err
		}
	case len(toBuild) > 0 && !addedReady:
		if err := ddlBuildIndexes(ctx, db, ns, toBuild); err != nil {
			return nil, err
		}
	}
	if len(inProgress) > 0 && replicated {
		// MongoDB waits for a running build of the same indexes and reports its outcome.
		if err := indexbuild.WaitForBuilds(ctx, db, ns, inProgress); err != nil {
			return nil, err
		}
	}
	after := before
	if m, ok := db.Catalog.Latest().ByNS(ns); ok {
		after = len(ddlIndexSpecs(m))
	}
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendInt32Element(b, "numIndexesBefore", int32(before))
		b = bsoncore.AppendInt32Element(b, "numIndexesAfter", int32(after))
		if len(toBuild) == 0 {
			if created {
				b = bsoncore.AppendBooleanElement(b, "createdCollectionAutomatically", true)
			}
			return bsoncore.AppendStringElement(b, "note", "all indexes already exist")
		}
		b = bsoncore.AppendBooleanElement(b, "createdCollectionAutomatically", created)
		if twoPhase {
			b = quorum.Append(b, "commitQuorum")
		}
		return b
	}), nil
}

// ddlCollectionEmpty checks that the collection has no record visible to op's snapshot.
// Index builds see every record, orphans included (MongoDB indexes orphans: a migration back or
// the range deleter finds them through the indexes), so this is an operation.ReadAllRecords scan and
// index.Build reads the record store unfiltered.
func ddlCollectionEmpty(op *operation.Context, m *catalog.CollectionMeta) (bool, error) {
	rd, err := op.ReadLocked(m.NS, m, nil, operation.ReadAllRecords) // the read seam (operation/read.go)
	if err != nil {
		return false, err
	}
	cur, err := rd.Records(op.RU)
	if err != nil {
		return false, err
	}
	defer cur.Close()
	_, _, ok := cur.Next()
	return !ok, cur.Err()
}

// ddlBuildIndexes builds specs one after the other on a non-empty collection. If one fails,
// the ones this command built already are dropped again, so the command is all or nothing.
func ddlBuildIndexes(ctx context.Context, db *operation.DB, ns string, specs []bsoncore.Document) error {
	m, ok := db.Catalog.Latest().ByNS(ns)
	if !ok {
		return mongoerr.Newf(mongoerr.NamespaceNotFound, "Collection %s was dropped", ns)
	}
	coll, err := db.Colls.ByUUID(m.UUID)
	if err != nil {
		return err
	}
	opts := index.BuildOptions{TempDir: db.TempDir, BlockWrites: indexbuild.BlockWrites(db, ns, coll)}
	var built []string
	for _, s := range specs {
		im, _, err := index.Build(ctx, coll, s, opts)
		if mongoerr.Is(err, mongoerr.IndexAlreadyExists) {
			continue // a concurrent createIndexes built the same index meanwhile
		}
		if err != nil {
			ddlDropBuilt(ctx, db, ns, built)
			return err
		}
		if im != nil {
			built = append(built, im.Name)
		}
	}
	return nil
}

func ddlDropBuilt(ctx context.Context, db *operation.DB, ns string, names []string) {
	if len(names) == 0 {
		return
	}
	op := db.NewOp(ctx)
	defer op.Close()
	err := op.DDL(context.WithoutCancel(ctx), ns, func() error {
		for _, n := range names {
			if err := db.Catalog.DropIndex(op.RU, ns, n); err != nil && !mongoerr.Is(err, mongoerr.IndexNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Log.Warn("dropping indexes of a failed createIndexes", "ns", ns, "err", err)
	}
}

// ddlIsIDKey reports whether v is the key pattern {_id: 1} (or -1).
func ddlIsIDKey(v bsoncore.Value) bool {
	d, ok := v.DocumentOK()
	if !ok {
		return false
	}
	elems, err := d.Elements()
	return err == nil && len(elems) == 1 && elems[0].Key() == "_id"
}

// ddlValidateIndexSpec checks one createIndexes spec the way index_key_validate does and
// returns it ready for the catalog (unknown fields removed when ignoreUnknown is set, a
// simple collation dropped).
func ddlValidateIndexSpec(db *operation.DB, spec bsoncore.Document, ignoreUnknown bool) (bsoncore.Document, error) {
	elems, err := spec.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid index specification: %v", err)
	}
	var key bsoncore.Document
	var name string
	hasName := false
	strip := map[string]bool{}
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if !ddlIndexSpecFields[k] {
			if ignoreUnknown {
				strip[k] = true
				continue
			}
			return nil, mongoerr.Newf(mongoerr.InvalidIndexSpecificationOption,
				"The field '%s' is not valid for an index specification. Specification: %s", k, spec)
		}
		switch k {
		case "key":
			d, ok := v.DocumentOK()
			if !ok {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "The field 'key' must be an object, but got %s", bsonutil.TypeName(v.Type))
			}
			key = d
		case "name":
			s, ok := v.StringValueOK()
			if !ok {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "The field 'name' must be a string, but got %s", bsonutil.TypeName(v.Type))
			}
			name, hasName = s, true
		case "v":
			n, ok := service.AsFloat(v)
			if !ok {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "The field 'v' must be a number, but got %s", bsonutil.TypeName(v.Type))
			}
			if n != 1 && n != 2 {
				return nil, mongoerr.Newf(mongoerr.CannotCreateIndex,
					"Invalid index specification %s; cannot create an index with v=%v", spec, n)
			}
		case "unique", "sparse", "hidden", "background", "prepareUnique":
			if _, err := ddlBoolArg("createIndexes.indexes", k, v); err != nil {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "The field '%s' must be a boolean, but got %s", k, bsonutil.TypeName(v.Type))
			}
		case "partialFilterExpression", "collation", "storageEngine", "wildcardProjection":
			if _, ok := v.DocumentOK(); !ok {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "The field '%s' must be an object, but got %s", k, bsonutil.TypeName(v.Type))
			}
		case "expireAfterSeconds":
			f, ok := service.AsFloat(v)
			if !ok {
				return nil, mongoerr.Newf(mongoerr.CannotCreateIndex,
					"TTL index 'expireAfterSeconds' option must be numeric, but received a type of '%s'. Index spec: %s",
					bsonutil.TypeName(v.Type), spec)
			}
			if math.IsNaN(f) || f < 0 || f > math.MaxInt32 {
				return nil, mongoerr.Newf(mongoerr.CannotCreateIndex,
					"TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number. Index spec: %s", spec)
			}
		}
	}
	if key == nil {
		return nil, mongoerr.Newf(mongoerr.FailedToParse,
			"Error in specification %s :: caused by :: The 'key' field is a required property of an index specification", spec)
	}
	if !hasName {
		return nil, mongoerr.Newf(mongoerr.FailedToParse,
			"Error in specification %s :: caused by :: The 'name' field is a required property of an index specification", spec)
	}
	if name == "" {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "The index name cannot be empty")
	}
	if err := ddlValidateKeyPattern(key); err != nil {
		return nil, err
	}
	unique := truthy(lookup(spec, "unique"))
	sparse := truthy(lookup(spec, "sparse"))
	partial, hasPartial := lookup(spec, "partialFilterExpression").DocumentOK()
	if hasPartial && sparse {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "cannot mix \"partialFilterExpression\" and \"sparse\" options")
	}
	isID := ddlIsIDKey(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: key})
	if isID {
		for _, f := range []string{"sparse", "partialFilterExpression", "expireAfterSeconds", "hidden", "unique"} {
			if f == "hidden" {
				continue // checked below
			}
			if lookup(spec, f).Type != 0 {
				return nil, mongoerr.Newf(mongoerr.InvalidIndexSpecificationOption,
					"The field '%s' is not valid for an _id index specification. Specification: %s", f, spec)
			}
		}
		if truthy(lookup(spec, "hidden")) {
			return nil, mongoerr.New(mongoerr.BadValue, "can't hide _id index")
		}
	}
	if lookup(spec, "expireAfterSeconds").Type != 0 {
		if n, _ := key.Elements(); len(n) > 1 {
			return nil, mongoerr.Newf(mongoerr.CannotCreateIndex,
				"TTL indexes are single-field indexes, compound indexes do not support TTL. Index spec: %s", spec)
		}
	}
	gen, err := index.NewKeyGenerator(key, index.KeyGenOptions{Sparse: sparse})
	if err != nil {
		return nil, err
	}
	if gen.IsHashed() && unique {
		return nil, mongoerr.New(mongoerr.Location16764, "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.")
	}
	if hasPartial {
		if _, err := query.ParsePartialFilter(partial); err != nil {
			return nil, err
		}
	}
	if cd, ok := lookup(spec, "collation").DocumentOK(); ok {
		c, err := collation.Parse(cd)
		if err != nil {
			return nil, err
		}
		if c == nil {
			strip["collation"] = true
		} else {
			// Stored normalised, as listIndexes shows it.
			spec = ddlSetField(spec, "collation", bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: c.Spec()})
		}
	}
	if len(strip) == 0 {
		return spec, nil
	}
	keys := make([]string, 0, len(strip))
	for k := range strip {
		keys = append(keys, k)
	}
	return ddlWithout(spec, keys...), nil
}

// ddlValidateKeyPattern rejects index types Humongo does not implement yet with a clear
// CannotCreateIndex, before the key generator reports other key pattern errors.
func ddlValidateKeyPattern(key bsoncore.Document) error {
	elems, err := key.Elements()
	if err != nil {
		return mongoerr.Newf(mongoerr.CannotCreateIndex, "invalid index key pattern: %v", err)
	}
	for _, e := range elems {
		if e.Key() == "$**" || strings.HasSuffix(e.Key(), ".$**") {
			return mongoerr.New(mongoerr.CannotCreateIndex, "wildcard indexes are not supported yet")
		}
		v := e.Value()
		switch v.Type {
		case bsoncore.TypeString:
			switch s := v.StringValue(); s {
			case "hashed":
			case "text", "2d", "2dsphere", "geoHaystack", "columnstore":
				return mongoerr.Newf(mongoerr.CannotCreateIndex, "%s indexes are not supported yet", s)
			default:
				return mongoerr.Newf(mongoerr.CannotCreateIndex, "Unknown index plugin '%s'", s)
			}
		case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		default:
			return mongoerr.Newf(mongoerr.CannotCreateIndex,
				"Values in v:2 index key pattern cannot be of type %s. Only numbers > 0, numbers < 0, and strings are allowed.",
				bsonutil.TypeName(v.Type))
		}
	}
	return nil
}

// txnCheckLocalReadConcern refuses explicit collection and index creation in a transaction
// whose read concern is not local (MongoDB answers InvalidOptions: the new catalog entry
// could not be read at the transaction's older snapshot).
func txnCheckLocalReadConcern(op *operation.Context, what string) error {
	if src, _ := op.RU.ReadSource(); src != storage.ReadNoTimestamp {
		return mongoerr.Newf(mongoerr.InvalidOptions,
			"Cannot %s in a multi-document transaction with a readConcern level other than 'local'", what)
	}
	return nil
}

// txnCreateIndexes is createIndexes inside a multi-document transaction, as MongoDB 7.0 runs
// it (create_indexes_cmd.cpp): on a collection that does not exist (created here, in the
// transaction) or that the transaction created and that is still empty, the indexes are
// added ready in the transaction's unit and logged in its applyOps entry; on any other
// collection only a request whose indexes all exist already succeeds, anything new is
// OperationNotSupportedInTransaction (it would need an index build and its exclusive lock).
func txnCreateIndexes(ctx context.Context, op *operation.Context, ns string, cmd bsoncore.Document, vals []bsoncore.Value, specs []bsoncore.Document) (bsoncore.Document, error) {
	db := op.DB
	if err := txnCheckLocalReadConcern(op, "create indexes"); err != nil {
		return nil, err
	}
	m, ok := op.Catalog().ByNS(ns)
	switch {
	case ok && !op.CreatedInTxn(ns):
		if v := lookup(cmd, "collectionUUID"); v.Type != 0 {
			if err := ddlCheckCollectionUUID(v, m); err != nil {
				return nil, err
			}
		}
		for _, s := range specs {
			exists, err := catalog.IndexExists(m, s)
			if err != nil {
				return nil, err
			}
			if !exists {
				return nil, mongoerr.Newf(mongoerr.OperationNotSupportedInTransaction,
					"Cannot create new indexes on existing collection %s in a multi-document transaction.", ns)
			}
		}
		n := int32(len(ddlIndexSpecs(m)))
		return doc(func(b []byte) []byte {
			b = bsoncore.AppendInt32Element(b, "numIndexesBefore", n)
			b = bsoncore.AppendInt32Element(b, "numIndexesAfter", n)
			return bsoncore.AppendStringElement(b, "note", "all indexes already exist")
		}), nil
	case !ok:
		if ddlIsSystem(ns) {
			return nil, mongoerr.Newf(mongoerr.IllegalOperation, "cannot write to '%s'", ns)
		}
		for _, s := range specs {
			if lookup(s, "clustered").Type != 0 {
				return nil, mongoerr.New(mongoerr.Code(6100900), "Cannot implicitly create a new collection with createIndex 'clustered' option")
			}
		}
		if err := op.DDL(ctx, ns, func() error { return ddlCreateCollection(op, ns, nil) }); err != nil {
			return nil, err
		}
	}
	var before, after int
	var added []bsoncore.Document
	err := op.DDL(ctx, ns, func() error {
		m, ok := op.Catalog().ByNS(ns)
		if !ok {
			return mongoerr.Newf(mongoerr.NamespaceNotFound, "Collection %s was dropped", ns)
		}
		if v := lookup(cmd, "collectionUUID"); v.Type != 0 {
			if err := ddlCheckCollectionUUID(v, m); err != nil {
				return err
			}
		}
		if empty, err := ddlCollectionEmpty(op, m); err != nil {
			return err
		} else if !empty {
			return mongoerr.Newf(mongoerr.OperationNotSupportedInTransaction,
				"Cannot create new indexes on non-empty collection %s in a multi-document transaction.", ns)
		}
		before = len(ddlIndexSpecs(m))
		for i, s := range specs {
			if m.Clustered && ddlIsIDKey(lookup(s, "key")) {
				continue // the clustered index already covers {_id: 1}
			}
			if def := lookup(m.Options, "collation"); def.Type == bsoncore.TypeEmbeddedDocument &&
				lookup(vals[i].Document(), "collation").Type == 0 {
				s = ddlSetField(s, "collation", def)
			}
			im, err := db.Catalog.AddIndex(op.RU, ns, s, true, nil)
			if mongoerr.Is(err, mongoerr.IndexAlreadyExists) {
				continue
			}
			if err != nil {
				return err
			}
			added = append(added, im.Spec)
		}
		after = before + len(added)
		if len(added) == 0 {
			return nil
		}
		return db.Observer().OnCreateIndexes(op.RU, ns, m.UUID, added)
	})
	if err != nil {
		return nil, err
	}
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendInt32Element(b, "numIndexesBefore", int32(before))
		b = bsoncore.AppendInt32Element(b, "numIndexesAfter", int32(after))
		// MongoDB reports true here whether this command or an earlier statement of the
		// transaction created the collection (runCreateIndexesOnNewCollection).
		b = bsoncore.AppendBooleanElement(b, "createdCollectionAutomatically", true)
		if len(added) == 0 {
			return bsoncore.AppendStringElement(b, "note", "all indexes already exist")
		}
		if len(added) < len(specs) {
			return bsoncore.AppendStringElement(b, "note", "index already exists")
		}
		return b
	}), nil
}
