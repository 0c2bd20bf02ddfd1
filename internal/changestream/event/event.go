package event

import (
	"errors"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
)

// Event types (operationType).
const (
	OpInsert                   = "insert"
	OpUpdate                   = "update"
	OpReplace                  = "replace"
	OpDelete                   = "delete"
	OpDrop                     = "drop"
	OpRename                   = "rename"
	OpDropDatabase             = "dropDatabase"
	OpInvalidate               = "invalidate"
	OpCreate                   = "create"
	OpCreateIndexes            = "createIndexes"
	OpDropIndexes              = "dropIndexes"
	OpModify                   = "modify"
	OpShardCollection          = "shardCollection"
	OpReshardCollection        = "reshardCollection"
	OpRefineCollectionShardKey = "refineCollectionShardKey"
)

// Options are a stream's settings that shape its events.
type Options struct {
	Scope Scope
	// ShowExpandedEvents adds the DDL events (create, createIndexes, dropIndexes, modify,
	// shardCollection, reshardCollection, refineCollectionShardKey), collectionUUID,
	// operationDescription and updateDescription.disambiguatedPaths.
	ShowExpandedEvents bool
	// ShowSystemEvents lets database and cluster streams see system.js, system.resharding.*
	// and system.buckets.*, and a chunk migration's create and createIndexes.
	ShowSystemEvents bool
	// ShowRawUpdateDescription replaces updateDescription with rawUpdateDescription, the
	// entry's o ({$v: 2, diff}).
	ShowRawUpdateDescription bool
	// MakeID builds an event's _id (its resume token) from its Token; nil: events have no _id.
	MakeID func(t *Token) (bsoncore.Document, error)
	// ShardKey returns the shard key pattern ({a: 1, "b.c": "hashed"}) of the collection
	// with the given UUID, nil if it is not sharded; an insert's documentKey is then the
	// shard key's fields (dotted names, values as stored, null when missing) followed by _id
	// (MongoDB's DocumentKey::getShardKeyAndId). nil: documentKey is {_id}. Only consulted
	// for inserts whose entry has no o2 (Humongo's writer logs none).
	ShardKey func(uuid catalog.UUID) bsoncore.Document
}

// Token is what the resume token of an event is made of; the caller encodes it with
// internal/changestream/resumetoken (MongoDB's ResumeTokenData, version 2, event token).
type Token struct {
	ClusterTime optime.Timestamp
	TxnOpIndex  int
	// UUID of the collection; nil for dropDatabase (encoded as null).
	UUID *catalog.UUID
	// EventID is MongoDB's v2 eventIdentifier: {operationType, documentKey} for events with a
	// documentKey, {operationType, operationDescription} otherwise (operationDescription left
	// out when the event has none: drop, dropDatabase). It is computed whether or not the
	// stream shows operationDescription.
	EventID bsoncore.Value
	// FromInvalidate marks the invalidate event's token (otherwise equal to the token of the
	// event that caused it).
	FromInvalidate bool
}

// Event is one change event.
type Event struct {
	// Doc is the finished event document in MongoDB's field order (package comment).
	Doc           bsoncore.Document
	OperationType string
	ClusterTime   optime.Timestamp
	TxnOpIndex    int
	Token         Token
	// Invalidate is set on the invalidate event, which always follows the event that ends
	// the stream in the same Transform result; the stream closes after returning it.
	Invalidate bool
	// NeedsPreImage: update, replace and delete events, which take fullDocumentBeforeChange
	// when the stream asks for it (pre-image key: UUID, ApplyOpsTS, ApplyOpsIndex).
	NeedsPreImage bool
	// NeedsPostImage: update events, which take fullDocument when the stream asks for it
	// (updateLookup by DocumentKey, or the pre-image with the diff applied).
	NeedsPostImage bool
	// DocumentKey of a document event (insert, update, replace, delete).
	DocumentKey bsoncore.Document
	UUID        catalog.UUID
	HasUUID     bool
	// NS is "db.coll" ("db" for dropDatabase; the source namespace for rename).
	NS string
	// ApplyOpsTS is the timestamp of the entry holding the operation (the entry's own for an
	// operation outside a transaction) and ApplyOpsIndex its index in that entry's applyOps
	// (0 outside): MongoDB's ChangeStreamPreImageId {nsUUID, ts, applyOpsIndex}.
	ApplyOpsTS    optime.Timestamp
	ApplyOpsIndex int
	// RawUpdate is an update event's entry o ({$v: 2, diff}), to compute a post image from
	// the pre-image.
	RawUpdate bsoncore.Document
}

