package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"gopkg.in/yaml.v3"
)

// Options are humongos's effective settings: flags override the config file, which overrides
// mongos's defaults.
type Options struct {
	Port    int
	BindIPs []string
	// ConfigDB is --configdb / sharding.configDB as given; ConfigSet and ConfigHosts its
	// parsed parts ("setName/host:port[,host:port]").
	ConfigDB      string
	ConfigSet     string
	ConfigHosts   []string
	ConfigPath    string
	SetParameters [][2]string
	Version       bool
}

const (
	defaultPort   = 27017
	defaultBindIP = "127.0.0.1"
)

// configFile is the part of mongos's YAML configuration humongos understands; unknown keys
// are an error, as in mongos.
type configFile struct {
	Net struct {
		Port   *int    `yaml:"port"`
		BindIP *string `yaml:"bindIp"`
	} `yaml:"net"`
	Sharding struct {
		ConfigDB *string `yaml:"configDB"`
	} `yaml:"sharding"`
	SetParameter map[string]any `yaml:"setParameter"`
}

// errBadOptions marks option errors (mongos exits with code 2, EXIT_BADOPTIONS).
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
	fs := flag.NewFlagSet("humongos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		port       = fs.Int("port", defaultPort, "TCP port to listen on (0: an ephemeral port)")
		bindIP     = fs.String("bind_ip", defaultBindIP, "comma-separated IP addresses to listen on")
		configDB   = fs.String("configdb", "", "config server replica set: setName/host:port[,host:port...]")
		configPath = fs.String("config", "", "YAML configuration file")
		version    = fs.Bool("version", false, "show version information")
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

	o := &Options{Port: defaultPort, BindIPs: []string{defaultBindIP}, ConfigPath: *configPath, Version: *version}
	if *configPath != "" {
		if err := o.applyConfigFile(*configPath); err != nil {
			return nil, err
		}
	}
	if set["port"] {
		o.Port = *port
	}
	if set["bind_ip"] {
		o.BindIPs = splitList(*bindIP)
	}
	if set["configdb"] {
		o.ConfigDB = *configDB
	}
	o.SetParameters = append(o.SetParameters, cliParams...)
	if o.Version {
		return o, nil
	}
	if o.Port < 0 || o.Port > 65535 {
		return nil, fmt.Errorf("%w: port number must be between 0 and 65535", errBadOptions)
	}
	if len(o.BindIPs) == 0 {
		return nil, fmt.Errorf("%w: bind_ip is empty", errBadOptions)
	}
	if o.ConfigDB == "" {
		return nil, fmt.Errorf("%w: error: no args for --configdb", errBadOptions)
	}
	var err error
	if o.ConfigSet, o.ConfigHosts, err = parseConfigDB(o.ConfigDB); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadOptions, err)
	}
	return o, nil
}

// parseConfigDB checks --configdb the way mongos does: a replica-set connection string
// "setName/host:port[,host:port...]" (mirrored config servers, a bare host list, are gone
// since 3.4), each host a valid HostAndPort.
func parseConfigDB(s string) (set string, hosts []string, err error) {
	set, list, ok := strings.Cut(s, "/")
	if !ok || set == "" {
		return "", nil, errors.New("BadValue: configdb supports only replica set connection string")
	}
	for _, h := range strings.Split(list, ",") {
		if err := checkHostAndPort(h); err != nil {
			return "", nil, err
		}
		hosts = append(hosts, h)
	}
	return set, hosts, nil
}

// checkHostAndPort validates "host[:port]" as MongoDB's HostAndPort::parse does.
func checkHostAndPort(h string) error {
	if h == "" {
		return fmt.Errorf("FailedToParse: Empty host component parsing HostAndPort from %q", h)
	}
	host, port := h, ""
	if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 {
		var err error
		if host, port, err = net.SplitHostPort(h); err != nil {
			return fmt.Errorf("FailedToParse: %v parsing HostAndPort from %q", err, h)
		}
	}
	if host == "" {
		return fmt.Errorf("FailedToParse: Empty host component parsing HostAndPort from %q", h)
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("FailedToParse: Port number %s out of range parsing HostAndPort from %q", port, h)
		}
	}
	return nil
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
	if v := cf.Sharding.ConfigDB; v != nil {
		o.ConfigDB = *v
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
		AppendInt32("port", int32(o.Port)).Build())
	b.AppendDocument("sharding", bsoncore.NewDocumentBuilder().AppendString("configDB", o.ConfigDB).Build())
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
