// Package process is what every Humongo server binary (humongod, humongos) does around its
// server, the part MongoDB's mongod and mongos share in their main: the options every server
// process takes (net.port, net.bindIp, net.tls, --config with mongod's YAML errors, systemLog,
// processManagement, setParameter, --version) and the getCmdLineOpts `parsed` document built
// from them, which each binary extends with its own (storage and replication for humongod,
// sharding.configDB for humongos); the TLS configurations net.tls makes for the server's
// listeners and for its internal clients to other members (tls.go); the startup log lines; --fork (Fork, NotifyReady); and
// running the server until a signal or the shutdown command, with SIGUSR1 rotating the log,
// with mongod's log ids and exit codes. The spec does not cover process options;
// the reference is MongoDB's configuration file options and ExitCode enum.
//
// A flag or config key every server process takes is added here once (NewFlags, File,
// Options, Options.Parsed). Common options only some binaries take yet form a Group the binary
// enables: humongod enables NetExtras and SystemLog; humongos gains them by passing them to
// NewFlags (its flags, YAML keys and `parsed` follow), and the group goes away once every
// binary has it.
package process

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"gopkg.in/yaml.v3"

	"humongo/internal/logv2"
)

// ErrBadOptions marks option errors (the process exits with ExitBadOptions).
var ErrBadOptions = errors.New("bad options")

// ErrHelp is Parse's answer to --help, after printing the options: the process exits 0.
var ErrHelp = errors.New("help requested")

// Group is a set of optional common options: MongoDB gives them to every server process, a
// Humongo binary accepts them once it enables the group.
type Group uint

const (
	// NetExtras: --bind_ip_all, --ipv6, --maxConns, --networkMessageCompressors,
	// --nounixsocket, --unixSocketPrefix; net.bindIpAll, net.ipv6, net.maxIncomingConnections,
	// net.compression.compressors, net.unixDomainSocket.
	NetExtras Group = 1 << iota
	// SystemLog: --logpath, --logappend, --logRotate, --quiet, -v/--verbose, --fork,
	// --pidfilepath, --timeStampFormat; systemLog.destination, path, quiet, logAppend,
	// logRotate, verbosity, component, timeStampFormat, traceAllExceptions; processManagement.
	SystemLog
)

// Defaults, as mongod's and mongos's.
const (
	defaultPort     = 27017
	defaultBindIP   = "127.0.0.1"
	defaultMaxConns = 1000000
)

// Options are the common effective settings. They come from, in decreasing precedence:
// command-line flags, the YAML config file (--config), and the defaults — the order mongod
// applies.
type Options struct {
	ConfigPath string

	Port int
	// PortSet: --port or net.port was given (mongod's default port then depends on
	// sharding.clusterRole: 27019 for a config server, 27018 for a shard).
	PortSet     bool
	BindIPs     []string
	BindIPAll   bool     // NetExtras
	IPv6        bool     // NetExtras: --ipv6 / net.ipv6
	MaxConns    int      // NetExtras
	Compressors []string // NetExtras

	LogPath   string // SystemLog; empty: stdout
	LogAppend bool   // SystemLog
	// LogRotate is what log rotation does to the file: "rename" (the default) or "reopen".
	LogRotate   string // SystemLog
	Quiet       bool   // SystemLog
	LogToSyslog bool   // SystemLog
	// Verbosity is -v (1) to -vvvvv (5), --verbose or systemLog.verbosity: the startup value
	// of the logLevel parameter (SystemLog).
	Verbosity int
	// Fork is --fork / processManagement.fork: run in the background once ready (SystemLog).
	Fork bool
	// PIDFile is --pidfilepath / processManagement.pidFilePath (SystemLog).
	PIDFile string

	// Warnings are options accepted that have no effect in Humongo, one line each, for the
	// binary to log at startup (LogWarnings).
	Warnings []string

	// SetParameters are name=value pairs from the config file and then the command line (a
	// later assignment of the same name wins).
	SetParameters [][2]string

	// TLS is net.tls (tls.go): Validate loads its files; ServerTLS and ClientSecurity give
	// them to the server and to its internal clients.
	TLS TLSOptions

	Version bool

	// Auth is --auth / security.authorization: enabled (--noauth or "disabled" turn it off).
	Auth bool
	// KeyFile is --keyFile / security.keyFile; Key is its key with whitespace removed
	// (ReadKey). A keyfile turns authorization on, as in mongod.
	KeyFile, Key string
	// ClusterAuthMode is --clusterAuthMode / security.clusterAuthMode ("keyFile" with a
	// keyfile; the x509 modes are refused).
	ClusterAuthMode string

	groups Group
}

