package service

// Commands mongod and mongos answer alike from the server's own state (MongoDB 7.0's
// whatsmyuri, hostInfo, getLog, startSession, refreshSessions, setParameter and shutdown):
// both registries register these constructors.

import (
	"context"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/txn/lsc"
)

// WhatsMyURICommand answers the client's own address.
func WhatsMyURICommand() *Command {
	return &Command{
		Name: "whatsmyuri",
		Auth: AuthAnyUser,
		Handler: func(_ context.Context, env *Env, _ bsoncore.Document) (bsoncore.Document, error) {
			return bsoncore.NewDocumentBuilder().AppendString("you", env.Conn.Remote).Build(), nil
		},
		Help:      "{whatsmyuri:1}",
		Secondary: SecondaryAlways,
	}
}

// StartSessionCommand starts a logical session in the server's cache; under authentication
// its uid is its user's digest, as the uid of every command naming it.
func StartSessionCommand() *Command {
	return &Command{
		Name: "startSession",
		Auth: AuthAnyUser,
		Handler: func(_ context.Context, env *Env, _ bsoncore.Document) (bsoncore.Document, error) {
			rec, err := env.State.Sessions.Start(env.Auth.SessionOwner())
			if err != nil {
				return nil, err
			}
			id := bsoncore.NewDocumentBuilder().AppendBinary("id", 4, rec.Key.ID[:]).Build()
			return bsoncore.NewDocumentBuilder().AppendDocument("id", id).
				AppendInt32("timeoutMinutes", int32(env.State.Sessions.Timeout().Minutes())).Build(), nil
		},
		Help:      "start a logical session",
		Secondary: SecondaryAlways,
	}
}

// RefreshSessionsCommand renews the caller's sessions among those named.
func RefreshSessionsCommand() *Command {
	return &Command{
		Name: "refreshSessions",
		Auth: AuthAnyUser,
		Handler: func(_ context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
			keys, err := ownLsidArg(env, cmd)
			if err != nil {
				return nil, err
			}
			if err := env.State.Sessions.VivifyAll(keys, ""); err != nil {
				return nil, err
			}
			return EmptyDoc, nil
		},
		Help:      "renew a set of logical sessions",
		Secondary: SecondaryAlways,
	}
}

// ownLsidArg parses the session array a command names as its argument (endSessions,
// refreshSessions), as the caller's own sessions (OwnSessions).
func ownLsidArg(env *Env, cmd bsoncore.Document) ([]lsc.Key, error) {
	first, err := cmd.IndexErr(0)
	if err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Empty command document")
	}
	keys, err := ParseLsidArray(first.Key(), first.Value())
	if err != nil {
		return nil, err
	}
	return OwnSessions(env, keys)
}

// GetLogCommand serves the in-memory log rings: "*" lists them, "global" holds the last 1024
// lines and "startupWarnings" the warnings logged at startup.
func GetLogCommand() *Command {
	return &Command{
		Name:      "getLog",
		Auth:      AuthOnCluster(auth.GetLog),
		Handler:   runGetLog,
		Help:      "{ getLog : '*' }  OR { getLog : 'global' }",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	}
}

func runGetLog(_ context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	var arg bsoncore.Value
	if e, err := cmd.IndexErr(0); err == nil {
		arg = e.Value()
	}
	// GetLogCommand is IDL-parsed: a null argument counts as missing.
	name, ok := arg.StringValueOK()
	switch {
	case arg.Type == bsoncore.TypeNull:
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'getLog.getLog' is missing but a required field")
	case !ok:
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'getLog.getLog' is the wrong type '%s', expected type 'string'",
			bsonutil.TypeName(arg.Type))
	}
	if name == "*" {
		return stringArrayDoc("names", []string{"global", "startupWarnings"}), nil
	}
	sink := env.State.Log
	if sink == nil {
		return nil, mongoerr.New(mongoerr.InternalError, "no log sink")
	}
	var lines []string
	var total int64
	switch name {
	case "global":
		lines, total = sink.Global.Lines()
	case "startupWarnings":
		lines, total = sink.Warnings.Lines()
	default:
		return nil, mongoerr.Newf(mongoerr.OperationFailed, "No log named '%s'", name)
	}
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = bsoncore.AppendInt64Element(b, "totalLinesWritten", total)
	b = appendStrings(b, "log", lines)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}