// ErrNeedsTxnEntries is Transform's answer for an entry whose events need the earlier entries
// of its transaction (NeedsTxnEntries): use ReadTxnChain and TransformTxn.
var ErrNeedsTxnEntries = errors.New("change stream event: the entry commits a transaction whose earlier entries are needed (ReadTxnChain, TransformTxn)")

// Transform appends the events of entry for a stream with options o: none, one, several
// (the operations of a committed applyOps entry), or an event followed by invalidate. An
// entry that NeedsTxnEntries fails with ErrNeedsTxnEntries.
func Transform(dst []Event, entry *oplog.Entry, o *Options) ([]Event, error) {
	if _, ok := NeedsTxnEntries(entry); ok {
		return dst, ErrNeedsTxnEntries
	}
	return TransformTxn(dst, entry, nil, o)
}

// entryOp is one operation: a whole entry, or an operation of an applyOps entry.
type entryOp struct {
	op          string
	ns          string
	ui          catalog.UUID
	hasUI       bool
	o, o2       bsoncore.Document
	hasO2       bool
	fromMigrate bool
}

func topOp(e *oplog.Entry) entryOp {
	op := entryOp{op: e.Op, ns: e.NS, ui: e.UI, hasUI: e.HasUI, o: e.O, o2: e.O2, hasO2: e.O2 != nil}
	op.fromMigrate, _ = e.Raw.Lookup("fromMigrate").BooleanOK()
	return op
}

// eventCtx is what an operation's events take from the entry that commits it.
type eventCtx struct {
	ts   optime.Timestamp
	wall bsoncore.Value
	// inTxn: an operation unwound from applyOps (txnOpIndex, lsid and txnNumber apply).
	inTxn         bool
	lsid          bsoncore.Document
	txnNumber     int64
	hasTxnNumber  bool
	txnOpIndex    int
	applyOpsTS    optime.Timestamp
	applyOpsIndex int
}

func wallOf(e *oplog.Entry) (bsoncore.Value, error) {
	v, err := e.Raw.LookupErr("wall")
	if err != nil || v.Type != bsoncore.TypeDateTime {
		return bsoncore.Value{}, wrongType("wall", "date", v)
	}
	return v, nil
}

func wrongType(field, want string, v bsoncore.Value) error {
	got := "missing"
	if v.Type != 0 {
		got = bsonutil.TypeName(v.Type)
	}
	return mongoerr.Newf(mongoerr.Location40532, "Entry field %q should be %s, found: %s", field, want, got)
}

// transformOp appends op's events (none if the stream does not see it).
func transformOp(dst []Event, op *entryOp, c *eventCtx, o *Options) ([]Event, error) {
	if op.fromMigrate && !(o.ShowSystemEvents && migrationDDL(op, o)) {
		return dst, nil
	}
	b := builder{o: o, c: c, op: op}
	ok, err := b.describe()
	if err != nil || !ok {
		return dst, err
	}
	if !o.ShowExpandedEvents && !classic(b.opType) {
		return dst, nil
	}
	ev, err := b.build()
	if err != nil {
		return dst, err
	}
	dst = append(dst, ev)
	if o.invalidatedBy(b.opType) {
		inv, err := invalidate(&ev, c, o)
		if err != nil {
			return dst, err
		}
		dst = append(dst, inv)
	}
	return dst, nil
}

// migrationDDL reports whether a fromMigrate entry is one MongoDB shows with
// showSystemEvents: a create or createIndexes in the stream's scope
// (buildFromMigrateSystemOpFilter).
func migrationDDL(op *entryOp, o *Options) bool {
	if op.op != "c" {
		return false
	}
	db, ok := strings.CutSuffix(op.ns, ".$cmd")
	if !ok || !o.cmdDBMatches(db) {
		return false
	}
	for _, k := range [...]string{"create", "createIndexes"} {
		if c, ok := op.o.Lookup(k).StringValueOK(); ok && o.collMatches(c) {
			return true
		}
	}
	return false
}

