package migration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/sharding/routing"
)

// fakeSteps records the coordinator's effects as the documents they leave: the donor's
// coordinator document and each shard's range deletion tasks.
type fakeSteps struct {
	log    []string
	coord  map[catalog.UUID]CoordinatorDoc
	tasks  map[string]map[catalog.UUID]bool // shard → task id → pending
	owner  string
	failAt string // a step name that fails once
	donor  string
}

func newFake(donor string) *fakeSteps {
	return &fakeSteps{coord: map[catalog.UUID]CoordinatorDoc{}, tasks: map[string]map[catalog.UUID]bool{}, donor: donor}
}

func (f *fakeSteps) step(name string) error {
	f.log = append(f.log, name)
	if f.failAt == name {
		f.failAt = ""
		return errors.New("injected failure at " + name)
	}
	return nil
}

func (f *fakeSteps) InsertCoordinator(_ context.Context, d CoordinatorDoc) error {
	if err := f.step("insertCoordinator"); err != nil {
		return err
	}
	f.coord[d.ID] = d
	return nil
}
func (f *fakeSteps) UpdateDecision(_ context.Context, id catalog.UUID, dec Decision) error {
	if err := f.step("decide:" + string(dec)); err != nil {
		return err
	}
	d := f.coord[id]
	d.Decision = dec
	f.coord[id] = d
	return nil
}
func (f *fakeSteps) DeleteCoordinator(_ context.Context, id catalog.UUID) error {
	if err := f.step("deleteCoordinator"); err != nil {
		return err
	}
	delete(f.coord, id)
	return nil
}
func (f *fakeSteps) InsertRangeDeletion(_ context.Context, t RangeDeletionTask) error {
	if err := f.step("insertTask:" + f.donor); err != nil {
		return err
	}
	f.addTask(f.donor, t.ID)
	return nil
}
func (f *fakeSteps) addTask(shard string, id catalog.UUID) {
	if f.tasks[shard] == nil {
		f.tasks[shard] = map[catalog.UUID]bool{}
	}
	f.tasks[shard][id] = true
}
func (f *fakeSteps) DeleteRangeDeletion(_ context.Context, shard string, id catalog.UUID) error {
	if err := f.step("deleteTask:" + shard); err != nil {
		return err
	}
	delete(f.tasks[shard], id)
	return nil
}
func (f *fakeSteps) MarkRangeDeletionReady(_ context.Context, shard string, id catalog.UUID) error {
	if err := f.step("readyTask:" + shard); err != nil {
		return err
	}
	if _, ok := f.tasks[shard][id]; ok {
		f.tasks[shard][id] = false
	}
	return nil
}
func (f *fakeSteps) ChunkOwner(context.Context, string, catalog.UUID, bsoncore.Document, bsoncore.Document) (string, error) {
	if err := f.step("chunkOwner"); err != nil {
		return "", err
	}
	if f.owner == "gone" {
		return "", fmt.Errorf("no chunks: %w", ErrCollectionGone)
	}
	return f.owner, nil
}
func (f *fakeSteps) Refresh(context.Context, string) error { return f.step("refresh") }
func (f *fakeSteps) EnsureChunkVersionIsGreaterThan(context.Context, string, catalog.UUID, bsoncore.Document, bsoncore.Document, routing.ChunkVersion) error {
	return f.step("ensureChunkVersion")
}

func newCoordinator(f *fakeSteps) *Coordinator {
	return &Coordinator{Steps: f, Doc: CoordinatorDoc{ID: catalog.NewUUID(), NS: "db.c", Donor: "s0", Recipient: "s1",
		Min: key(0), Max: key(10)}}
}

// The decision's sequence leaves exactly one shard with a ready task and no coordinator.
func TestCoordinatorSequences(t *testing.T) {
	for _, dec := range []Decision{Committed, Aborted} {
		f := newFake("s0")
		c := newCoordinator(f)
		if err := c.Start(context.Background(), key(1), "delayed"); err != nil {
			t.Fatal(err)
		}
		f.addTask("s1", c.Doc.ID) // the recipient's own pending task
		if err := c.Decide(context.Background(), dec); err != nil {
			t.Fatal(err)
		}
		if err := c.Complete(context.Background()); err != nil {
			t.Fatal(err)
		}
		ready, gone := "s0", "s1"
		if dec == Aborted {
			ready, gone = "s1", "s0"
		}
		if pending, ok := f.tasks[ready][c.Doc.ID]; !ok || pending {
			t.Errorf("%s: the %s task must remain, ready (%v %v)", dec, ready, ok, pending)
		}
		if _, ok := f.tasks[gone][c.Doc.ID]; ok {
			t.Errorf("%s: the %s task must be deleted", dec, gone)
		}
		if len(f.coord) != 0 {
			t.Errorf("%s: the coordinator document remains", dec)
		}
		// The delete comes before the mark (spec order).
		want := []string{"deleteTask:" + gone, "readyTask:" + ready, "deleteCoordinator"}
		if got := f.log[len(f.log)-3:]; !slices.Equal(got, want) {
			t.Errorf("%s: sequence %v, want %v", dec, got, want)
		}
	}
}

// An undecided coordinator found on step-up takes the config server's word, and a failure
// at any step of the recovery leaves a state the next recovery finishes.
func TestCoordinatorRecover(t *testing.T) {
	steps := []string{"ensureChunkVersion", "chunkOwner", "decide:committed", "decide:aborted", "refresh", "deleteTask:s0", "deleteTask:s1",
		"readyTask:s0", "readyTask:s1", "deleteCoordinator", ""}
	// s2: the recipient moved the range on after the commit; still committed. gone: the
	// collection was dropped; aborted.
	for _, owner := range []string{"s0", "s1", "s2", "gone"} {
		for _, fail := range steps {
			t.Run(fmt.Sprintf("owner=%s/fail=%s", owner, fail), func(t *testing.T) {
				f := newFake("s0")
				f.owner = owner
				c := newCoordinator(f)
				if err := c.Start(context.Background(), key(1), "now"); err != nil {
					t.Fatal(err)
				}
				f.addTask("s1", c.Doc.ID)
				f.failAt = fail
				// A crash: the next primary reads the document back and recovers it, until
				// one recovery succeeds.
				for attempt := 0; ; attempt++ {
					doc, ok := f.coord[c.Doc.ID]
					if !ok {
						break
					}
					rc := &Coordinator{Doc: doc, Steps: f}
					if err := rc.Recover(context.Background()); err == nil {
						break
					} else if attempt > 2 {
						t.Fatalf("recovery does not converge: %v", err)
					}
				}
				if len(f.coord) != 0 {
					t.Fatal("the coordinator document remains")
				}
				ready, gone := "s0", "s1" // committed: the donor's range is the orphan
				if owner == "s0" || owner == "gone" {
					ready, gone = "s1", "s0"
				}
				if pending, ok := f.tasks[ready][c.Doc.ID]; !ok || pending {
					t.Errorf("the %s task must remain, ready", ready)
				}
				if _, ok := f.tasks[gone][c.Doc.ID]; ok {
					t.Errorf("the %s task must be gone", gone)
				}
			})
		}
	}
}
