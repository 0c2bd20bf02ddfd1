package service

import (
	"context"
	"runtime"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/wire"
)

// Handlers every role answers the same way. Each binary registers them into its own
// registry: PingCommand(), BuildInfoCommand(...), GetParameterCommand(),
// ListCommandsCommand().

// Version is the MongoDB version Humongo reports; drivers gate features on it.
const (
	Version    = "7.0.0-humongo"
	GitVersion = "humongo"
)

// VersionArray is Version as buildInfo.versionArray.
var VersionArray = [4]int32{7, 0, 0, 0}

// EmptyDoc is a reply with no fields besides the `ok` the server appends.
var EmptyDoc = bsoncore.Document{5, 0, 0, 0, 0}

// PingCommand is {ping: 1}.
func PingCommand() *Command {
	return &Command{
		Name:      "ping",
		PreAuth:   true,
		Handler:   func(context.Context, *Env, bsoncore.Document) (bsoncore.Document, error) { return EmptyDoc, nil },
		Help:      "a way to check that the server is alive. responds immediately even if server is in a db lock.",
		Secondary: SecondaryAlways,
	}
}

// BuildInfoCommand is buildInfo; storageEngines is what the process reports there (mongod
// its engines, mongos none).
func BuildInfoCommand(storageEngines []string) *Command {
	return &Command{
		Name:    "buildInfo",
		PreAuth: true,
		Aliases: []string{"buildinfo"},
		Handler: func(context.Context, *Env, bsoncore.Document) (bsoncore.Document, error) {
			return buildInfo(storageEngines), nil
		},
		Help:      "get version #, etc.\n{ buildinfo:1 }",
		Secondary: SecondaryAlways,
	}
}

func buildInfo(storageEngines []string) bsoncore.Document {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = bsoncore.AppendStringElement(b, "version", Version)
	b = bsoncore.AppendStringElement(b, "gitVersion", GitVersion)
	b = appendStrings(b, "modules", nil)
	b = bsoncore.AppendStringElement(b, "allocator", "go")
	b = bsoncore.AppendStringElement(b, "javascriptEngine", "none")
	b = bsoncore.AppendStringElement(b, "sysInfo", "deprecated")
	ai, b2 := bsoncore.AppendArrayElementStart(b, "versionArray")
	for i, v := range VersionArray {
		b2 = bsoncore.AppendInt32Element(b2, strconv.Itoa(i), v)
	}
	b, _ = bsoncore.AppendArrayEnd(b2, ai)
	b = bsoncore.AppendDocumentElement(b, "openssl", bsoncore.NewDocumentBuilder().
		AppendString("running", "disabled").AppendString("compiled", "disabled").Build())
	b = bsoncore.AppendDocumentElement(b, "buildEnvironment", bsoncore.NewDocumentBuilder().
		AppendString("distarch", runtime.GOARCH).AppendString("target_arch", runtime.GOARCH).
		AppendString("target_os", runtime.GOOS).AppendString("cc", runtime.Version()).Build())
	b = bsoncore.AppendInt32Element(b, "bits", 64)
	b = bsoncore.AppendBooleanElement(b, "debug", false)
	b = bsoncore.AppendInt32Element(b, "maxBsonObjectSize", wire.MaxBSONObjectSize)
	b = appendStrings(b, "storageEngines", storageEngines)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// GetParameterCommand is getParameter over State.Params.
func GetParameterCommand() *Command {
	return &Command{
		Name:      "getParameter",
		Handler:   runGetParameter,
		Auth:      AuthOnCluster(auth.GetParameter),
		Help:      "get administrative option(s)\nexample:\n{ getParameter:1, notablescan:1 }\n{ getParameter:'*' } or { getParameter:{allParameters:true} }\n{ getParameter:{showDetails:true}, logLevel:1 }",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	}
}

// runGetParameter answers {getParameter: 1, name: <any>, ...}, {getParameter: "*"} (all) and
// {getParameter: {allParameters: bool, showDetails: bool}, ...}. Unknown names are skipped;
// finding none is an error, as in mongod.
func runGetParameter(_ context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	params := env.State.Params
	elems, err := cmd.Elements()
	if err != nil || len(elems) == 0 {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid command: %v", err)
	}
	arg := elems[0].Value()
	all, details := false, false
	switch arg.Type {
	case bsoncore.TypeString:
		all = arg.StringValue() == "*"
	case bsoncore.TypeEmbeddedDocument:
		d := arg.Document()
		// GetParameterOptions is IDL: its flags are bools (null counts as absent).
		for _, f := range []struct {
			name string
			dst  *bool
		}{{"allParameters", &all}, {"showDetails", &details}} {
			v := lookupValue(d, f.name)
			switch v.Type {
			case 0, bsoncore.TypeNull, bsoncore.TypeUndefined:
			case bsoncore.TypeBoolean:
				*f.dst = v.Boolean()
			default:
				return nil, mongoerr.Newf(mongoerr.TypeMismatch,
					"BSON field 'getParameter.%s' is the wrong type '%s', expected type 'bool'", f.name, bsonutil.TypeName(v.Type))
			}
		}
	}
	var names []string
	if all {
		names = params.Names()
	} else {
		for _, e := range elems[1:] {
			if GenericArguments[e.Key()] {
				continue
			}
			if _, ok := params.Spec(e.Key()); ok {
				names = append(names, e.Key())
			}
		}
	}
	if len(names) == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "no option found to get")
	}
	idx, b := bsoncore.AppendDocumentStart(nil)
	for _, n := range names {
		if !details {
			b = params.AppendValue(b, n, n)
			continue
		}
		s, _ := params.Spec(n)
		di, b2 := bsoncore.AppendDocumentElementStart(b, n)
		b2 = params.AppendValue(b2, "value", n)
		b2 = bsoncore.AppendBooleanElement(b2, "settableAtRuntime", s.Runtime)
		b2 = bsoncore.AppendBooleanElement(b2, "settableAtStartup", s.Startup)
		b, _ = bsoncore.AppendDocumentEnd(b2, di)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}

