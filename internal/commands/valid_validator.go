package commands

// Schema validation on the write path (issue 6 item 5; MongoDB's CollectionImpl::
// checkValidation and parseValidator). A collection's `validator` (query operators,
// $jsonSchema and $expr allowed), `validationLevel` (strict | moderate | off) and
// `validationAction` (error | warn) live in its catalog options. Every stored document an
// insert, update, findAndModify or upsert produces is checked against it unless the command
// sets bypassDocumentValidation. A failure is writeError 121 DocumentValidationFailure with
// errInfo {failingDocumentId, details} (valid_errinfo.go), or a logged warning under
// validationAction "warn".

import (
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query"
)

// validValidator is a collection's parsed validation settings.
type validValidator struct {
	raw      bsoncore.Document // the validator as stored
	matcher  *query.Matcher
	moderate bool // validationLevel "moderate"
	warn     bool // validationAction "warn"
}

// validCacheEntry is the parsed validator of one catalog version of a collection. v is nil
// when the collection validates nothing (no validator, or validationLevel "off"); err is the
// parse error of a stored validator that no longer parses (every write then fails with it, as
// in MongoDB).
type validCacheEntry struct {
	meta *catalog.CollectionMeta
	v    *validValidator
	err  error
}

// validCache is, per node, a map from collection UUID to the validator of the catalog
// version last seen. CollectionMeta is copy-on-write, so a pointer comparison tells whether
// the options may have changed (collMod publishes a new value): the validator is parsed once
// per version, not per write. Keyed by UUID rather than by meta pointer so that old versions
// are not kept alive; an entry of a dropped collection stays until the node closes (a few
// hundred bytes). Per node, not per process: replica-set members in one test process share
// collection UUIDs.
var validCache = operation.NewDecoration(func(*operation.DB) *sync.Map { return new(sync.Map) })

// validFor returns the validation settings of coll in its latest catalog version (nil when
// nothing is validated).
func validFor(db *operation.DB, coll *index.Collection) (*validValidator, error) {
	meta, ok := db.Catalog.Latest().ByUUID(coll.UUID())
	if !ok {
		return nil, nil
	}
	cache := validCache.Get(db)
	if e, ok := cache.Load(meta.UUID); ok {
		if ent := e.(*validCacheEntry); ent.meta == meta {
			return ent.v, ent.err
		}
	}
	ent := &validCacheEntry{meta: meta}
	ent.v, ent.err = validParse(meta.Options)
	cache.Store(meta.UUID, ent)
	return ent.v, ent.err
}

// validParse builds the validation settings from collection options.
func validParse(opts bsoncore.Document) (*validValidator, error) {
	vd, ok := lookup(opts, "validator").DocumentOK()
	if !ok || len(vd) <= 5 {
		return nil, nil
	}
	level, _ := lookup(opts, "validationLevel").StringValueOK()
	if level == "off" {
		return nil, nil
	}
	action, _ := lookup(opts, "validationAction").StringValueOK()
	m, err := validParseMatcher(vd)
	if err != nil {
		return nil, err
	}
	return &validValidator{raw: vd, matcher: m, moderate: level == "moderate", warn: action == "warn"}, nil
}

// validParseMatcher parses a validator the way parseValidator does: $jsonSchema and $expr
// are allowed; errors keep the matcher's code with MongoDB's prefix.
func validParseMatcher(vd bsoncore.Document) (*query.Matcher, error) {
	m, err := query.Parse(vd, query.ParseOptions{AllowExpr: true, AllowJSONSchema: true})
	if err != nil {
		me := writeToMongoErr(err)
		return nil, mongoerr.Newf(me.Code, "Parsing of collection validator failed :: caused by :: %s", me.Msg)
	}
	return m, nil
}

// validValidateOptions checks the validator a create or collMod command cmd sets on ns (if
// any: cmd's "validator" field). create and collMod call it before changing the catalog, so
// an invalid validator is rejected with the matcher's error instead of failing every later
// write.
func validValidateOptions(ns string, cmd bsoncore.Document) error {
	validator, ok := lookup(cmd, "validator").DocumentOK()
	if !ok || len(validator) <= 5 {
		return nil
	}
	db, coll, _ := strings.Cut(ns, ".")
	if strings.HasPrefix(coll, "system.") {
		return mongoerr.Newf(mongoerr.InvalidOptions, "Document validators not allowed on system collection %s", ns)
	}
	switch db {
	case "admin", "local", "config":
		return mongoerr.Newf(mongoerr.InvalidOptions,
			"Document validators are not allowed on collection %s in the %s internal database", ns, db)
	}
	_, err := validParseMatcher(validator)
	return err
}

// validMessage is MongoDB's errmsg for a validation failure.
const validMessage = "Document failed validation"

// validCheckDoc checks d, about to be stored in coll, against coll's validator. old is the
// document an update replaces (nil for inserts and upserts): under validationLevel
// "moderate" an update of a document that did not satisfy the validator is not checked.
// bypass is the command's bypassDocumentValidation. Under validationAction "warn" a failure
// is logged and the write goes ahead.
func validCheckDoc(op *operation.Context, coll *index.Collection, d, old bsoncore.Document, bypass bool) error {
	if bypass {
		return nil
	}
	v, err := validFor(op.DB, coll)
	if err != nil || v == nil {
		return err
	}
	ok, err := v.matcher.Matches(d)
	if err != nil || ok {
		return err
	}
	if v.moderate && old != nil {
		oldOK, err := v.matcher.Matches(old)
		if err != nil {
			return err
		}
		if !oldOK {
			return nil
		}
	}
	info := validErrInfo(v.raw, d)
	if v.warn {
		if l := op.DB.Log; l != nil {
			ns := ""
			if meta, ok := op.DB.Catalog.Latest().ByUUID(coll.UUID()); ok {
				ns = meta.NS
			}
			l.Warn("Document would fail validation", logv2.C(logv2.Storage), logv2.ID(20294),
				"namespace", ns, "document", logv2.BSON(d), "errInfo", logv2.BSON(info))
		}
		return nil
	}
	return mongoerr.New(mongoerr.DocumentValidationFailure, validMessage).
		WithInfo(doc(func(b []byte) []byte { return bsoncore.AppendDocumentElement(b, "errInfo", info) }))
}