// builder makes one event: describe decides what it is, build writes it.
type builder struct {
	o  *Options
	c  *eventCtx
	op *entryOp

	opType      string
	db, coll    string // the event's ns (coll "" for dropDatabase)
	fullDoc     bsoncore.Document
	docKey      bsoncore.Document
	opDesc      bsoncore.Document // nil: none
	renameTo    bsoncore.Document // rename's to: {db, coll}
	updateDiff  bsoncore.Document // update: o.diff
	stateBefore bsoncore.Document // modify
	view        bool              // a view's event (describeView): no collectionUUID
}

// describe fills in the event op makes for the stream; false when it makes none.
func (b *builder) describe() (bool, error) {
	op, o := b.op, b.o
	switch op.op {
	case "i", "u", "d":
		if db, ok := strings.CutSuffix(op.ns, ".system.views"); ok && o.Scope.Kind != ScopeCollection {
			return b.describeView(db)
		}
		if !o.nsMatches(op.ns) {
			return false, nil
		}
		if !op.hasUI {
			return false, mongoerr.Newf(mongoerr.Location7826901, "Saw a CRUD op without a UUID (%s on %s)", op.op, op.ns)
		}
		b.db, b.coll = catalog.SplitNS(op.ns)
		return true, b.describeCRUD()
	case "c":
		return b.describeCommand()
	case "n":
		return b.describeNoop()
	}
	return false, nil
}

// describeView turns a write to <db>.system.views (a view's definition, _id its namespace)
// into the DDL event of the view, for expanded database and cluster streams, as MongoDB's
// ChangeStreamViewDefinitionEventTransformation: an insert is a create, an update (logged
// as a replacement) a modify, both with the definition as operationDescription, a delete a
// drop.
func (b *builder) describeView(db string) (bool, error) {
	op, o := b.op, b.o
	if !o.ShowExpandedEvents || !o.cmdDBMatches(db) {
		return false, nil
	}
	view, ok := op.o.Lookup("_id").StringValueOK()
	if !ok {
		return false, nil
	}
	vdb, vcoll := catalog.SplitNS(view)
	if vdb != db || !o.collMatches(vcoll) {
		return false, nil
	}
	b.db, b.coll, b.view = vdb, vcoll, true
	switch op.op {
	case "i":
		b.opType = OpCreate
		b.opDesc = without(op.o, "_id")
	case "u":
		if _, err := op.o.LookupErr("_id"); err != nil {
			return false, nil // not a replacement: no definition to report
		}
		b.opType = OpModify
		b.opDesc = without(op.o, "_id")
	case "d":
		b.opType = OpDrop
	}
	return true, nil
}

func (b *builder) describeCRUD() error {
	op := b.op
	switch op.op {
	case "i":
		b.opType = OpInsert
		b.fullDoc = op.o
		b.docKey = b.insertKey()
	case "d":
		b.opType = OpDelete
		b.docKey = op.o
	case "u":
		b.docKey = op.o2
		if !op.hasO2 {
			b.docKey = emptyDoc
		}
		vv, err := op.o.LookupErr("$v")
		if err != nil {
			if _, err := op.o.LookupErr("_id"); err != nil {
				return mongoerr.New(mongoerr.Location6741200, "Unsupported or missing oplog version, $v: missing")
			}
			b.opType = OpReplace
			b.fullDoc = op.o
			return nil
		}
		if v, ok := bsonutil.ToInt64Exact(vv); !ok || v != 2 {
			return mongoerr.Newf(mongoerr.Location6741200, "Unsupported or missing oplog version, $v: %s", bsonutil.FormatElement("", vv))
		}
		dv, err := op.o.LookupErr("diff")
		if err != nil || dv.Type != bsoncore.TypeEmbeddedDocument {
			return wrongType("o.diff", "object", dv)
		}
		b.opType = OpUpdate
		b.updateDiff = dv.Document()
	}
	return nil
}

var emptyDoc = bsoncore.Document{5, 0, 0, 0, 0}