// File is the common part of the YAML configuration. A binary decodes its own sections
// together with it (see Flags.Parse), so a key nobody knows is an error, as mongod reports
// "Unrecognized option".
type File struct {
	Net struct {
		Port                   *int           `yaml:"port"`
		BindIP                 *string        `yaml:"bindIp"`
		BindIPAll              *bool          `yaml:"bindIpAll"`
		IPv6                   *bool          `yaml:"ipv6"`
		UnixDomainSocket       map[string]any `yaml:"unixDomainSocket"`
		MaxIncomingConnections *int           `yaml:"maxIncomingConnections"`
		Compression            *struct {
			Compressors *string `yaml:"compressors"`
		} `yaml:"compression"`
		TLS *tlsFile `yaml:"tls"`
	} `yaml:"net"`
	SystemLog *struct {
		Destination        *string        `yaml:"destination"`
		Path               *string        `yaml:"path"`
		Quiet              *bool          `yaml:"quiet"`
		LogAppend          *bool          `yaml:"logAppend"`
		LogRotate          *string        `yaml:"logRotate"`
		Verbosity          *int           `yaml:"verbosity"`
		Component          map[string]any `yaml:"component"`
		TimeStampFormat    *string        `yaml:"timeStampFormat"`
		TraceAllExceptions *bool          `yaml:"traceAllExceptions"`
		SyslogFacility     *string        `yaml:"syslogFacility"`
	} `yaml:"systemLog"`
	ProcessManagement *struct {
		Fork         *bool   `yaml:"fork"`
		PIDFilePath  *string `yaml:"pidFilePath"`
		TimeZoneInfo *string `yaml:"timeZoneInfo"`
	} `yaml:"processManagement"`
	SetParameter map[string]any `yaml:"setParameter"`
	Security     *struct {
		Authorization     *string `yaml:"authorization"`
		KeyFile           *string `yaml:"keyFile"`
		ClusterAuthMode   *string `yaml:"clusterAuthMode"`
		JavascriptEnabled *bool   `yaml:"javascriptEnabled"`
	} `yaml:"security"`
}

// Flags is a binary's flag set with the common flags registered on it.
type Flags struct {
	*flag.FlagSet
	groups Group
	set    map[string]bool
	// override applies a common flag given on the command line over the config file.
	override map[string]func(o *Options)

	configPath, compressors *string
	version                 *bool
	cliParams               [][2]string
	verbose                 verbosityFlag
	name                    string
	stderr                  io.Writer
	// ignored are the flags accepted with no effect, by name.
	ignored map[string]bool
}

// overrides registers how the flag name, whose value p holds, overrides the config file.
func overrides[T any](f *Flags, name string, p *T, set func(o *Options, v T)) {
	f.override[name] = func(o *Options) { set(o, *p) }
}

