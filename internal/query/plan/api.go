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
	// Vars are the command's "let" variables (constants), which the filter's $expr and the
	// projection's expressions may reference as $$name. A Matcher passed in must have
	// been parsed with them.
	Vars map[string]bsoncore.Value
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
	// InTransaction: the plan reads through a multi-document transaction's unit, which it
	// may neither roll back nor leave. After a prepare conflict that the unit's view cannot
	// be refreshed past (the transaction reads without a timestamp, or its writes are not
	// isolated) the plan waits for the prepared transaction to resolve, then fails with
	// WriteConflict (the client retries the whole transaction). Otherwise such a conflict is
	// returned as is, for the caller's retry loop to roll back and wait.
	InTransaction bool
	// Ownership, when set, hides the documents this node does not own (orphans of a sharded
	// collection): a SHARDING_FILTER stage drops them. nil is an unsharded read, no stage.
	Ownership OwnershipFilter
}

// OwnershipFilter is a predicate on the shard key: KeyBelongs reports whether the document
// whose shard key doc carries belongs to this node (MongoDB's ScopedCollectionFilter). It reads
// only the shard key fields of doc, which is a whole document: SHARDING_FILTER sits above the
// FETCH, so plans under an ownership filter are never covered (MongoDB evaluates the filter on
// the index key when the index holds the whole shard key; that is left for later).
// Implementations must be safe to call from the one goroutine running the plan.
type OwnershipFilter interface {
	KeyBelongs(doc bsoncore.Document) bool
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

// Count counts the documents req matches (CountOnly is forced), after Skip and Limit. With
// no filter and no hint it answers from the record store's counts without reading (MongoDB's
// fast count); never under an ownership filter, where those counts would include orphans.
func Count(ctx context.Context, ru *storage.RecoveryUnit, meta *catalog.CollectionMeta,
	coll *index.Collection, req Request) (int64, error) {
	req.CountOnly = true
	if meta == nil || coll == nil {
		return 0, nil
	}
	if fastCountable(req) {
		n, _ := coll.RecordStore().Counts()
		n = max(n-req.Skip, 0)
		if req.Limit > 0 {
			n = min(n, req.Limit)
		}
		return n, nil
	}
	ex, err := Prepare(ctx, ru, meta, coll, req)
	if err != nil {
		return 0, err
	}
	defer ex.Close()
	var n int64
	for {
		_, _, ok, err := ex.Next(ctx)
		if err != nil {
			return 0, err
		}
		if !ok {
			return n, nil
		}
		n++
	}
}

// fastCountable: the count is the collection's record count (adjusted by skip and limit).
func fastCountable(req Request) bool {
	return isEmptyDoc(req.Filter) && req.Matcher == nil && req.Hint.Type == 0 && req.Ownership == nil
}

// Stats are an executor's running totals.
type Stats struct {
	NReturned, KeysExamined, DocsExamined int64
}