// insertKey is an insert's documentKey: o2 when the entry has one (MongoDB 5.3+ entries
// written by a shard), else the shard key's fields then _id.
func (b *builder) insertKey() bsoncore.Document {
	op := b.op
	if op.hasO2 {
		return op.o2
	}
	id, hasID := op.o.Lookup("_id"), true
	if id.Type == 0 {
		hasID = false
	}
	var pattern bsoncore.Document
	if b.o.ShardKey != nil {
		pattern = b.o.ShardKey(op.ui)
	}
	start, d := bsoncore.AppendDocumentStart(nil)
	idInKey := false
	if els, err := pattern.Elements(); err == nil {
		for _, e := range els {
			k := e.Key()
			if k == "_id" {
				idInKey = true
			}
			v, ok := bsonutil.Lookup(op.o, k)
			if !ok {
				v = bsoncore.Value{Type: bsoncore.TypeNull}
			}
			d = bsoncore.AppendValueElement(d, k, v)
		}
	}
	if hasID && !idInKey {
		d = bsoncore.AppendValueElement(d, "_id", id)
	}
	d, _ = bsoncore.AppendDocumentEnd(d, start)
	return d
}

// describeCommand handles a command entry (c on "<db>.$cmd"); applyOps never gets here.
func (b *builder) describeCommand() (bool, error) {
	op, o := b.op, b.o
	db, ok := strings.CutSuffix(op.ns, ".$cmd")
	if !ok || db == "" {
		return false, nil
	}
	first, err := op.o.IndexErr(0)
	if err != nil {
		return false, nil
	}
	name := first.Key()
	// target: the collection the command names, which must be a string.
	target, isStr := first.Value().StringValueOK()
	b.db = db
	switch name {
	case "renameCollection":
		// Humongo logs a cross-database rename on the source database: match either side
		// whatever the entry's $cmd namespace (package comment, known deviations).
		to, ok := op.o.Lookup("to").StringValueOK()
		if !isStr || !ok || !(o.nsMatches(target) || o.nsMatches(to)) {
			return false, nil
		}
		b.opType = OpRename
		b.db, b.coll = catalog.SplitNS(target)
		tdb, tcoll := catalog.SplitNS(to)
		b.renameTo = nsDoc(tdb, tcoll)
		b.opDesc = renameDesc(op.o, b.renameTo)
		return true, nil
	case "dropDatabase":
		if o.Scope.Kind == ScopeCollection || !o.cmdDBMatches(db) {
			return false, nil
		}
		b.opType = OpDropDatabase
		return true, nil
	}
	if !o.cmdDBMatches(db) {
		return false, nil
	}
	switch name {
	case "drop", "create", "createIndexes", "commitIndexBuild", "dropIndexes", "collMod":
		if !isStr || !o.collMatches(target) {
			return false, nil
		}
	default:
		return false, nil
	}
	b.coll = target
	switch name {
	case "drop":
		b.opType = OpDrop
	case "create":
		b.opType = OpCreate
		b.opDesc = without(op.o, "create")
	case "createIndexes":
		// One index per entry: wrapped in indexes for the shape of commitIndexBuild's.
		b.opType = OpCreateIndexes
		b.opDesc = indexesDesc(without(op.o, "createIndexes"))
	case "commitIndexBuild":
		b.opType = OpCreateIndexes
		start, d := bsoncore.AppendDocumentStart(nil)
		if v, err := op.o.LookupErr("indexes"); err == nil {
			d = bsoncore.AppendValueElement(d, "indexes", v)
		}
		b.opDesc, _ = bsoncore.AppendDocumentEnd(d, start)
	case "dropIndexes":
		// o2 is the dropped index's spec.
		b.opType = OpDropIndexes
		spec := emptyDoc
		if op.hasO2 {
			spec = without(op.o2, "dropIndexes")
		}
		b.opDesc = indexesDesc(spec)
	case "collMod":
		b.opType = OpModify
		b.opDesc = without(op.o, "collMod")
		start, d := bsoncore.AppendDocumentStart(nil)
		if op.hasO2 {
			if v, err := op.o2.LookupErr("collectionOptions_old"); err == nil {
				d = bsoncore.AppendValueElement(d, "collectionOptions", v)
			}
			if v, err := op.o2.LookupErr("indexOptions_old"); err == nil {
				d = bsoncore.AppendValueElement(d, "indexOptions", v)
			}
		}
		b.stateBefore, _ = bsoncore.AppendDocumentEnd(d, start)
	}
	return true, nil
}

