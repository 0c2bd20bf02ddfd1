package commands

// explain. Each explainable command has an explainer, listed in explainerFor:
//
//	// explainFunc explains one command. cmd is the inner command document (explain's
//	// argument) with the outer $db; v is the verbosity. It returns the queryPlanner document
//	// and, unless v is plan.QueryPlanner, the executionStats document (executing the command
//	// WITHOUT side effects: writes are planned and their targets counted, nothing changes).
//	// explain adds command, serverInfo, serverParameters and ok.
//	type explainFunc func(ctx context.Context, env *service.Env, cmd bsoncore.Document, v plan.Verbosity) (queryPlanner, executionStats bsoncore.Document, err error)
//
// Most explainers build a plan.Request and call explainPlan(ctx, env, ns, req, v), which
// locks the collection, plans, runs the plan to its end for executionStats and renders both
// parts (set req.ForWrite and req.WriteStage = "UPDATE"/"DELETE" for writes).

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/query/plan"
	"humongo/internal/service"
)

type explainFunc func(ctx context.Context, env *service.Env, cmd bsoncore.Document, v plan.Verbosity) (queryPlanner, executionStats bsoncore.Document, err error)

// explainerFor returns the explainer of command name. A switch rather than a map: the
// explainers reach runExplain's helpers, and a package-level map of them would be an
// initialisation cycle (and an init()-filled table is what registries must not be).
func explainerFor(name string) (explainFunc, bool) {
	switch name {
	case "find":
		return findExplain, true
	case "count":
		return countExplain, true
	case "distinct":
		return distinctExplain, true
	case "update":
		return writeExplainUpdate, true
	case "delete":
		return writeExplainDelete, true
	case "findAndModify", "findandmodify":
		return writeExplainFam, true
	}
	return nil, false
}

func addExplain(r *service.Registry) {
	add(r, &service.Command{
		Name:      "explain",
		Auth:      service.AuthExplain(false),
		Handler:   runExplain,
		Help:      "explain the query plan and execution of find, count, distinct, update, delete and findAndModify",
		Secondary: service.SecondaryOptIn,
	})
}

func runExplain(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if err := checkStrict(cmd, "explain", "verbosity"); err != nil {
		return nil, err
	}
	arg := commandArg(cmd)
	if arg.Type != bsoncore.TypeEmbeddedDocument {
		return nil, typeMismatch("explain", "explain", arg.Type, "object")
	}
	inner := arg.Document()
	v := plan.AllPlansExecution
	if vv := lookup(cmd, "verbosity"); vv.Type != 0 {
		if vv.Type != bsoncore.TypeString {
			return nil, typeMismatch("explain", "verbosity", vv.Type, "string")
		}
		switch plan.Verbosity(vv.StringValue()) {
		case plan.QueryPlanner, plan.ExecutionStats, plan.AllPlansExecution:
			v = plan.Verbosity(vv.StringValue())
		default:
			return nil, mongoerr.Newf(mongoerr.BadValue,
				"Enumeration value '%s' for field 'explain.verbosity' is not a valid value.", vv.StringValue())
		}
	}
	first, err := inner.IndexErr(0)
	if err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "explain command requires a nested object")
	}
	name := first.Key()
	fn, ok := explainerFor(name)
	if !ok && name != "aggregate" {
		if env.Registry.Lookup(name) == nil {
			return nil, mongoerr.Newf(mongoerr.CommandNotFound, "Explain failed due to unknown command: %s", name)
		}
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "Cannot explain cmd: %s", name)
	}
	// The inner command inherits the outer $db (drivers send it only outside).
	innerCmd := inner
	if _, err := inner.LookupErr("$db"); err != nil {
		innerCmd = appendField(inner, "$db", env.DB)
	}
	// Aggregations, and reads of views (which run as aggregations), have their own shape.
	if reply, handled, err := aggExplainCommand(ctx, env, name, innerCmd, v); handled {
		return reply, err
	}
	qp, es, err := fn(ctx, env, innerCmd, v)
	if err != nil {
		return nil, err
	}
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "explainVersion", "1")
		b = bsoncore.AppendDocumentElement(b, "queryPlanner", qp)
		if es != nil {
			b = bsoncore.AppendDocumentElement(b, "executionStats", es)
		}
		b = bsoncore.AppendDocumentElement(b, "command", innerCmd)
		b = bsoncore.AppendDocumentElement(b, "serverInfo", findServerInfo(env))
		b = bsoncore.AppendDocumentElement(b, "serverParameters", findServerParams(env))
		return b
	}), nil
}

