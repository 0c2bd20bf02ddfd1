package main

import (
	"fmt"
	"io"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/process"
)

// Options are humongod's effective settings: the common ones every server process takes
// (internal/process: net, systemLog, setParameter, --config, --version) and mongod's own.
// They come from, in decreasing precedence: command-line flags, the YAML config file
// (--config), and the defaults below — the same order mongod applies.
type Options struct {
	*process.Options

	DBPath string

	SlowMS int

	// ReplSet is --replSet / replication.replSetName: run as a replica-set member.
	ReplSet string
	// OplogSizeMB is --oplogSize / replication.oplogSizeMB (0: the default).
	OplogSizeMB int
}

// Defaults, as mongod's.
const (
	defaultDBPath = "./data"
	defaultSlowMS = 100
)

// configFile is the part of mongod's YAML configuration humongod understands beyond the
// common sections (process.File); unknown keys are an error, as mongod reports "Unrecognized
// option".
type configFile struct {
	Storage struct {
		DBPath  *string        `yaml:"dbPath"`
		Journal map[string]any `yaml:"journal"`
	} `yaml:"storage"`
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

// parseOptions parses argv (without the program name).
func parseOptions(args []string, stderr io.Writer) (*Options, error) {
	fs := process.NewFlags("humongod", process.NetExtras|process.SystemLog, stderr)
	var (
		dbPath    = fs.String("dbpath", defaultDBPath, "directory for datafiles (created if missing)")
		slowMS    = fs.Int("slowms", defaultSlowMS, "slow operation threshold in milliseconds")
		replSet   = fs.String("replSet", "", "replica set name: run as a replica-set member")
		oplogSize = fs.Int("oplogSize", 0, "size of the oplog in megabytes (0: default)")
	)
	var cf configFile
	common, err := process.Parse(fs, args, &cf)
	if err != nil {
		return nil, err
	}
	o := &Options{Options: common, DBPath: defaultDBPath, SlowMS: defaultSlowMS}
	if v := cf.Storage.DBPath; v != nil {
		o.DBPath = *v
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
	// Flags override the config file.
	if fs.IsSet("dbpath") {
		o.DBPath = *dbPath
	}
	if fs.IsSet("slowms") {
		o.SlowMS = *slowMS
	}
	if fs.IsSet("replSet") {
		o.ReplSet = *replSet
	}
	if fs.IsSet("oplogSize") {
		o.OplogSizeMB = *oplogSize
	}
	if o.OplogSizeMB < 0 {
		return nil, fmt.Errorf("%w: oplogSize must be positive", process.ErrBadOptions)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// parsed returns the effective options in the shape getCmdLineOpts reports as `parsed`.
func (o *Options) parsed() bsoncore.Document {
	return o.Parsed(func(b *bsoncore.DocumentBuilder) {
		b.AppendDocument("storage", bsoncore.NewDocumentBuilder().AppendString("dbPath", o.DBPath).Build())
		b.AppendDocument("systemLog", o.SystemLogDoc())
		b.AppendDocument("operationProfiling", bsoncore.NewDocumentBuilder().
			AppendInt32("slowOpThresholdMs", int32(o.SlowMS)).Build())
		if o.ReplSet != "" {
			rb := bsoncore.NewDocumentBuilder().AppendString("replSetName", o.ReplSet)
			if o.OplogSizeMB > 0 {
				rb.AppendInt32("oplogSizeMB", int32(o.OplogSizeMB))
			}
			b.AppendDocument("replication", rb.Build())
		}
	})
}
