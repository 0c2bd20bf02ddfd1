package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addKillOp(r *service.Registry) {
	add(r, &service.Command{
		Name:      "killOp",
		Auth:      service.AuthAnyUser,
		Handler:   runKillOp,
		Help:      "Kill an operation: { killOp: 1, op: <opid> }",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

// runKillOp interrupts the operation: its context is cancelled with Interrupted (11601), which
// the operation observes at its next interrupt check. Like mongod, it succeeds whether or not
// the operation exists, and whether or not the user may kill it (without killop on the
// cluster, only its own connections' operations are killed).
func runKillOp(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	v := lookup(cmd, "op")
	if v.Type == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Did not provide \"op\" field")
	}
	opID, err := intArg("killOp", "op", v)
	if err != nil {
		return nil, err
	}
	if env.State.Clients.KillAs(env.Auth, opID, service.ErrInterrupted()) {
		env.State.Logger.Info("Going to kill op", "c", "COMMAND", "id", 20482,
			"ctx", env.Conn.Desc(), "opId", opID)
	}
	return bsoncore.NewDocumentBuilder().AppendString("info", "attempting to kill op").Build(), nil
}
