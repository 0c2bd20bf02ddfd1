package commands

import (
	"context"
	"log/slog"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/catalog"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
)

func addReplSetResizeOplog(r *service.Registry) {
	add(r, &service.Command{
		Name:      "replSetResizeOplog",
		Auth:      service.AuthOnCluster(auth.ReplSetResizeOplog),
		Handler:   runReplSetResizeOplog,
		Help:      "Resize this member's oplog or set its minimum retention.\n{ replSetResizeOplog: 1, size: <MB>, minRetentionHours: <hours> }",
		AdminOnly: true,
		// Every member resizes its own oplog, secondaries included (not replicated).
		Secondary: service.SecondaryAlways,
	})
}

// Oplog size bounds of replSetResizeOplog, in megabytes (MongoDB: at least 990 MB, at most
// 1 PB).
const (
	minOplogSizeMB = 990
	maxOplogSizeMB = 1024 * 1024 * 1024
)

// runReplSetResizeOplog is replSetResizeOplog: a new cap (size, MB; persisted in the oplog's
// catalog options, so it survives a restart and overrides --oplogSize from then on) and/or a
// minimum retention (minRetentionHours; kept entries younger than that even over the cap,
// for this process's lifetime as MongoDB's runtime setting).
func runReplSetResizeOplog(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if _, err := replCoord(env); err != nil {
		return nil, err
	}
	if err := checkStrict(cmd, "replSetResizeOplog", "size", "minRetentionHours"); err != nil {
		return nil, err
	}
	var sizeMB, hours float64
	haveSize, haveHours := false, false
	if v := lookup(cmd, "size"); v.Type != 0 {
		f, ok := service.AsFloat(v)
		if !ok {
			return nil, typeMismatch("replSetResizeOplog", "size", v.Type, "double")
		}
		if math.IsNaN(f) || f < minOplogSizeMB {
			return nil, mongoerr.Newf(mongoerr.InvalidOptions, "oplog size should be %dMB at least", minOplogSizeMB)
		}
		if f > maxOplogSizeMB {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "oplog size in MB cannot exceed maximum of 1PB")
		}
		sizeMB, haveSize = f, true
	}
	if v := lookup(cmd, "minRetentionHours"); v.Type != 0 {
		f, ok := service.AsFloat(v)
		if !ok {
			return nil, typeMismatch("replSetResizeOplog", "minRetentionHours", v.Type, "double")
		}
		if math.IsNaN(f) || f < 0 || f > math.MaxInt64/float64(time.Hour) {
			return nil, mongoerr.Newf(mongoerr.InvalidOptions, "minRetentionHours must be >= 0, got %v", f)
		}
		hours, haveHours = f, true
	}
	if !haveSize && !haveHours {
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"Invalid replSetResizeOplog request, must specify either size or minRetentionHours")
	}
	db := env.State.DB
	m, ok := db.Catalog.Latest().ByNS(oplog.NS)
	if !ok {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "oplog does not exist")
	}
	if !m.Capped {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "oplog isn't capped")
	}
	if haveSize {
		bytes := int64(sizeMB * (1 << 20))
		if err := persistOplogSize(ctx, db, bytes); err != nil {
			return nil, err
		}
		db.Engine.SetOplogMaxSize(m.Ident, bytes)
	}
	if haveHours {
		db.Engine.SetOplogMinRetention(m.Ident, time.Duration(hours*float64(time.Hour)))
	}
	logger := env.State.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.Info("replSetResizeOplog success", logv2.C(logv2.Storage), logv2.ID(20497),
		"size", db.Engine.OplogMaxSize(m.Ident), "minRetentionHours", hours)
	return nil, nil
}

// persistOplogSize rewrites the oplog's catalog options with size bytes (the `local`
// catalog is untimestamped and the change is not replicated: each member has its own cap).
func persistOplogSize(ctx context.Context, db *operation.DB, bytes int64) error {
	op := db.NewOp(ctx)
	defer op.Close()
	return op.DDL(ctx, oplog.NS, func() error {
		m, ok := db.Catalog.Latest().ByNS(oplog.NS)
		if !ok {
			return mongoerr.New(mongoerr.IllegalOperation, "oplog does not exist")
		}
		return db.Catalog.UpdateOptions(op.RU, oplog.NS, withOplogSize(m, bytes))
	})
}

// withOplogSize returns m's user options with size replaced by bytes.
func withOplogSize(m *catalog.CollectionMeta, bytes int64) bsoncore.Document {
	return doc(func(b []byte) []byte {
		rest := ddlWithout(operation.UserOptions(m), "size")
		b = append(b, rest[4:len(rest)-1]...)
		return bsoncore.AppendInt64Element(b, "size", bytes)
	})
}