// describeNoop handles the sharding no-ops MongoDB turns into events: {op: "n", ns, ui,
// o: {msg}, o2: {<event>: ns, ...}}.
func (b *builder) describeNoop() (bool, error) {
	op := b.op
	if !op.hasO2 || !b.o.nsMatches(op.ns) {
		return false, nil
	}
	for _, t := range [...]string{OpShardCollection, OpRefineCollectionShardKey, OpReshardCollection} {
		if _, err := op.o2.LookupErr(t); err == nil {
			b.opType = t
			b.db, b.coll = catalog.SplitNS(op.ns)
			b.opDesc = without(op.o2, t)
			return true, nil
		}
	}
	return false, nil
}

// without returns d minus its fields named skip (MongoDB's copyDocExceptFields).
func without(d bsoncore.Document, skip ...string) bsoncore.Document {
	els, _ := d.Elements()
	start, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(d)))
next:
	for _, e := range els {
		for _, s := range skip {
			if e.Key() == s {
				continue next
			}
		}
		out = append(out, e...)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, start)
	return out
}

func indexesDesc(spec bsoncore.Document) bsoncore.Document {
	start, d := bsoncore.AppendDocumentStart(nil)
	ai, d := bsoncore.AppendArrayElementStart(d, "indexes")
	d = bsoncore.AppendDocumentElement(d, "0", spec)
	d, _ = bsoncore.AppendArrayEnd(d, ai)
	d, _ = bsoncore.AppendDocumentEnd(d, start)
	return d
}

// renameDesc is a rename's operationDescription: o without renameCollection and stayTemp,
// with to as {db, coll} (in to's place: {to, dropTarget?}).
func renameDesc(o, to bsoncore.Document) bsoncore.Document {
	els, _ := o.Elements()
	start, d := bsoncore.AppendDocumentStart(nil)
	for _, e := range els {
		switch e.Key() {
		case "renameCollection", "stayTemp":
		case "to":
			d = bsoncore.AppendDocumentElement(d, "to", to)
		default:
			d = append(d, e...)
		}
	}
	d, _ = bsoncore.AppendDocumentEnd(d, start)
	return d
}

// nsDoc is an event's ns: {db, coll}, coll left out when empty.
func nsDoc(db, coll string) bsoncore.Document {
	start, d := bsoncore.AppendDocumentStart(nil)
	d = bsoncore.AppendStringElement(d, "db", db)
	if coll != "" {
		d = bsoncore.AppendStringElement(d, "coll", coll)
	}
	d, _ = bsoncore.AppendDocumentEnd(d, start)
	return d
}

// eventID is the v2 eventIdentifier (ResumeTokenData's constructor).
func eventID(opType string, docKey, opDesc bsoncore.Document) bsoncore.Value {
	start, d := bsoncore.AppendDocumentStart(nil)
	d = bsoncore.AppendStringElement(d, "operationType", opType)
	switch {
	case docKey != nil:
		d = bsoncore.AppendDocumentElement(d, "documentKey", docKey)
	case opDesc != nil:
		d = bsoncore.AppendDocumentElement(d, "operationDescription", opDesc)
	}
	d, _ = bsoncore.AppendDocumentEnd(d, start)
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d}
}

