package plan

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/collation"
	"humongo/internal/index"
	"humongo/internal/query"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// Verbosity is explain's verbosity.
type Verbosity string

const (
	QueryPlanner      Verbosity = "queryPlanner"
	ExecutionStats    Verbosity = "executionStats"
	AllPlansExecution Verbosity = "allPlansExecution"
)

// DefaultMaxBlockingSortBytes is internalQueryMaxBlockingSortMemoryUsageBytes' default.
const DefaultMaxBlockingSortBytes = 100 * 1024 * 1024

// Request is a query as the planner sees it. The command layer validates the command's field
// types; Prepare validates the semantics (sort spec, hint, min/max) and returns MongoDB's
// errors for bad values.
type Request struct {
	// NS is the namespace ("db.coll"), for explain and error messages.
	NS string
	// Filter is the raw filter (nil means {}); Matcher, when set, is its parsed form (Prepare
	// parses Filter with AllowExpr and AllowJSONSchema otherwise).
	Filter  bsoncore.Document
	Matcher *query.Matcher
	// Sort is the sort specification ({a: 1, b: -1}, {$natural: 1}, {x: {$meta: ...}}).
	Sort bsoncore.Document
	// Projection is the raw projection (nil means the whole document).
	Projection bsoncore.Document
	// Skip and Limit (0 = no limit) apply after sorting.
	Skip, Limit int64
	// Hint is an index name (string) or key pattern (document), or the zero Value.
	Hint bsoncore.Value
	// Min and Max bound the hinted index's keys (find's min/max; they require Hint).
	Min, Max bsoncore.Document
	// ReturnKey returns index keys instead of documents; ShowRecordID adds $recordId.
	ReturnKey, ShowRecordID bool
	// AllowDiskUse lets a blocking sort spill past MaxBlockingSortBytes (0 = the default).
	AllowDiskUse         bool
	MaxBlockingSortBytes int64
	// TempDir holds the sort spill files.
	TempDir string
	// Tailable asks for a tailable cursor (collection scan in natural order, no sort).
	Tailable bool
	// ForWrite plans for update/delete/findAndModify: no projection, each RecordId returned
	// at most once even if a write moves it within a scanned index range. WriteStage
	// ("UPDATE", "DELETE") wraps the plan's root in explain output.
	ForWrite   bool
	WriteStage string
	// CountOnly plans for the count command: explain shows a COUNT root stage.
	CountOnly bool
	// YieldEvery is the number of works between yields (0 = 1000; negative disables).
	YieldEvery int
	// Collation is the query's collation (the command's, or the collection default); nil is
	// the simple collation. A Matcher passed in must have been parsed with it. Strings
	// compare under it in the filter and the sort; an index serves string predicates and
	// sorts only when its collation is the same.
	Collation *collation.Collator
	// CollationSet says the command gave a collation (possibly the simple one, then
	// Collation is nil); otherwise Prepare applies the collection's default collation.
	CollationSet bool
}

// Target is one record an update/delete/findAndModify must act on; Doc is a private copy.
type Target struct {
	RID recordid.ID
	Doc bsoncore.Document
}

// Prepare plans req over the collection. meta and coll are nil when the collection does not
// exist (the plan is EOF). ru is the operation's RecoveryUnit; the Executor reads through it
// until Close. The caller holds the collection lock for as long as it calls Next and between
// Restore and Save.
//
// func Prepare(ctx context.Context, ru *storage.RecoveryUnit, meta *catalog.CollectionMeta,
//
//	coll *index.Collection, req Request) (*Executor, error)          — planner.go
//
// Executor methods (executor.go):
//
//	Next(ctx) (rid recordid.ID, doc bsoncore.Document, ok bool, err error)
//	    doc is valid until the next call; ok false at the end.
//	Save()                      before the RecoveryUnit abandons its snapshot (end of a batch, yield)
//	Restore(meta) error         after re-locking; QueryPlanKilled if the collection or index went away
//	Explain(v Verbosity) (queryPlanner, executionStats bsoncore.Document)
//	    executionStats is nil for QueryPlanner; run the executor to its end first for the others.
//	Stats() Stats               nReturned, keys/docs examined so far
//	Close()
var _ = prepareSig(Prepare)

type prepareSig func(ctx context.Context, ru *storage.RecoveryUnit, meta *catalog.CollectionMeta,
	coll *index.Collection, req Request) (*Executor, error)

// Targets plans req (ForWrite is forced) and collects every matching record in plan order,
// at most req.Limit of them (0 = all), with private copies of the documents. The Executor is
// returned for explain; it is exhausted and must be closed.
func Targets(ctx context.Context, ru *storage.RecoveryUnit, meta *catalog.CollectionMeta,
	coll *index.Collection, req Request) ([]Target, *Executor, error) {
	req.ForWrite = true
	ex, err := Prepare(ctx, ru, meta, coll, req)
	if err != nil {
		return nil, nil, err
	}
	var out []Target
	for {
		rid, doc, ok, err := ex.Next(ctx)
		if err != nil {
			ex.Close()
			return nil, nil, err
		}
		if !ok {
			return out, ex, nil
		}
		out = append(out, Target{RID: rid, Doc: append(bsoncore.Document(nil), doc...)})
	}
}

// Stats are an executor's running totals.
type Stats struct {
	NReturned, KeysExamined, DocsExamined int64
}