// NewFlags returns the flag set of the binary name with the common flags of groups
// registered; the binary adds its own to the embedded FlagSet before Parse.
func NewFlags(name string, groups Group, stderr io.Writer) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the flag package's own error lines; --help writes to stderr
	f := &Flags{FlagSet: fs, groups: groups, override: map[string]func(*Options){}, name: name, stderr: stderr}
	// A bad flag is reported in mongod's words (see Parse), without the whole usage text;
	// --help prints it.
	fs.Usage = func() {}
	overrides(f, "port", fs.Int("port", defaultPort, "TCP port to listen on (0: an ephemeral port)"),
		func(o *Options, v int) { o.Port = v })
	overrides(f, "bind_ip", fs.String("bind_ip", defaultBindIP, "comma-separated IP addresses to listen on"),
		func(o *Options, v string) { o.BindIPs = splitList(v) })
	f.configPath = fs.String("config", "", "YAML configuration file")
	fs.StringVar(f.configPath, "f", "", "alias for --config")
	f.version = fs.Bool("version", false, "show version information")
	fs.Var(setParamFlag{&f.cliParams}, "setParameter", "set a server parameter: name=value (repeatable)")
	overrides(f, "auth", fs.Bool("auth", false, "run with authorization (users must authenticate)"),
		func(o *Options, v bool) { o.Auth = v })
	overrides(f, "noauth", fs.Bool("noauth", false, "run without authorization"),
		func(o *Options, v bool) { o.Auth = o.Auth && !v })
	overrides(f, "keyFile", fs.String("keyFile", "", "key file for internal authentication between cluster members"),
		func(o *Options, v string) { o.KeyFile = v })
	overrides(f, "clusterAuthMode", fs.String("clusterAuthMode", "", "internal authentication mode: keyFile"),
		func(o *Options, v string) { o.ClusterAuthMode = v })
	registerTLS(f)
	if groups&NetExtras != 0 {
		overrides(f, "bind_ip_all", fs.Bool("bind_ip_all", false, "listen on all IPv4 addresses (and all IPv6 ones with --ipv6)"),
			func(o *Options, v bool) { o.BindIPAll = v })
		overrides(f, "maxConns", fs.Int("maxConns", defaultMaxConns, "maximum number of simultaneous connections"),
			func(o *Options, v int) { o.MaxConns = v })
		f.compressors = fs.String("networkMessageCompressors", "snappy,zstd,zlib", "comma-separated compressors, or 'disabled'")
		overrides(f, "networkMessageCompressors", f.compressors, func(o *Options, v string) { o.Compressors = splitList(v) })
	}
	if groups&SystemLog != 0 {
		overrides(f, "logpath", fs.String("logpath", "", "log file (default: standard output)"),
			func(o *Options, v string) { o.LogPath = v })
		overrides(f, "logappend", fs.Bool("logappend", false, "append to the log file instead of rotating it"),
			func(o *Options, v bool) { o.LogAppend = v })
		overrides(f, "quiet", fs.Bool("quiet", false, "quieter output"), func(o *Options, v bool) { o.Quiet = v })
		overrides(f, "logRotate", fs.String("logRotate", "rename", "log rotation: 'rename' moves the file aside, 'reopen' reopens it (needs --logappend)"),
			func(o *Options, v string) { o.LogRotate = v })
		for n := 1; n <= 5; n++ {
			fs.Bool(strings.Repeat("v", n), false, fmt.Sprintf("log verbosity %d (as logLevel=%d)", n, n))
		}
		fs.Var(&f.verbose, "verbose", "log verbosity: --verbose (1) or --verbose=vv... (the number of v)")
		overrides(f, "fork", fs.Bool("fork", false, "run in the background once ready (needs --logpath or --syslog)"),
			func(o *Options, v bool) { o.Fork = v })
		overrides(f, "pidfilepath", fs.String("pidfilepath", "", "file to write the process id to"),
			func(o *Options, v string) { o.PIDFile = v })
		f.ignore("timeStampFormat", "")
		f.ignore("syslogFacility", "")
	}
	if groups&NetExtras != 0 {
		overrides(f, "ipv6", fs.Bool("ipv6", false, "enable IPv6 (--bind_ip_all then also listens on ::)"),
			func(o *Options, v bool) { o.IPv6 = v })
		f.ignore("nounixsocket", "bool")
		f.ignore("unixSocketPrefix", "")
		f.ignore("filePermissions", "")
	}
	return f
}

// ignore registers the mongod flag name, which has no effect in Humongo: it is accepted
// with a startup warning. kind "bool" makes it a switch, otherwise it takes a value.
func (f *Flags) ignore(name, kind string) {
	if f.ignored == nil {
		f.ignored = map[string]bool{}
	}
	f.ignored[name] = true
	if kind == "bool" {
		f.Bool(name, false, "accepted for mongod compatibility; no effect")
	} else {
		f.String(name, "", "accepted for mongod compatibility; no effect")
	}
}

