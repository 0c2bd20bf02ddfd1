package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/process"
)

// Options are humongos's effective settings: the common ones every server process takes
// (internal/process: net.port, net.bindIp, setParameter, --config, --version) and mongos's
// own. Flags override the config file, which overrides mongos's defaults.
type Options struct {
	*process.Options
	// ConfigDB is --configdb / sharding.configDB as given; ConfigSet and ConfigHosts its
	// parsed parts ("setName/host:port[,host:port]").
	ConfigDB    string
	ConfigSet   string
	ConfigHosts []string
}

// configFile is the part of mongos's YAML configuration humongos understands beyond the
// common sections (process.File); unknown keys are an error, as in mongos.
type configFile struct {
	Sharding struct {
		ConfigDB *string `yaml:"configDB"`
	} `yaml:"sharding"`
}

// parseOptions parses argv (without the program name).
func parseOptions(args []string, stderr io.Writer) (*Options, error) {
	fs := process.NewFlags("humongos", 0, stderr)
	configDB := fs.String("configdb", "", "config server replica set: setName/host:port[,host:port...]")
	var cf configFile
	common, err := process.Parse(fs, args, &cf)
	if err != nil {
		return nil, err
	}
	o := &Options{Options: common}
	if v := cf.Sharding.ConfigDB; v != nil {
		o.ConfigDB = *v
	}
	if fs.IsSet("configdb") {
		o.ConfigDB = *configDB
	}
	if o.Version {
		return o, nil
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.ConfigDB == "" {
		return nil, fmt.Errorf("%w: BadValue: error: no args for --configdb", process.ErrBadOptions)
	}
	if o.ConfigSet, o.ConfigHosts, err = parseConfigDB(o.ConfigDB); err != nil {
		return nil, fmt.Errorf("%w: %v", process.ErrBadOptions, err)
	}
	return o, nil
}

// parseConfigDB checks --configdb the way mongos does (ConnectionString::parse, then the
// replica-set check): "setName/host[:port][,host[:port]...]" is the only accepted form
// (mirrored config servers, a bare host list, are gone since 3.4). A single host (or a "/"
// with no set name before it) is BadValue; a comma-separated list without a set name is
// FailedToParse "invalid url"; each host must be a valid HostAndPort. A host without a port
// gets the config server's default port, 27019.
func parseConfigDB(s string) (set string, hosts []string, err error) {
	i := strings.Index(s, "/")
	if i <= 0 {
		if strings.Contains(s, ",") {
			return "", nil, fmt.Errorf("FailedToParse: invalid url [%s]", s)
		}
		if err := checkHostAndPort(s); err != nil {
			return "", nil, err
		}
		return "", nil, errors.New("BadValue: configdb supports only replica set connection string")
	}
	set, list := s[:i], s[i+1:]
	for _, h := range strings.Split(list, ",") {
		if err := checkHostAndPort(h); err != nil {
			return "", nil, err
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), strconv.Itoa(configServerPort))
		}
		hosts = append(hosts, h)
	}
	return set, hosts, nil
}

// configServerPort is a config server's default port (ServerGlobalParams::ConfigServerPort),
// the port of a --configdb host given without one.
const configServerPort = 27019

// checkHostAndPort validates "host[:port]" as MongoDB's HostAndPort::parse does.
func checkHostAndPort(h string) error {
	if h == "" {
		return fmt.Errorf("FailedToParse: Empty host component parsing HostAndPort from %q", h)
	}
	host, port := h, ""
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		host = h[1 : len(h)-1] // a bracketed IPv6 address without a port
	} else if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 {
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

// parsed returns the effective options in the shape getCmdLineOpts reports as `parsed`.
func (o *Options) parsed() bsoncore.Document {
	return o.Parsed(func(b *bsoncore.DocumentBuilder) {
		b.AppendDocument("sharding", bsoncore.NewDocumentBuilder().AppendString("configDB", o.ConfigDB).Build())
	})
}
