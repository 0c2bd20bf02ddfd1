package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"gopkg.in/yaml.v3"
)

// Options are humongod's effective settings. They come from, in decreasing precedence:
// command-line flags, the YAML config file (--config), and the defaults below — the same
// order mongod applies.
type Options struct {
	ConfigPath string

	Port        int
	BindIPs     []string
	BindIPAll   bool
	MaxConns    int
	Compressors []string

	DBPath string

	LogPath     string // empty: stdout
	LogAppend   bool
	Quiet       bool
	LogToSyslog bool

	SlowMS int

	// ReplSet is --replSet / replication.replSetName: run as a replica-set member.
	ReplSet string
	// OplogSizeMB is --oplogSize / replication.oplogSizeMB (0: the default).
	OplogSizeMB int

	// SetParameters are name=value pairs from the config file and then the command line (a
	// later assignment of the same name wins).
	SetParameters [][2]string

	Version bool
}

// Defaults, as mongod's.
const (
	defaultPort   = 27017
	defaultBindIP = "127.0.0.1"
	defaultDBPath = "./data"
	defaultSlowMS = 100
)

// configFile is the subset of mongod's YAML configuration humongod understands. Unknown keys
// are an error, as mongod reports "Unrecognized option".
type configFile struct {
	Net struct {
		Port                   *int    `yaml:"port"`
		BindIP                 *string `yaml:"bindIp"`
		BindIPAll              *bool   `yaml:"bindIpAll"`
		MaxIncomingConnections *int    `yaml:"maxIncomingConnections"`
		Compression            struct {
			Compressors *string `yaml:"compressors"`
		} `yaml:"compression"`
	} `yaml:"net"`
	Storage struct {
		DBPath  *string        `yaml:"dbPath"`
		Journal map[string]any `yaml:"journal"`
	} `yaml:"storage"`
	SystemLog struct {
		Destination *string `yaml:"destination"`
		Path        *string `yaml:"path"`
		Quiet       *bool   `yaml:"quiet"`
		LogAppend   *bool   `yaml:"logAppend"`
	} `yaml:"systemLog"`
	SetParameter       map[string]any `yaml:"setParameter"`
	OperationProfiling struct {
		SlowOpThresholdMs *int    `yaml:"slowOpThresholdMs"`
		Mode              *string `yaml:"mode"`
	} `yaml:"operationProfiling"`
	ProcessManagement map[string]any `yaml:"processManagement"`
	Replication       struct {
		ReplSetName *string `yaml:"replSetName"`
		OplogSizeMB *int    `yaml:"oplogSizeMB"`
	} `yaml:"replication"`
}

// errBadOptions marks option errors (mongod exits with code 2, EXIT_BADOPTIONS).
var errBadOptions = errors.New("bad options")

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

// parseOptions parses argv (without the program name).
func parseOptions(args []string, stderr io.Writer) (*Options, error) {
	fs := flag.NewFlagSet("humongod", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		port        = fs.Int("port", defaultPort, "TCP port to listen on (0: an ephemeral port)")
		bindIP      = fs.String("bind_ip", defaultBindIP, "comma-separated IP addresses to listen on")
		bindIPAll   = fs.Bool("bind_ip_all", false, "listen on all IPv4 and IPv6 addresses")
		maxConns    = fs.Int("maxConns", 1000000, "maximum number of simultaneous connections")
		compressors = fs.String("networkMessageCompressors", "snappy,zstd,zlib", "comma-separated compressors, or 'disabled'")
		dbPath      = fs.String("dbpath", defaultDBPath, "directory for datafiles (created if missing)")
		configPath  = fs.String("config", "", "YAML configuration file")
		logPath     = fs.String("logpath", "", "log file (default: standard output)")
		logAppend   = fs.Bool("logappend", false, "append to the log file instead of rotating it")
		quiet       = fs.Bool("quiet", false, "quieter output")
		slowMS      = fs.Int("slowms", defaultSlowMS, "slow operation threshold in milliseconds")
		version     = fs.Bool("version", false, "show version information")
		replSet     = fs.String("replSet", "", "replica set name: run as a replica-set member")
		oplogSize   = fs.Int("oplogSize", 0, "size of the oplog in megabytes (0: default)")
	)
	fs.StringVar(configPath, "f", "", "alias for --config")
	var cliParams [][2]string
	fs.Var(setParamFlag{&cliParams}, "setParameter", "set a server parameter: name=value (repeatable)")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadOptions, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", errBadOptions, fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	o := &Options{
		Port: defaultPort, BindIPs: []string{defaultBindIP}, MaxConns: 1000000, DBPath: defaultDBPath,
		SlowMS: defaultSlowMS, Compressors: splitList(*compressors), ConfigPath: *configPath, Version: *version,
	}
	if *configPath != "" {
		if err := o.applyConfigFile(*configPath); err != nil {
			return nil, err
		}
	}
	// Flags override the config file.
	if set["port"] {
		o.Port = *port
	}
	if set["bind_ip"] {
		o.BindIPs = splitList(*bindIP)
	}
	if set["bind_ip_all"] {
		o.BindIPAll = *bindIPAll
	}
	if set["maxConns"] {
		o.MaxConns = *maxConns
	}
	if set["networkMessageCompressors"] {
		o.Compressors = splitList(*compressors)
	}
	if set["dbpath"] {
		o.DBPath = *dbPath
	}
	if set["logpath"] {
		o.LogPath = *logPath
	}
	if set["logappend"] {
		o.LogAppend = *logAppend
	}
	if set["quiet"] {
		o.Quiet = *quiet
	}
	if set["slowms"] {
		o.SlowMS = *slowMS
	}
	if set["replSet"] {
		o.ReplSet = *replSet
	}
	if set["oplogSize"] {
		o.OplogSizeMB = *oplogSize
	}
	if o.OplogSizeMB < 0 {
		return nil, fmt.Errorf("%w: oplogSize must be positive", errBadOptions)
	}
	o.SetParameters = append(o.SetParameters, cliParams...)
	if o.BindIPAll {
		o.BindIPs = []string{"0.0.0.0", "::"}
	}
	if len(o.Compressors) == 1 && o.Compressors[0] == "disabled" {
		o.Compressors = []string{}
	}
	if o.Port < 0 || o.Port > 65535 {
		return nil, fmt.Errorf("%w: port number must be between 0 and 65535", errBadOptions)
	}
	if len(o.BindIPs) == 0 {
		return nil, fmt.Errorf("%w: bind_ip is empty", errBadOptions)
	}
	return o, nil
}