// Ignore registers a binary's own mongod flag that has no effect in Humongo (see ignore).
func (f *Flags) Ignore(name string, isBool bool) {
	kind := ""
	if isBool {
		kind = "bool"
	}
	f.ignore(name, kind)
}

// IsSet reports whether the flag name was given on the command line (valid after Parse).
func (f *Flags) IsSet(name string) bool { return f.set[name] }

// Parse parses args (argv without the program name) and returns the common options: the
// config file first, if --config names one, then the flags given over it. ext points to the
// binary's own config-file sections (a struct with yaml tags), decoded from the same file so a
// key neither knows is an error; the binary applies them and then its own flags (see IsSet).
// Parse checks nothing a binary might want to skip (see Validate).
func Parse[E any](f *Flags, args []string, ext *E) (*Options, error) {
	if err := f.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(f.stderr, "Usage: %s [options]\n", f.name)
			f.SetOutput(f.stderr)
			f.PrintDefaults()
			f.SetOutput(io.Discard)
			return nil, ErrHelp
		}
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
			msg = fmt.Sprintf("unrecognised option '-%s'", name)
		}
		return nil, fmt.Errorf("%w: Error parsing command line: %s\ntry '%s --help' for more information", ErrBadOptions, msg, f.name)
	}
	if f.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", ErrBadOptions, f.Args())
	}
	f.set = map[string]bool{}
	f.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })

	o := &Options{Port: defaultPort, BindIPs: []string{defaultBindIP}, ConfigPath: *f.configPath,
		Version: *f.version, groups: f.groups}
	if f.groups&NetExtras != 0 {
		o.MaxConns = defaultMaxConns
		o.Compressors = splitList(*f.compressors)
	}
	if o.ConfigPath != "" {
		var cf fileWith[E]
		if err := decodeFile(o.ConfigPath, &cf); err != nil {
			return nil, err
		}
		if err := o.applyFile(&cf.File); err != nil {
			return nil, err
		}
		*ext = cf.Ext
	}
	o.PortSet = o.PortSet || f.set["port"]
	// Flags override the config file.
	for name := range f.set {
		if set := f.override[name]; set != nil {
			set(o)
		}
	}
	// -v ... -vvvvv and --verbose given on the command line override systemLog.verbosity;
	// the highest of them counts.
	verbosity, given := 0, false
	for n := 1; n <= 5; n++ {
		if fl := f.Lookup(strings.Repeat("v", n)); fl != nil && f.set[fl.Name] {
			given = true
			if fl.Value.String() == "true" {
				verbosity = max(verbosity, n)
			}
		}
	}
	if f.set["verbose"] {
		given, verbosity = true, max(verbosity, int(f.verbose))
	}
	if given {
		o.Verbosity = verbosity
	}
	for name := range f.set {
		if f.ignored[name] {
			o.Warnings = append(o.Warnings, "--"+name)
		}
	}
	sort.Strings(o.Warnings)
	o.SetParameters = append(o.SetParameters, f.cliParams...)
	if o.BindIPAll {
		// mongod listens on every IPv4 address, and with --ipv6 also on every IPv6 one; each
		// wildcard listens on its own family (see internal/server).
		o.BindIPs = []string{"0.0.0.0"}
		if o.IPv6 {
			o.BindIPs = append(o.BindIPs, "::")
		}
	}
	if len(o.Compressors) == 1 && o.Compressors[0] == "disabled" {
		o.Compressors = []string{}
	}
	if err := o.readSecurity(); err != nil {
		return nil, err
	}
	return o, nil
}

