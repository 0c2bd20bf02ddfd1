package commands

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/query/plan"
	"humongo/internal/service"
)

// Explain of the write commands: the statement is parsed and validated like the real
// command, then planned in write mode under an UPDATE or DELETE stage. Nothing is written
// (MongoDB's explain of a write is read-only too).

// writeExplainEnv returns env with the inner command's $db.
func writeExplainEnv(env *service.Env, cmd bsoncore.Document) *service.Env {
	if db, ok := lookup(cmd, "$db").StringValueOK(); ok && db != "" {
		e := *env
		e.DB = db
		return &e
	}
	return env
}

// writeExplainOne returns the single statement of an explained write batch.
func writeExplainOne(cmd bsoncore.Document, cmdName, field string) (bsoncore.Value, error) {
	v := lookup(cmd, field)
	if v.Type == 0 {
		return v, writeMissing(cmdName + "." + field)
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return v, typeMismatch(cmdName, field, v.Type, "array")
	}
	vals, err := arr.Values()
	if err != nil {
		return v, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s: %v", field, err)
	}
	if len(vals) != 1 {
		return v, mongoerr.New(mongoerr.InvalidLength, "explained write batches must be of size 1")
	}
	return vals[0], nil
}

func writeExplainUpdate(ctx context.Context, env *service.Env, cmd bsoncore.Document, v plan.Verbosity) (bsoncore.Document, bsoncore.Document, error) {
	env = writeExplainEnv(env, cmd)
	ns, err := writeNamespace(env, cmd)
	if err != nil {
		return nil, nil, err
	}
	if err := checkStrict(cmd, "update", writeUpdateFields...); err != nil {
		return nil, nil, err
	}
	sv, err := writeExplainOne(cmd, "update", "updates")
	if err != nil {
		return nil, nil, err
	}
	st, err := writeParseUpdateStmt("update", sv, 0)
	if err != nil {
		return nil, nil, err
	}
	st.let, _ = lookup(cmd, "let").DocumentOK()
	st.now = time.Now()
	upd, err := writeParseUpdate(st)
	if err != nil {
		return nil, nil, err
	}
	if st.multi && upd.isReplacement() {
		return nil, nil, mongoerr.New(mongoerr.FailedToParse, "multi update is not supported for replacement-style update")
	}
	vars, err := evalCommandLet(st.let, st.now)
	if err != nil {
		return nil, nil, err
	}
	req := plan.Request{Filter: st.q, Hint: st.hint, ForWrite: true, WriteStage: "UPDATE", Vars: vars}
	if !st.multi {
		req.Limit = 1
	}
	return explainPlan(ctx, env, ns, req, v)
}

func writeExplainDelete(ctx context.Context, env *service.Env, cmd bsoncore.Document, v plan.Verbosity) (bsoncore.Document, bsoncore.Document, error) {
	env = writeExplainEnv(env, cmd)
	ns, err := writeNamespace(env, cmd)
	if err != nil {
		return nil, nil, err
	}
	if err := checkStrict(cmd, "delete", writeDeleteFields...); err != nil {
		return nil, nil, err
	}
	sv, err := writeExplainOne(cmd, "delete", "deletes")
	if err != nil {
		return nil, nil, err
	}
	st, err := writeParseDeleteStmt(sv, 0)
	if err != nil {
		return nil, nil, err
	}
	let, _ := lookup(cmd, "let").DocumentOK()
	vars, err := evalCommandLet(let, time.Now())
	if err != nil {
		return nil, nil, err
	}
	req := plan.Request{Filter: st.q, Hint: st.hint, ForWrite: true, WriteStage: "DELETE", Vars: vars}
	if !st.multi {
		req.Limit = 1
	}
	return explainPlan(ctx, env, ns, req, v)
}

func writeExplainFam(ctx context.Context, env *service.Env, cmd bsoncore.Document, v plan.Verbosity) (bsoncore.Document, bsoncore.Document, error) {
	env = writeExplainEnv(env, cmd)
	ns, err := writeNamespace(env, cmd)
	if err != nil {
		return nil, nil, err
	}
	r, err := writeParseFam(cmd)
	if err != nil {
		return nil, nil, err
	}
	stage := "UPDATE"
	if r.remove {
		stage = "DELETE"
	} else if _, err := writeParseUpdate(r.updateStmt(time.Now())); err != nil {
		return nil, nil, err
	}
	vars, err := evalCommandLet(r.let, time.Now())
	if err != nil {
		return nil, nil, err
	}
	req := plan.Request{Filter: r.query, Sort: r.sort, Hint: r.hint, Limit: 1, ForWrite: true, WriteStage: stage, Vars: vars}
	return explainPlan(ctx, env, ns, req, v)
}