func (o *Options) applyConfigFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: Error reading config file: %v", errBadOptions, err)
	}
	var cf configFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cf); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: Error parsing YAML config file %s: %v", errBadOptions, path, err)
	}
	if v := cf.Net.Port; v != nil {
		o.Port = *v
	}
	if v := cf.Net.BindIP; v != nil {
		o.BindIPs = splitList(*v)
	}
	if v := cf.Net.BindIPAll; v != nil {
		o.BindIPAll = *v
	}
	if v := cf.Net.MaxIncomingConnections; v != nil {
		o.MaxConns = *v
	}
	if v := cf.Net.Compression.Compressors; v != nil {
		o.Compressors = splitList(*v)
	}
	if v := cf.Storage.DBPath; v != nil {
		o.DBPath = *v
	}
	if v := cf.SystemLog.Destination; v != nil {
		switch *v {
		case "file":
		case "syslog":
			o.LogToSyslog = true
		default:
			return fmt.Errorf("%w: systemLog.destination must be 'file' or 'syslog'", errBadOptions)
		}
	}
	if v := cf.SystemLog.Path; v != nil {
		o.LogPath = *v
	}
	if v := cf.SystemLog.Quiet; v != nil {
		o.Quiet = *v
	}
	if v := cf.SystemLog.LogAppend; v != nil {
		o.LogAppend = *v
	}
	if v := cf.OperationProfiling.SlowOpThresholdMs; v != nil {
		o.SlowMS = *v
	}
	if v := cf.Replication.ReplSetName; v != nil {
		o.ReplSet = *v
	}
	if v := cf.Replication.OplogSizeMB; v != nil {
		o.OplogSizeMB = *v
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

// parsed returns the effective options in the shape getCmdLineOpts reports as `parsed`.
func (o *Options) parsed() bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	if o.ConfigPath != "" {
		b.AppendString("config", o.ConfigPath)
	}
	b.AppendDocument("net", bsoncore.NewDocumentBuilder().
		AppendString("bindIp", strings.Join(o.BindIPs, ",")).
		AppendInt32("port", int32(o.Port)).
		AppendInt32("maxIncomingConnections", int32(o.MaxConns)).Build())
	b.AppendDocument("storage", bsoncore.NewDocumentBuilder().AppendString("dbPath", o.DBPath).Build())
	sl := bsoncore.NewDocumentBuilder()
	if o.LogPath != "" {
		sl.AppendString("destination", "file").AppendString("path", o.LogPath).AppendBoolean("logAppend", o.LogAppend)
	}
	if o.Quiet {
		sl.AppendBoolean("quiet", true)
	}
	b.AppendDocument("systemLog", sl.Build())
	b.AppendDocument("operationProfiling", bsoncore.NewDocumentBuilder().
		AppendInt32("slowOpThresholdMs", int32(o.SlowMS)).Build())
	if o.ReplSet != "" {
		rb := bsoncore.NewDocumentBuilder().AppendString("replSetName", o.ReplSet)
		if o.OplogSizeMB > 0 {
			rb.AppendInt32("oplogSizeMB", int32(o.OplogSizeMB))
		}
		b.AppendDocument("replication", rb.Build())
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

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
