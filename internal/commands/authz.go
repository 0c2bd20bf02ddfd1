package commands

// mongod's own authorization checks: those of commands only humongod has. Every command
// declares its check where it is registered (Command.Auth); the checks both roles share
// are in internal/service (authz_checks.go), and TestEveryCommandDeclaresItsAuth keeps
// every registered command either PreAuth or checked.

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// authApplyOps is applyOps' check (OplogApplicationChecks::checkAuthForOperation): applyOps
// on the cluster; every privilege for an empty list (applyOps with nothing to apply is not
// something a client does); useUUID on the cluster when an operation names its collection
// by UUID (and forceUUID too when it creates one); then each operation as its own command
// would be checked: insert, update (with insert, since applyOps upserts unless
// alwaysUpsert is false), remove, appendOplogNote for a no-op, and a command operation's
// command check.
func authApplyOps(s *service.AuthSession, db string, cmd bsoncore.Document) error {
	if !s.Allowed(auth.Cluster(), auth.ApplyOps) {
		return service.ErrNotAuthorized
	}
	ops, ok := commandArg(cmd).ArrayOK()
	if !ok {
		return nil // the handler's TypeMismatch
	}
	vals, _ := ops.Values()
	if len(vals) == 0 {
		return allowedIf(s.Allowed(auth.AnyResource(), auth.AnyAction))
	}
	alwaysUpsert := true
	if v := lookup(cmd, "alwaysUpsert"); v.Type != 0 {
		alwaysUpsert = truthy(v)
	}
	for _, v := range vals {
		op, ok := v.DocumentOK()
		if !ok {
			return nil // the handler's error
		}
		if err := authApplyOp(s, op, alwaysUpsert); err != nil {
			return err
		}
	}
	return nil
}

// authApplyOp checks one applyOps operation (checkOperationAuthorization).
func authApplyOp(s *service.AuthSession, op bsoncore.Document, alwaysUpsert bool) error {
	opType, _ := lookup(op, "op").StringValueOK()
	if opType == "n" {
		return allowedIf(s.Allowed(auth.Cluster(), auth.AppendOplogNote))
	}
	ns, _ := lookup(op, "ns").StringValueOK()
	target := auth.NSFromFull(ns)
	o, _ := lookup(op, "o").DocumentOK()
	if lookup(op, "ui").Type != 0 {
		acts := []auth.Action{auth.UseUUID}
		if opType == "c" && firstKey(o) == "create" {
			acts = append(acts, auth.ForceUUID)
		}
		if !s.Allowed(auth.Cluster(), acts...) {
			return service.ErrNotAuthorized
		}
	}
	switch opType {
	case "i":
		return allowedIf(s.Allowed(target, auth.Insert))
	case "u":
		acts := []auth.Action{auth.Update}
		if alwaysUpsert || truthy(lookup(op, "b")) {
			acts = append(acts, auth.Insert)
		}
		return allowedIf(s.Allowed(target, acts...))
	case "d":
		return allowedIf(s.Allowed(target, auth.Remove))
	case "c":
		db, _, _ := strings.Cut(ns, ".")
		return authApplyOpsCommand(s, db, o)
	case "db":
		return allowedIf(s.Allowed(auth.AnyResource(), auth.AnyAction))
	}
	return mongoerr.New(mongoerr.FailedToParse, "Unrecognized opType")
}

// authApplyOpsCommand is a command operation's check: the check of the command it runs
// (renameCollection's on admin, where it runs, with fully qualified namespaces). A command
// applyOps does not apply needs every privilege; the handler refuses it anyway.
func authApplyOpsCommand(s *service.AuthSession, db string, o bsoncore.Document) error {
	switch firstKey(o) {
	case "create":
		return service.AuthCreate(false)(s, db, o)
	case "drop":
		return service.AuthOnNS(auth.DropCollection)(s, db, o)
	case "createIndexes":
		return service.AuthOnNS(auth.CreateIndex)(s, db, o)
	case "dropIndexes", "deleteIndexes":
		return service.AuthOnNS(auth.DropIndex)(s, db, o)
	case "collMod":
		return service.AuthCollMod(false)(s, db, o)
	case "dropDatabase":
		return service.AuthOnDB(auth.DropDatabase)(s, db, o)
	case "renameCollection":
		return service.AuthRenameCollection(s, "admin", o)
	case "applyOps":
		return authApplyOps(s, db, o)
	}
	return allowedIf(s.Allowed(auth.AnyResource(), auth.AnyAction))
}

func firstKey(d bsoncore.Document) string {
	e, err := d.IndexErr(0)
	if err != nil {
		return ""
	}
	return e.Key()
}

func allowedIf(ok bool) error {
	if !ok {
		return service.ErrNotAuthorized
	}
	return nil
}