// appendField returns d with key: string value appended.
func appendField(d bsoncore.Document, key, val string) bsoncore.Document {
	out := append(bsoncore.Document(nil), d[:len(d)-1]...)
	out = bsoncore.AppendStringElement(out, key, val)
	out = append(out, 0)
	out[0], out[1], out[2], out[3] = byte(len(out)), byte(len(out)>>8), byte(len(out)>>16), byte(len(out)>>24)
	return out
}

func findServerInfo(env *service.Env) bsoncore.Document {
	host, port := env.State.Host, env.State.Port
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	return bsoncore.NewDocumentBuilder().
		AppendString("host", host).
		AppendInt32("port", int32(port)).
		AppendString("version", findServerVersion).
		AppendString("gitVersion", "humongo").Build()
}

// findServerVersion is what explain's serverInfo.version reports (buildInfo's family).
const findServerVersion = "7.0.0"

func findServerParams(env *service.Env) bsoncore.Document {
	sortBytes := findMaxBlockingSortBytes(env)
	return bsoncore.NewDocumentBuilder().
		AppendInt32("internalQueryFacetBufferSizeBytes", 104857600).
		AppendInt32("internalQueryFacetMaxOutputDocSizeBytes", 104857600).
		AppendInt32("internalLookupStageIntermediateDocumentMaxSizeBytes", int32(min(aggLookupLimits(env).LookupMaxResultBytes, 1<<31-1))).
		AppendInt32("internalDocumentSourceGroupMaxMemoryBytes", 104857600).
		AppendInt32("internalQueryMaxBlockingSortMemoryUsageBytes", int32(min(sortBytes, 1<<31-1))).
		AppendInt32("internalQueryProhibitBlockingMergeOnMongoS", 0).
		AppendInt32("internalQueryMaxAddToSetBytes", 104857600).
		AppendInt32("internalDocumentSourceSetWindowFieldsMaxMemoryBytes", 104857600).
		AppendBoolean("internalQueryFrameworkControl", false).Build()
}

// explainPlan explains a planned query on ns: see the top of this file.
func explainPlan(ctx context.Context, env *service.Env, ns string, req plan.Request, v plan.Verbosity) (queryPlanner, executionStats bsoncore.Document, err error) {
	db := env.State.DB
	if db == nil {
		return nil, nil, mongoerr.New(mongoerr.InternalError, "server has no storage")
	}
	req.NS = ns
	findFillRequestDefaults(env, &req)
	op := db.NewOp(ctx)
	defer op.Close()
	rd, release, err := op.OpenRead(ctx, ns, operation.ReadOwned) // the read seam (operation/read.go)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	ex, err := rd.Plan(ctx, op.RU, req)
	if err != nil {
		return nil, nil, err
	}
	defer ex.Close()
	if v != plan.QueryPlanner {
		for {
			_, _, ok, err := ex.Next(ctx)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				break
			}
		}
	}
	qp, es := ex.Explain(v)
	return qp, es, nil
}

// findFillRequestDefaults applies server parameters to a plan request.
func findFillRequestDefaults(env *service.Env, req *plan.Request) {
	if env.State.Params != nil {
		if req.MaxBlockingSortBytes == 0 {
			req.MaxBlockingSortBytes = findMaxBlockingSortBytes(env)
		}
	}
	if req.TempDir == "" && env.State.DB != nil {
		req.TempDir = env.State.DB.TempDir
	}
}

// findMaxBlockingSortBytes reads the blocking-sort memory limit,
// internalQueryMaxBlockingSortMemoryUsageBytes.
func findMaxBlockingSortBytes(env *service.Env) int64 {
	if p := env.State.Params; p != nil {
		if v := p.Int("internalQueryMaxBlockingSortMemoryUsageBytes"); v > 0 {
			return v
		}
	}
	return plan.DefaultMaxBlockingSortBytes
}
