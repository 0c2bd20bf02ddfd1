package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/changestream"
	"humongo/internal/changestream/event"
	"humongo/internal/changestream/images"
	"humongo/internal/service"
	"humongo/internal/storage"
)

// csImages gives a stream the node's pre-images (config.system.preimages) for
// fullDocumentBeforeChange and for fullDocument whenAvailable/required, which applies the
// update to its pre-image. They are read at the majority snapshot the stream reads the oplog
// at: a pre-image is written with its oplog entry, at the same timestamp.
func csImages(env *service.Env, cfg *changestream.Config) {
	db := env.State.DB
	cfg.PreImage = func(ctx context.Context, ev *event.Event) (bsoncore.Document, bool, error) {
		if !ev.HasUUID {
			return nil, false, nil
		}
		ru := db.Engine.NewRecoveryUnit()
		defer ru.Close()
		if st := db.Engine.StableTimestamp(); st != 0 {
			if err := ru.SetReadSource(storage.ReadProvided, st); err != nil {
				return nil, false, err
			}
		}
		return images.PreImage(ctx, ru, db.Colls, ev.UUID, ev.ApplyOpsTS, ev.ApplyOpsIndex)
	}
	cfg.PostImage = func(pre bsoncore.Document, ev *event.Event) (bsoncore.Document, error) {
		if ev.RawUpdate == nil {
			return nil, nil
		}
		return images.PostImage(pre, ev.RawUpdate)
	}
}
