package commands

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func addShutdown(r *service.Registry) {
	add(r, &service.Command{
		Name:          "shutdown",
		Auth:          service.AuthOnCluster(auth.Shutdown),
		Handler:       runShutdown,
		Help:          "shutdown the database.  must be ran against admin db and either (1) ran from localhost or (2) authenticated. If this is a primary in a replica set and there is no member within 10 seconds of its optime, it will not shutdown without force : true.  You can also specify timeoutSecs : N to wait N seconds for other members to catch up.",
		AdminOnly:     true,
		Secondary:     service.SecondaryAlways,
		LocalhostOnly: true,
	})
}

// defaultShutdownTimeout bounds the wait for in-flight operations (mongod: 15 s, for
// replica set catch-up; a standalone just drains).
const defaultShutdownTimeout = 15 * time.Second

func runShutdown(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	timeout := defaultShutdownTimeout
	if v := lookup(cmd, "timeoutSecs"); v.Type != 0 {
		n, err := intArg("shutdown", "timeoutSecs", v)
		if err != nil {
			return nil, err
		}
		timeout = time.Duration(max(n, 0)) * time.Second
	}
	force := truthy(lookup(cmd, "force"))
	env.State.Logger.Info("Terminating via shutdown command", "c", "COMMAND", "id", 4695400,
		"ctx", env.Conn.Desc(), "force", force, "timeoutSecs", int64(timeout.Seconds()))
	env.State.Shutdown(force, timeout)
	return nil, service.ErrCloseConnection
}