// readSecurity checks the security options and reads the keyfile (mongod's rules: 6 to 1024
// base64 characters once whitespace is removed, and on POSIX no permissions for group or
// others).
func (o *Options) readSecurity() error {
	switch o.ClusterAuthMode {
	case "":
		if o.KeyFile != "" {
			o.ClusterAuthMode = "keyFile"
		}
	case "keyFile":
		if o.KeyFile == "" {
			return fmt.Errorf("%w: --clusterAuthMode keyFile requires --keyFile", ErrBadOptions)
		}
	case "sendKeyFile", "sendX509", "x509":
		return fmt.Errorf("%w: --clusterAuthMode %s is not supported: Humongo authenticates members with a keyfile only", ErrBadOptions, o.ClusterAuthMode)
	default:
		return fmt.Errorf("%w: unsupported value for clusterAuthMode %s", ErrBadOptions, o.ClusterAuthMode)
	}
	if o.KeyFile == "" {
		return nil
	}
	st, err := os.Stat(o.KeyFile)
	if err != nil {
		return fmt.Errorf("%w: error getting file %s: %w", ErrBadOptions, o.KeyFile, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%w: permissions on %s are too open", ErrBadOptions, o.KeyFile)
	}
	data, err := os.ReadFile(o.KeyFile)
	if err != nil {
		return fmt.Errorf("%w: error reading file %s: %w", ErrBadOptions, o.KeyFile, err)
	}
	var key strings.Builder
	for _, c := range string(data) {
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/', c == '=':
			key.WriteRune(c)
		default:
			return fmt.Errorf("%w: invalid char in key file %s: %q", ErrBadOptions, o.KeyFile, c)
		}
	}
	switch k := key.String(); {
	case len(k) < 6:
		return fmt.Errorf("%w: security key in %s is too short (at least 6 characters)", ErrBadOptions, o.KeyFile)
	case len(k) > 1024:
		return fmt.Errorf("%w: security key in %s is too long (at most 1024 characters)", ErrBadOptions, o.KeyFile)
	default:
		o.Key = k
	}
	return nil
}

// SecurityDoc is the security section of Parsed (nil when no security option is set).
func (o *Options) SecurityDoc() bsoncore.Document {
	if !o.Auth && o.KeyFile == "" {
		return nil
	}
	b := bsoncore.NewDocumentBuilder()
	if o.Auth {
		b.AppendString("authorization", "enabled")
	}
	if o.KeyFile != "" {
		b.AppendString("clusterAuthMode", o.ClusterAuthMode).AppendString("keyFile", o.KeyFile)
	}
	return b.Build()
}

// Validate checks the common options.
// Validate checks the common options and loads the TLS files they name (a file that cannot
// be used is a bad option, as mongod fails startup on it).
func (o *Options) Validate() error {
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("%w: port number must be between 0 and 65535", ErrBadOptions)
	}
	if len(o.BindIPs) == 0 {
		return fmt.Errorf("%w: bind_ip is empty", ErrBadOptions)
	}
	if o.Fork && o.LogPath == "" && !o.LogToSyslog {
		return fmt.Errorf("%w: --fork has to be used with --logpath or --syslog", ErrBadOptions)
	}
	switch o.LogRotate {
	case "", "rename":
	case "reopen":
		if !o.LogAppend {
			return fmt.Errorf("%w: logAppend must equal true if logRotate is set to reopen", ErrBadOptions)
		}
	default:
		return fmt.Errorf("%w: unsupported value for logRotate %s", ErrBadOptions, o.LogRotate)
	}
	return o.TLS.validate()
}

// fileWith decodes the common sections and a binary's own from one document.
type fileWith[E any] struct {
	File `yaml:",inline"`
	Ext  E `yaml:",inline"`
}

