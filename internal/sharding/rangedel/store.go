package rangedel

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/operation"
	"humongo/internal/query/plan"
	"humongo/internal/sharding/shardkey"
)

// readTasks reads config.rangeDeletions in storage order (the order the tasks were written).
// Documents that are not tasks are skipped.
func (s *Service) readTasks(ctx context.Context) ([]Task, error) {
	op := s.cfg.DB.NewOp(ctx)
	defer op.Close()
	rd, release, err := op.OpenRead(ctx, TasksNS, operation.ReadAllRecords)
	if err != nil {
		return nil, err
	}
	defer release()
	if rd.Meta() == nil {
		return nil, nil
	}
	ex, err := rd.Plan(ctx, op.RU, plan.Request{NS: TasksNS, Hint: naturalHint()})
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	var out []Task
	for {
		_, doc, ok, err := ex.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		t, err := ParseTask(doc)
		if err != nil {
			continue
		}
		out = append(out, t)
	}
}

// naturalHint is {$natural: 1}: a collection scan in storage order.
func naturalHint() bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument,
		Data: bsoncore.NewDocumentBuilder().AppendInt32("$natural", 1).Build()}
}

// removeTask deletes the task document (a replicated write of this primary).
func (s *Service) removeTask(ctx context.Context, t *Task) error {
	op := s.cfg.DB.NewOp(ctx)
	defer op.Close()
	err := op.WriteCollection(ctx, TasksNS, false, func(coll *index.Collection) error {
		if coll == nil {
			return nil
		}
		rd, err := op.ReadLocked(TasksNS, nil, coll, operation.ReadAllRecords)
		if err != nil {
			return err
		}
		rid, doc, found, err := rd.FindByID(op.RU, t.ID)
		if err != nil || !found {
			return err
		}
		return coll.DeleteDocument(op.RU, rid, append(bsoncore.Document(nil), doc...))
	})
	if err != nil {
		return err
	}
	s.signalChanged()
	return nil
}

// signalChanged wakes the waits on task documents.
func (s *Service) signalChanged() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// WaitForOverlapping waits until config.rangeDeletions holds no task of collection uuid whose
// range overlaps [min, max), pending or not (MongoDB's checkForConflictingDeletions loop: a
// recipient waits before it clones a range, a donor for waitForDelete). It works on any
// member: it reads the task documents, re-read each time this deleter removes one and at least
// every poll interval. It returns ctx's cause when ctx ends first (the caller's deadline,
// such as receiveChunkWaitForRangeDeleterTimeoutMS).
func (s *Service) WaitForOverlapping(ctx context.Context, uuid catalog.UUID, min, max bsoncore.Document) error {
	return s.waitNone(ctx, func(t *Task) bool {
		return t.CollectionUUID == uuid && shardkey.HalfOpenOverlap(t.Min, t.Max, min, max)
	})
}

// WaitForCollection waits until config.rangeDeletions holds no task of collection uuid
// (cleanupOrphaned).
func (s *Service) WaitForCollection(ctx context.Context, uuid catalog.UUID) error {
	return s.waitNone(ctx, func(t *Task) bool { return t.CollectionUUID == uuid })
}

// Overlapping counts the tasks of collection uuid overlapping [min, max).
func (s *Service) Overlapping(ctx context.Context, uuid catalog.UUID, min, max bsoncore.Document) (int, error) {
	tasks, err := s.readTasks(ctx)
	n := 0
	for i := range tasks {
		if tasks[i].CollectionUUID == uuid && shardkey.HalfOpenOverlap(tasks[i].Min, tasks[i].Max, min, max) {
			n++
		}
	}
	return n, err
}

func (s *Service) waitNone(ctx context.Context, match func(*Task) bool) error {
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		tasks, err := s.readTasks(ctx)
		if err != nil {
			return err
		}
		found := false
		for i := range tasks {
			if match(&tasks[i]) {
				found = true
				break
			}
		}
		if !found {
			return nil
		}
		timer := time.NewTimer(s.cfg.Poll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return context.Cause(ctx)
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// attached is the deleter of a DB (Attach / Of).
var attached = operation.NewDecoration(func(*operation.DB) *holder { return &holder{} })

type holder struct {
	mu sync.Mutex
	s  *Service
}

// Attach makes s the range deleter of db (Of returns it); nil detaches.
func Attach(db *operation.DB, s *Service) {
	h := attached.Get(db)
	h.mu.Lock()
	h.s = s
	h.mu.Unlock()
}

// Of returns db's range deleter, nil when the node runs none.
func Of(db *operation.DB) *Service {
	if db == nil {
		return nil
	}
	h, ok := attached.Lookup(db)
	if !ok {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.s
}

// updateTask is MongoDB's ensureRangeDeletionTaskStillExists and
// markRangeDeletionTaskAsProcessing (processing set: {$set: {processing: true, whenToClean:
// "now"}}) or persistUpdatedNumOrphans ({$inc: {numOrphanDocs: orphanDelta}}), as one local
// write to the task document. found is false when the document is gone, pending again, or
// for another range: the deletion must stop (the range may be this shard's again).
func (s *Service) updateTask(ctx context.Context, t *Task, processing bool, orphanDelta int64) (found bool, err error) {
	op := s.cfg.DB.NewOp(ctx)
	defer op.Close()
	err = op.WriteCollection(ctx, TasksNS, false, func(coll *index.Collection) error {
		found = false
		if coll == nil {
			return nil
		}
		rd, err := op.ReadLocked(TasksNS, nil, coll, operation.ReadAllRecords)
		if err != nil {
			return err
		}
		rid, doc, ok, err := rd.FindByID(op.RU, t.ID)
		if err != nil || !ok {
			return err
		}
		old := append(bsoncore.Document(nil), doc...)
		cur, err := ParseTask(old)
		if err != nil || cur.Pending || cur.CollectionUUID != t.CollectionUUID ||
			shardkey.CompareKeys(cur.Min, t.Min) != 0 || shardkey.CompareKeys(cur.Max, t.Max) != 0 {
			return nil
		}
		found = true
		if !processing && orphanDelta == 0 {
			return nil
		}
		return coll.UpdateDocument(op.RU, rid, old, taskUpdate(old, processing, orphanDelta))
	})
	return found, err
}

// taskUpdate applies updateTask's change to a task document, fields in place and new ones
// appended, as the update operators would.
func taskUpdate(old bsoncore.Document, processing bool, orphanDelta int64) bsoncore.Document {
	elems, _ := old.Elements()
	idx, out := bsoncore.AppendDocumentStart(nil)
	var hasProcessing, hasNum bool
	for _, e := range elems {
		switch k := e.Key(); {
		case processing && k == "processing":
			hasProcessing = true
			out = bsoncore.AppendBooleanElement(out, k, true)
		case processing && k == "whenToClean":
			out = bsoncore.AppendStringElement(out, k, CleanNow)
		case orphanDelta != 0 && k == "numOrphanDocs":
			hasNum = true
			n, _ := e.Value().AsInt64OK()
			out = bsoncore.AppendInt64Element(out, k, n+orphanDelta)
		default:
			out = bsoncore.AppendValueElement(out, k, e.Value())
		}
	}
	if processing && !hasProcessing {
		out = bsoncore.AppendBooleanElement(out, "processing", true)
	}
	if orphanDelta != 0 && !hasNum {
		out = bsoncore.AppendInt64Element(out, "numOrphanDocs", orphanDelta)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}