// stringArrayDoc is a document whose one field key holds ss.
func stringArrayDoc(key string, ss []string) bsoncore.Document {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = appendStrings(b, key, ss)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// HostInfoCommand describes the server's host as mongod does on Linux.
func HostInfoCommand() *Command {
	return &Command{
		Name:      "hostInfo",
		Auth:      AuthOnCluster(auth.HostInfo),
		Handler:   runHostInfo,
		Help:      "returns information about the daemon's host",
		Secondary: SecondaryAlways,
	}
}

func runHostInfo(context.Context, *Env, bsoncore.Document) (bsoncore.Document, error) {
	host, _ := os.Hostname()
	memMB := memTotalMB()
	return bsoncore.NewDocumentBuilder().
		AppendDocument("system", bsoncore.NewDocumentBuilder().
			AppendDateTime("currentTime", time.Now().UnixMilli()).
			AppendString("hostname", host).
			AppendInt32("cpuAddrSize", 64).
			AppendInt64("memSizeMB", memMB).
			AppendInt64("memLimitMB", memMB).
			AppendInt32("numCores", int32(runtime.NumCPU())).
			AppendInt32("numPhysicalCores", int32(runtime.NumCPU())).
			AppendString("cpuArch", runtime.GOARCH).
			AppendBoolean("numaEnabled", false).Build()).
		AppendDocument("os", bsoncore.NewDocumentBuilder().
			AppendString("type", osType()).
			AppendString("name", osName()).
			AppendString("version", kernelVersion()).Build()).
		AppendDocument("extra", bsoncore.NewDocumentBuilder().
			AppendString("versionString", kernelVersion()).
			AppendInt64("pageSize", int64(os.Getpagesize())).Build()).
		Build(), nil
}

func osType() string {
	if runtime.GOOS == "linux" {
		return "Linux"
	}
	return runtime.GOOS
}

// osName is PRETTY_NAME from /etc/os-release, as mongod reports it.
func osName() string {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return runtime.GOOS
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}

func kernelVersion() string {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// memTotalMB reads MemTotal from /proc/meminfo (0 when unavailable).
func memTotalMB() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n / 1024
			}
		}
	}
	return 0
}

// SetParameterCommand sets each non-generic field as a parameter. Every name is validated
// before any value changes, so a bad request leaves all parameters as they were. The reply's
// `was` is the previous value of the (last) parameter set.
func SetParameterCommand() *Command {
	return &Command{
		Name:      "setParameter",
		Auth:      AuthOnCluster(auth.SetParameter),
		Handler:   runSetParameter,
		Help:      "set administrative option(s)\n{ setParameter:1, <param>:<value> }\nsupported:\n",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	}
}

func runSetParameter(_ context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	params := env.State.Params
	elems, err := cmd.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid command: %v", err)
	}
	var toSet []bsoncore.Element
	for _, e := range elems[1:] {
		k := e.Key()
		if GenericArguments[k] {
			continue
		}
		if _, ok := params.Spec(k); !ok {
			return nil, UnrecognizedParam(k)
		}
		toSet = append(toSet, e)
	}
	if len(toSet) == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "no option found to set, use help:true to see options ")
	}
	if len(toSet) > 1 {
		// mongod accepts several, but then a failure half-way leaves a partial change; we
		// validate all first by dry-running against copies.
		for _, e := range toSet {
			if err := params.Check(e.Key(), e.Value()); err != nil {
				return nil, err
			}
		}
	}
	var was bsoncore.Value
	for _, e := range toSet {
		if was, err = params.SetValue(e.Key(), e.Value()); err != nil {
			return nil, err
		}
		env.State.Logger.Info("Setting new configuration", "c", "COMMAND", "id", 23300,
			"ctx", env.Conn.Desc(), "parameter", e.Key(), "value", e.Value().String())
	}
	return bsoncore.NewDocumentBuilder().AppendValue("was", was).Build(), nil
}

// ShutdownCommand begins the server's clean shutdown (State.Shutdown) and closes the
// connection; only from localhost or with the shutdown privilege.
func ShutdownCommand() *Command {
	return &Command{
		Name:          "shutdown",
		Auth:          AuthOnCluster(auth.Shutdown),
		Handler:       runShutdown,
		Help:          "shutdown the database.  must be ran against admin db and either (1) ran from localhost or (2) authenticated. If this is a primary in a replica set and there is no member within 10 seconds of its optime, it will not shutdown without force : true.  You can also specify timeoutSecs : N to wait N seconds for other members to catch up.",
		AdminOnly:     true,
		Secondary:     SecondaryAlways,
		LocalhostOnly: true,
	}
}

// defaultShutdownTimeout bounds the wait for in-flight operations (mongod: 15 s, for
// replica set catch-up; a standalone or a router just drains).
const defaultShutdownTimeout = 15 * time.Second

func runShutdown(_ context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	timeout := defaultShutdownTimeout
	if v := cmd.Lookup("timeoutSecs"); v.Type != 0 {
		n, err := IntArg("shutdown", "timeoutSecs", v)
		if err != nil {
			return nil, err
		}
		timeout = time.Duration(max(n, 0)) * time.Second
	}
	force := Truthy(cmd.Lookup("force"))
	env.State.Logger.Info("Terminating via shutdown command", "c", "COMMAND", "id", 4695400,
		"ctx", env.Conn.Desc(), "force", force, "timeoutSecs", int64(timeout.Seconds()))
	env.State.Shutdown(force, timeout)
	return nil, ErrCloseConnection
}

// IntArg reads an IDL integer field (safeInt64: int, long, double or decimal, the latter
// two truncated and clamped; NaN is 0).
func IntArg(cmdName, field string, v bsoncore.Value) (int64, error) {
	switch v.Type {
	case bsoncore.TypeInt32:
		return int64(v.Int32()), nil
	case bsoncore.TypeInt64:
		return v.Int64(), nil
	case bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		f, _ := AsFloat(v)
		switch {
		case math.IsNaN(f):
			return 0, nil
		case f >= math.MaxInt64:
			return math.MaxInt64, nil
		case f <= math.MinInt64:
			return math.MinInt64, nil
		}
		return int64(f), nil
	}
	return 0, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected types '[long, int, decimal, double']",
		cmdName, field, bsonutil.TypeName(v.Type))
}