func decodeFile(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: Error reading config file: %v", ErrBadOptions, err)
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		// A syntax error: yaml's message names the line, and no Go type.
		return fmt.Errorf("%w: Error parsing YAML config file %s: %v", ErrBadOptions, path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := checkYAML(&doc, reflect.TypeOf(into), ""); err != nil {
		return fmt.Errorf("%w: Error parsing YAML config file %s: %v", ErrBadOptions, path, err)
	}
	if err := doc.Decode(into); err != nil {
		return fmt.Errorf("%w: Error parsing YAML config file %s: invalid value", ErrBadOptions, path)
	}
	return nil
}

func (o *Options) applyFile(cf *File) error {
	unrecognized := func(key string) error {
		return fmt.Errorf("%w: Error parsing YAML config file %s: Unrecognized option: %s", ErrBadOptions, o.ConfigPath, key)
	}
	if v := cf.Net.Port; v != nil {
		o.Port, o.PortSet = *v, true
	}
	if v := cf.Net.BindIP; v != nil {
		o.BindIPs = splitList(*v)
	}
	if o.groups&NetExtras == 0 {
		switch {
		case cf.Net.BindIPAll != nil:
			return unrecognized("net.bindIpAll")
		case cf.Net.MaxIncomingConnections != nil:
			return unrecognized("net.maxIncomingConnections")
		case cf.Net.Compression != nil:
			return unrecognized("net.compression")
		}
	}
	if sec := cf.Security; sec != nil {
		if v := sec.Authorization; v != nil {
			switch *v {
			case "enabled":
				o.Auth = true
			case "disabled":
				o.Auth = false
			default:
				return fmt.Errorf("%w: Error parsing YAML config file %s: security.authorization must be 'enabled' or 'disabled'", ErrBadOptions, o.ConfigPath)
			}
		}
		if v := sec.KeyFile; v != nil {
			o.KeyFile = *v
		}
		if v := sec.ClusterAuthMode; v != nil {
			o.ClusterAuthMode = *v
		}
		if sec.JavascriptEnabled != nil {
			o.Warnings = append(o.Warnings, "security.javascriptEnabled")
		}
	}
	if v := cf.Net.BindIPAll; v != nil {
		o.BindIPAll = *v
	}
	if v := cf.Net.IPv6; v != nil {
		o.IPv6 = *v
	}
	o.TLS.applyFile(cf.Net.TLS)
	if cf.Net.UnixDomainSocket != nil {
		o.Warnings = append(o.Warnings, "net.unixDomainSocket")
	}
	if v := cf.Net.MaxIncomingConnections; v != nil {
		o.MaxConns = *v
	}
	if c := cf.Net.Compression; c != nil && c.Compressors != nil {
		o.Compressors = splitList(*c.Compressors)
	}
	if sl := cf.SystemLog; sl != nil {
		if o.groups&SystemLog == 0 {
			return unrecognized("systemLog")
		}
		if v := sl.Destination; v != nil {
			switch *v {
			case "file":
			case "syslog":
				o.LogToSyslog = true
			default:
				return fmt.Errorf("%w: systemLog.destination must be 'file' or 'syslog'", ErrBadOptions)
			}
		}
		if v := sl.Path; v != nil {
			o.LogPath = *v
		}
		if v := sl.Quiet; v != nil {
			o.Quiet = *v
		}
		if v := sl.LogAppend; v != nil {
			o.LogAppend = *v
		}
		if v := sl.LogRotate; v != nil {
			o.LogRotate = *v
		}
		if v := sl.Verbosity; v != nil {
			if *v < 0 {
				return fmt.Errorf("%w: systemLog.verbosity YAML Config cannot be negative", ErrBadOptions)
			}
			o.Verbosity = *v
		}
		for key, set := range map[string]bool{"systemLog.component": sl.Component != nil,
			"systemLog.timeStampFormat": sl.TimeStampFormat != nil, "systemLog.traceAllExceptions": sl.TraceAllExceptions != nil,
			"systemLog.syslogFacility": sl.SyslogFacility != nil} {
			if set {
				o.Warnings = append(o.Warnings, key)
			}
		}
	}
	if pm := cf.ProcessManagement; pm != nil {
		if o.groups&SystemLog == 0 {
			return unrecognized("processManagement")
		}
		if v := pm.Fork; v != nil {
			o.Fork = *v
		}
		if v := pm.PIDFilePath; v != nil {
			o.PIDFile = *v
		}
		if pm.TimeZoneInfo != nil {
			o.Warnings = append(o.Warnings, "processManagement.timeZoneInfo")
		}
	}
	names := make([]string, 0, len(cf.SetParameter))
	for k := range cf.SetParameter {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		o.SetParameters = append(o.SetParameters, [2]string{k, fmt.Sprint(cf.SetParameter[k])})
	}
	return nil
}

// Parsed returns the effective options in the shape getCmdLineOpts reports as `parsed`:
// config, net, the binary's own sections (appended by sections, which may be nil; SystemLogDoc
// is there for a binary that reports systemLog among them), setParameter.
func (o *Options) Parsed(sections func(b *bsoncore.DocumentBuilder)) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	if o.ConfigPath != "" {
		b.AppendString("config", o.ConfigPath)
	}
	net := bsoncore.NewDocumentBuilder().
		AppendString("bindIp", strings.Join(o.BindIPs, ",")).
		AppendInt32("port", int32(o.Port))
	if o.groups&NetExtras != 0 {
		net.AppendInt32("maxIncomingConnections", int32(o.MaxConns))
		if o.BindIPAll {
			net.AppendBoolean("bindIpAll", true)
		}
		if o.IPv6 {
			net.AppendBoolean("ipv6", true)
		}
	}
	if t := o.TLS.parsed(); t != nil {
		net.AppendDocument("tls", t)
	}
	b.AppendDocument("net", net.Build())
	if sd := o.SecurityDoc(); sd != nil {
		b.AppendDocument("security", sd)
	}
	if sections != nil {
		sections(b)
	}
	if len(o.SetParameters) > 0 {
		sp := bsoncore.NewDocumentBuilder()
		for _, kv := range o.SetParameters {
			sp.AppendString(kv[0], kv[1])
		}
		b.AppendDocument("setParameter", sp.Build())
	}
	return b.Build()
}

