package service

// configureFailPoint (MongoDB's configure_fail_point_cmd): humongod and humongos both
// register it, as test-only commands (enableTestCommands).

import (
	"context"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/failpoint"
	"humongo/internal/mongoerr"
)

// ConfigureFailPointCommand returns the configureFailPoint command.
func ConfigureFailPointCommand() *Command {
	return &Command{
		Name:      "configureFailPoint",
		Handler:   runConfigureFailPoint,
		Help:      "modifies the settings of a fail point\n{configureFailPoint: <name>, mode: 'alwaysOn'|'off'|{times: n}|{skip: n}|{activationProbability: p}, data: {...}}",
		AdminOnly: true,
		Secondary: SecondaryAlways,
		// As MongoDB: no authentication, since only a server started with
		// enableTestCommands has the command at all.
		PreAuth:  true,
		TestOnly: true,
	}
}

func runConfigureFailPoint(_ context.Context, _ *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	name, ok := fpFirst(cmd).StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'configureFailPoint.configureFailPoint' is the wrong type '%s', expected type 'string'", bsonutil.TypeName(fpFirst(cmd).Type))
	}
	fp := failpoint.Get(name)
	if fp == nil {
		return nil, mongoerr.Newf(mongoerr.FailPointSetFailed, "%s not found", name)
	}
	mode, n, p, err := parseFailPointMode(fpLookup(cmd, "mode"))
	if err != nil {
		return nil, err
	}
	var data bsoncore.Document
	if dv := fpLookup(cmd, "data"); dv.Type != 0 {
		d, ok := dv.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "the 'data' field must be an object")
		}
		data = d
	}
	count := fp.Configure(mode, n, p, data)
	return bsoncore.NewDocumentBuilder().AppendInt64("count", count).Build(), nil
}

// parseFailPointMode parses MongoDB's fail point mode argument.
func parseFailPointMode(v bsoncore.Value) (failpoint.Mode, int64, float64, error) {
	switch v.Type {
	case 0:
		return 0, 0, 0, mongoerr.New(mongoerr.IllegalOperation, "When setting a failpoint, you must supply a 'mode'")
	case bsoncore.TypeString:
		switch v.StringValue() {
		case "alwaysOn":
			return failpoint.AlwaysOn, 0, 0, nil
		case "off":
			return failpoint.Off, 0, 0, nil
		}
		return 0, 0, 0, mongoerr.New(mongoerr.BadValue, "unknown mode: "+v.StringValue())
	case bsoncore.TypeEmbeddedDocument:
		d := v.Document()
		if t := fpLookup(d, "times"); t.Type != 0 {
			n, err := fpInt("times", t)
			if err != nil {
				return 0, 0, 0, err
			}
			if n < 0 {
				return 0, 0, 0, mongoerr.New(mongoerr.BadValue, "times must be positive")
			}
			return failpoint.Times, n, 0, nil
		}
		if s := fpLookup(d, "skip"); s.Type != 0 {
			n, err := fpInt("skip", s)
			if err != nil {
				return 0, 0, 0, err
			}
			if n < 0 {
				return 0, 0, 0, mongoerr.New(mongoerr.BadValue, "skip must be positive")
			}
			return failpoint.Skip, n, 0, nil
		}
		if pv := fpLookup(d, "activationProbability"); pv.Type != 0 {
			p, ok := AsFloat(pv)
			if !ok || p < 0 || p > 1 {
				return 0, 0, 0, mongoerr.New(mongoerr.BadValue, "activationProbability must be between 0.0 and 1.0")
			}
			return failpoint.Probability, 0, p, nil
		}
		return 0, 0, 0, mongoerr.New(mongoerr.BadValue, "mode object can include 'times', 'skip', or 'activationProbability'")
	}
	return 0, 0, 0, mongoerr.New(mongoerr.TypeMismatch, "'mode' must be a string or JSON object")
}

func fpLookup(d bsoncore.Document, key string) bsoncore.Value {
	v, err := d.LookupErr(key)
	if err != nil {
		return bsoncore.Value{}
	}
	return v
}

func fpFirst(cmd bsoncore.Document) bsoncore.Value {
	e, err := cmd.IndexErr(0)
	if err != nil {
		return bsoncore.Value{}
	}
	return e.Value()
}

// fpInt reads a mode's integral count as MongoDB's IDL does (doubles truncated).
func fpInt(field string, v bsoncore.Value) (int64, error) { return IntArg("mode", field, v) }

// FailCommandApplies is MongoDB's shouldActivateFailCommandFailPoint: the fail point's
// failCommands lists one of names, its appName (when given) is the connection's, and internal
// clients (other members) are spared unless failInternalCommands, so a test's fail point
// meant for a driver does not fail a secondary's oplog fetcher.
func FailCommandApplies(data bsoncore.Document, conn *Conn, names ...string) bool {
	if !FailPointTargets(data, conn) {
		return false
	}
	arr, ok := data.Lookup("failCommands").ArrayOK()
	if !ok {
		return false
	}
	vals, _ := arr.Values()
	for _, x := range vals {
		if str, ok := x.StringValueOK(); ok && slices.Contains(names, str) {
			return true
		}
	}
	return false
}

// FailPointTargets is the client half of FailCommandApplies: the appName matches and the
// client is not internal unless failInternalCommands. Fail points that name their command
// themselves (failGetMoreAfterCursorCheckout) use it alone.
func FailPointTargets(data bsoncore.Document, conn *Conn) bool {
	if conn != nil && conn.IsInternal() && !Truthy(data.Lookup("failInternalCommands")) {
		return false
	}
	if v, err := data.LookupErr("appName"); err == nil {
		if app, ok := v.StringValueOK(); !ok || conn == nil || app != conn.AppName() {
			return false
		}
	}
	return true
}
