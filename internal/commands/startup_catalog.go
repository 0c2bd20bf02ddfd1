package commands

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/service"
)

const (
	startupLogNS   = "local.startup_log"
	startupLogSize = 10 * 1024 * 1024 // mongod's cap for local.startup_log
	systemVersion  = "admin.system.version"
)

// RecordStartup writes what mongod writes to its own catalog when it starts, so that the
// databases it shows are MongoDB's: a document about this start in local.startup_log (a
// capped collection of 10 MB, never replicated), and, on the clean start of a standalone
// (no database but local yet), the featureCompatibilityVersion document in
// admin.system.version. A replica-set member gets the latter from replSetInitiate instead.
// cmd/humongod calls it once, before the server accepts connections.
func RecordStartup(ctx context.Context, st *service.State, standalone bool) error {
	db := st.DB
	clean := true
	for _, name := range db.Catalog.Latest().Databases() {
		if name != "local" {
			clean = false
		}
	}
	op := db.NewOp(ctx)
	defer op.Close()
	opts := bsoncore.NewDocumentBuilder().AppendBoolean("capped", true).AppendInt64("size", startupLogSize).Build()
	if err := op.EnsureCollection(ctx, startupLogNS, opts); err != nil {
		return fmt.Errorf("create %s: %w", startupLogNS, err)
	}
	host, _ := os.Hostname()
	now := time.Now()
	b := bsoncore.NewDocumentBuilder().
		AppendString("_id", fmt.Sprintf("%s-%d", host, now.UnixMilli())).
		AppendString("hostname", host).
		AppendDateTime("startTime", now.UnixMilli()).
		AppendString("startTimeLocal", now.Format("Mon Jan _2 15:04:05.000")).
		AppendInt64("pid", int64(os.Getpid()))
	if len(st.CmdLine.Parsed) > 0 {
		b = b.AppendDocument("cmdLine", st.CmdLine.Parsed)
	}
	entry := b.AppendDocument("buildinfo", bsoncore.NewDocumentBuilder().
		AppendString("version", service.Version).AppendString("gitVersion", service.GitVersion).Build()).Build()
	if err := op.WriteCollection(ctx, startupLogNS, false, func(c *index.Collection) error {
		_, err := c.InsertDocument(op.RU, entry)
		return err
	}); err != nil {
		return fmt.Errorf("write %s: %w", startupLogNS, err)
	}
	if !standalone || !clean {
		return nil
	}
	fcv, err := bson.Marshal(bson.D{{Key: "_id", Value: "featureCompatibilityVersion"}, {Key: "version", Value: "7.0"}})
	if err != nil {
		return err
	}
	if err := op.WriteCollection(ctx, systemVersion, true, func(c *index.Collection) error {
		_, err := c.InsertDocument(op.RU, fcv)
		return err
	}); err != nil {
		return fmt.Errorf("write %s: %w", systemVersion, err)
	}
	return nil
}