// ListCommandsCommand is listCommands over the registry serving the request.
func ListCommandsCommand() *Command {
	return &Command{
		Name:      "listCommands",
		PreAuth:   true,
		Handler:   runListCommands,
		Help:      "get a list of all db commands",
		Secondary: SecondaryAlways,
	}
}

// runListCommands lists the registry: {commands: {<name>: {help, requiresAuth, secondaryOk,
// adminOnly, apiVersions, deprecatedApiVersions}}}. Test-only commands appear only when
// enabled, as they exist only then in mongod.
func runListCommands(_ context.Context, env *Env, _ bsoncore.Document) (bsoncore.Document, error) {
	testCmds := env.State.Params.Bool("enableTestCommands")
	idx, b := bsoncore.AppendDocumentStart(nil)
	ci, b := bsoncore.AppendDocumentElementStart(b, "commands")
	for _, c := range env.Registry.List() {
		if c.TestOnly && !testCmds {
			continue
		}
		di, b2 := bsoncore.AppendDocumentElementStart(b, c.Name)
		b2 = bsoncore.AppendStringElement(b2, "help", c.Help)
		b2 = bsoncore.AppendBooleanElement(b2, "requiresAuth", c.RequiresAuth)
		b2 = bsoncore.AppendBooleanElement(b2, "secondaryOk", c.SecondaryOk)
		b2 = bsoncore.AppendBooleanElement(b2, "adminOnly", c.AdminOnly)
		b2 = appendStrings(b2, "apiVersions", APIVersionsOf(c))
		b2 = appendStrings(b2, "deprecatedApiVersions", c.DeprecatedAPIVersions)
		b, _ = bsoncore.AppendDocumentEnd(b2, di)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, ci)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}

// Truthy reports whether v counts as true the way BSONElement::trueValue does.
func Truthy(v bsoncore.Value) bool {
	switch v.Type {
	case bsoncore.TypeBoolean:
		return v.Boolean()
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		f, _ := AsFloat(v)
		return f != 0
	case bsoncore.TypeNull, bsoncore.TypeUndefined, 0:
		return false
	}
	return true
}

func appendStrings(b []byte, key string, ss []string) []byte {
	idx, b := bsoncore.AppendArrayElementStart(b, key)
	for i, s := range ss {
		b = bsoncore.AppendStringElement(b, strconv.Itoa(i), s)
	}
	b, _ = bsoncore.AppendArrayEnd(b, idx)
	return b
}

// EndSessionsCommand is endSessions over State.Sessions (every role keeps a logical session
// cache: the server vivifies each request's lsid there).
func EndSessionsCommand() *Command {
	return &Command{
		Name: "endSessions",
		Handler: func(_ context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
			keys, err := ownLsidArg(env, cmd)
			if err != nil {
				return nil, err
			}
			env.State.Sessions.End(keys)
			return EmptyDoc, nil
		},
		Help:      "end a set of logical sessions",
		Secondary: SecondaryAlways,
		// Sessions are the user's own: any authenticated user ends theirs.
		Auth: AuthAnyUser,
	}
}

// GetCmdLineOptsCommand is getCmdLineOpts over State.CmdLine.
func GetCmdLineOptsCommand() *Command {
	return &Command{
		Name: "getCmdLineOpts",
		Auth: AuthOnCluster(auth.GetCmdLineOpts),
		Handler: func(_ context.Context, env *Env, _ bsoncore.Document) (bsoncore.Document, error) {
			cl := env.State.CmdLine
			parsed := cl.Parsed
			if parsed == nil {
				parsed = EmptyDoc
			}
			idx, b := bsoncore.AppendDocumentStart(nil)
			b = appendStrings(b, "argv", cl.Argv)
			b = bsoncore.AppendDocumentElement(b, "parsed", parsed)
			b, _ = bsoncore.AppendDocumentEnd(b, idx)
			return b, nil
		},
		Help:      "get argv",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	}
}