// build writes the event document in MongoDB's field order (package comment).
func (b *builder) build() (Event, error) {
	op, c, o := b.op, b.c, b.o
	ev := Event{
		OperationType: b.opType,
		ClusterTime:   c.ts,
		TxnOpIndex:    c.txnOpIndex,
		DocumentKey:   b.docKey,
		UUID:          op.ui,
		HasUUID:       op.hasUI && b.opType != OpDropDatabase,
		NS:            b.db,
		ApplyOpsTS:    c.applyOpsTS,
		ApplyOpsIndex: c.applyOpsIndex,
	}
	if b.coll != "" {
		ev.NS = b.db + "." + b.coll
	}
	switch b.opType {
	case OpUpdate:
		ev.NeedsPreImage, ev.NeedsPostImage = true, true
		ev.RawUpdate = op.o
	case OpReplace, OpDelete:
		ev.NeedsPreImage = true
	}
	ev.Token = Token{ClusterTime: c.ts, TxnOpIndex: c.txnOpIndex, EventID: eventID(b.opType, b.docKey, b.opDesc)}
	if ev.HasUUID {
		u := ev.UUID
		ev.Token.UUID = &u
	}

	start, d := bsoncore.AppendDocumentStart(make([]byte, 0, 256+len(b.fullDoc)+len(op.o)))
	if b.renameTo != nil {
		d = bsoncore.AppendDocumentElement(d, "to", b.renameTo)
	}
	if c.inTxn {
		if c.hasTxnNumber {
			d = bsoncore.AppendInt64Element(d, "txnNumber", c.txnNumber)
		}
		if c.lsid != nil {
			d = bsoncore.AppendDocumentElement(d, "lsid", c.lsid)
		}
	}
	d, err := appendID(d, &ev.Token, o)
	if err != nil {
		return Event{}, err
	}
	d = bsoncore.AppendStringElement(d, "operationType", b.opType)
	d = bsoncore.AppendTimestampElement(d, "clusterTime", c.ts.Secs(), c.ts.Inc())
	if o.ShowExpandedEvents && ev.HasUUID && !b.view {
		d = bsoncore.AppendBinaryElement(d, "collectionUUID", 4, ev.UUID[:])
	}
	d = bsoncore.AppendValueElement(d, "wallTime", c.wall)
	if b.fullDoc != nil {
		d = bsoncore.AppendDocumentElement(d, "fullDocument", b.fullDoc)
	}
	d = bsoncore.AppendDocumentElement(d, "ns", nsDoc(b.db, b.coll))
	if b.docKey != nil {
		d = bsoncore.AppendDocumentElement(d, "documentKey", b.docKey)
	}
	if o.ShowExpandedEvents && b.opDesc != nil {
		d = bsoncore.AppendDocumentElement(d, "operationDescription", b.opDesc)
	}
	if b.updateDiff != nil {
		if o.ShowRawUpdateDescription {
			d = bsoncore.AppendDocumentElement(d, "rawUpdateDescription", op.o)
		} else if d, err = appendUpdateDescription(d, b.updateDiff, o.ShowExpandedEvents); err != nil {
			return Event{}, err
		}
	}
	if b.stateBefore != nil {
		d = bsoncore.AppendDocumentElement(d, "stateBeforeChange", b.stateBefore)
	}
	ev.Doc, err = bsoncore.AppendDocumentEnd(d, start)
	return ev, err
}

func appendID(d []byte, t *Token, o *Options) ([]byte, error) {
	if o.MakeID == nil {
		return d, nil
	}
	id, err := o.MakeID(t)
	if err != nil {
		return nil, err
	}
	return bsoncore.AppendDocumentElement(d, "_id", id), nil
}

// invalidate is the event that follows ev when ev ends the stream: {_id, operationType:
// "invalidate", clusterTime, wallTime}, its token ev's with FromInvalidate
// (DocumentSourceChangeStreamCheckInvalidate).
func invalidate(ev *Event, c *eventCtx, o *Options) (Event, error) {
	inv := Event{
		OperationType: OpInvalidate,
		ClusterTime:   ev.ClusterTime,
		TxnOpIndex:    ev.TxnOpIndex,
		Token:         ev.Token,
		Invalidate:    true,
		UUID:          ev.UUID,
		HasUUID:       ev.HasUUID,
		NS:            ev.NS,
		ApplyOpsTS:    ev.ApplyOpsTS,
		ApplyOpsIndex: ev.ApplyOpsIndex,
	}
	inv.Token.FromInvalidate = true
	start, d := bsoncore.AppendDocumentStart(nil)
	d, err := appendID(d, &inv.Token, o)
	if err != nil {
		return Event{}, err
	}
	d = bsoncore.AppendStringElement(d, "operationType", OpInvalidate)
	d = bsoncore.AppendTimestampElement(d, "clusterTime", c.ts.Secs(), c.ts.Inc())
	d = bsoncore.AppendValueElement(d, "wallTime", c.wall)
	inv.Doc, err = bsoncore.AppendDocumentEnd(d, start)
	return inv, err
}
