package rangedel

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/shardkey"
)

// TasksNS is the collection of a shard's range deletion tasks.
const TasksNS = "config.rangeDeletions"

// whenToClean values.
const (
	CleanNow     = "now"
	CleanDelayed = "delayed"
)

// Task is a config.rangeDeletions document (MongoDB 7.0's RangeDeletionTask,
// range_deletion_task.idl): {_id: migrationId, nss, collectionUuid, donorShardId,
// range: {min, max}, pending?, whenToClean, processing?, numOrphanDocs?, keyPattern,
// timestamp?, preMigrationShardVersion?}. Only the fields the deleter uses are decoded; Doc
// is the whole document.
type Task struct {
	ID             bsoncore.Value // the migration's UUID
	NS             string
	CollectionUUID catalog.UUID
	DonorShard     string
	Min, Max       bsoncore.Document
	Pending        bool
	WhenToClean    string
	KeyPattern     bsoncore.Document
	Doc            bsoncore.Document
}

// key identifies the task in memory (its _id's bytes).
func (t *Task) key() string { return string(t.ID.Data) }

// RangeString renders the task's range as MongoDB's ChunkRange::toString.
func (t *Task) RangeString() string {
	return "[" + bsonutil.FormatDoc(t.Min) + ", " + bsonutil.FormatDoc(t.Max) + ")"
}

// ParseTask decodes a config.rangeDeletions document; a document that is not one is
// FailedToParse (the deleter logs it and leaves it alone).
func ParseTask(doc bsoncore.Document) (Task, error) {
	t := Task{Doc: append(bsoncore.Document(nil), doc...)}
	doc = t.Doc
	bad := func(field, want string) (Task, error) {
		return Task{}, mongoerr.Newf(mongoerr.FailedToParse,
			"RangeDeletionTask: field '%s' must be %s in %s", field, want, bsonutil.FormatDoc(doc))
	}
	t.ID = doc.Lookup("_id")
	if t.ID.Type == 0 {
		return bad("_id", "present")
	}
	var ok bool
	if t.NS, ok = doc.Lookup("nss").StringValueOK(); !ok || t.NS == "" {
		return bad("nss", "a string")
	}
	sub, data, ok := doc.Lookup("collectionUuid").BinaryOK()
	if !ok || sub != bson.TypeBinaryUUID || len(data) != len(t.CollectionUUID) {
		return bad("collectionUuid", "a UUID")
	}
	copy(t.CollectionUUID[:], data)
	t.DonorShard, _ = doc.Lookup("donorShardId").StringValueOK()
	rng, ok := doc.Lookup("range").DocumentOK()
	if !ok {
		return bad("range", "an object")
	}
	if t.Min, ok = rng.Lookup("min").DocumentOK(); !ok {
		return bad("range.min", "an object")
	}
	if t.Max, ok = rng.Lookup("max").DocumentOK(); !ok {
		return bad("range.max", "an object")
	}
	if v := doc.Lookup("pending"); v.Type != 0 {
		if t.Pending, ok = v.BooleanOK(); !ok {
			return bad("pending", "a boolean")
		}
	}
	t.WhenToClean, _ = doc.Lookup("whenToClean").StringValueOK()
	if t.WhenToClean != CleanNow && t.WhenToClean != CleanDelayed {
		return bad("whenToClean", `"now" or "delayed"`)
	}
	if t.KeyPattern, ok = doc.Lookup("keyPattern").DocumentOK(); !ok {
		return bad("keyPattern", "an object")
	}
	p, err := shardkey.Parse(t.KeyPattern)
	if err != nil {
		return Task{}, err
	}
	if !p.IsShardKey(t.Min) || !p.IsShardKey(t.Max) || shardkey.CompareKeys(t.Min, t.Max) >= 0 {
		return bad("range", "a non-empty range of keys of keyPattern")
	}
	return t, nil
}