// SystemLogDoc is the systemLog section of Parsed.
func (o *Options) SystemLogDoc() bsoncore.Document {
	sl := bsoncore.NewDocumentBuilder()
	if o.LogPath != "" {
		sl.AppendString("destination", "file").AppendString("path", o.LogPath).AppendBoolean("logAppend", o.LogAppend)
	}
	if o.Quiet {
		sl.AppendBoolean("quiet", true)
	}
	if o.Verbosity > 0 {
		sl.AppendInt32("verbosity", int32(o.Verbosity))
	}
	return sl.Build()
}

// ProcessManagementDoc is the processManagement section of Parsed, nil when empty.
func (o *Options) ProcessManagementDoc() bsoncore.Document {
	if !o.Fork && o.PIDFile == "" {
		return nil
	}
	b := bsoncore.NewDocumentBuilder()
	if o.Fork {
		b.AppendBoolean("fork", true)
	}
	if o.PIDFile != "" {
		b.AppendString("pidFilePath", o.PIDFile)
	}
	return b.Build()
}

// StartupParameters are the server parameters to set at startup, in order: logLevel from
// the verbosity options (-v, systemLog.verbosity), then every setParameter (so an explicit
// --setParameter logLevel=N wins).
func (o *Options) StartupParameters() [][2]string {
	var out [][2]string
	if o.Verbosity > 0 {
		out = append(out, [2]string{"logLevel", strconv.Itoa(min(o.Verbosity, 5))})
	}
	return append(out, o.SetParameters...)
}

// OpenLog opens the log destination (SystemLog): stdout, or --logpath, which without
// --logappend is rotated aside first (renamed with a timestamp suffix) as mongod does, and
// which the logRotate command and SIGUSR1 rotate as --logRotate says.
func (o *Options) OpenLog(stdout io.Writer) (io.Writer, func(), error) {
	if o.LogPath == "" || o.LogToSyslog {
		return stdout, func() {}, nil
	}
	f, err := logv2.OpenFile(o.LogPath, o.LogAppend, o.LogRotate != "reopen")
	if err != nil {
		return nil, nil, err
	}
	return f, func() { _ = f.Close() }, nil
}

// verbosityFlag is --verbose: alone it means 1, --verbose=vvv the number of v.
type verbosityFlag int

func (v *verbosityFlag) String() string   { return "" }
func (v *verbosityFlag) IsBoolFlag() bool { return true }
func (v *verbosityFlag) Set(s string) error {
	switch {
	case s == "true":
		*v = 1
	case s == "false":
		*v = 0
	case strings.Trim(s, "v") == "":
		*v = verbosityFlag(len(s))
	default:
		return fmt.Errorf("--verbose %q: expected a string of v (vv, vvv, ...)", s)
	}
	return nil
}

type setParamFlag struct{ pairs *[][2]string }

func (f setParamFlag) String() string { return "" }
func (f setParamFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("--setParameter %q: expected name=value", v)
	}
	*f.pairs = append(*f.pairs, [2]string{name, value})
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
