package index

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/opobserver"
	"humongo/internal/storage"
)

// DocListener is told of every document write, in the writer's unit, after the op observer
// (chunk migration's cloner records the _ids a donor's writes touch: MongoDB's
// MigrationChunkClonerSource, fed by the OpObserver). A listener that records must do so in
// an OnCommit hook of ru: the write may still roll back.
type DocListener interface {
	// FromMigrate reports whether ru's writes are a migration's own (the recipient's clone):
	// the op observer then logs them with fromMigrate: true.
	FromMigrate(ru *storage.RecoveryUnit) bool
	OnInserts(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, docs []bsoncore.Document, fromMigrate bool)
	OnUpdate(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, args *opobserver.OnUpdateArgs)
	OnDelete(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, id bsoncore.Value, pre bsoncore.Document, fromMigrate bool)
}

type listenerBox struct{ l DocListener }

// SetDocListener installs l (nil removes it). The op observer (Observer, SetObserver) is
// unchanged: only the write path sees both.
func (cs *Collections) SetDocListener(l DocListener) {
	if l == nil {
		cs.listener.Store(nil)
		return
	}
	cs.listener.Store(&listenerBox{l})
}

// teeObserver is the write path's observer while a listener is installed: the op observer
// first (its error aborts the write), then the listener.
type teeObserver struct {
	opobserver.Observer
	l DocListener
}

func (t teeObserver) OnInserts(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, docs []bsoncore.Document, fromMigrate bool) error {
	fromMigrate = fromMigrate || t.l.FromMigrate(ru)
	if err := t.Observer.OnInserts(ru, ns, uuid, docs, fromMigrate); err != nil {
		return err
	}
	t.l.OnInserts(ru, ns, uuid, docs, fromMigrate)
	return nil
}

func (t teeObserver) OnUpdate(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, args *opobserver.OnUpdateArgs) error {
	args.FromMigrate = args.FromMigrate || t.l.FromMigrate(ru)
	args.PreImage = args.PreImage && !args.FromMigrate
	if err := t.Observer.OnUpdate(ru, ns, uuid, args); err != nil {
		return err
	}
	t.l.OnUpdate(ru, ns, uuid, args)
	return nil
}

func (t teeObserver) OnDelete(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, args *opobserver.OnDeleteArgs) error {
	args.FromMigrate = args.FromMigrate || t.l.FromMigrate(ru)
	args.PreImage = args.PreImage && !args.FromMigrate
	if err := t.Observer.OnDelete(ru, ns, uuid, args); err != nil {
		return err
	}
	t.l.OnDelete(ru, ns, uuid, args.ID, args.Pre, args.FromMigrate)
	return nil
}
