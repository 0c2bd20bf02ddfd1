package main

import (
	"fmt"
	"io"
	"sort"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
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

	// ClusterRole is --configsvr, --shardsvr or sharding.clusterRole: "configsvr",
	// "shardsvr", or "" outside a sharded cluster.
	ClusterRole string

	// StorageEngine is --storageEngine / storage.engine as given ("" when not). Humongo has
	// one engine (Pebble); mongod's default name is accepted for it, others are refused at
	// startup as mongod refuses an unknown engine (see checkStorageEngine).
	StorageEngine string
	// CacheSizeGB is --wiredTigerCacheSizeGB / storage.wiredTiger.engineConfig.cacheSizeGB:
	// the storage engine's block cache (0: its default).
	CacheSizeGB float64
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
		DBPath         *string        `yaml:"dbPath"`
		Journal        map[string]any `yaml:"journal"`
		Engine         *string        `yaml:"engine"`
		DirectoryPerDB *bool          `yaml:"directoryPerDB"`
		SyncPeriodSecs *float64       `yaml:"syncPeriodSecs"`
		WiredTiger     *struct {
			EngineConfig *struct {
				CacheSizeGB          *float64 `yaml:"cacheSizeGB"`
				JournalCompressor    *string  `yaml:"journalCompressor"`
				DirectoryForIndexes  *bool    `yaml:"directoryForIndexes"`
				ZstdCompressionLevel *int     `yaml:"zstdCompressionLevel"`
			} `yaml:"engineConfig"`
			CollectionConfig map[string]any `yaml:"collectionConfig"`
			IndexConfig      map[string]any `yaml:"indexConfig"`
		} `yaml:"wiredTiger"`
	} `yaml:"storage"`
	OperationProfiling struct {
		SlowOpThresholdMs *int     `yaml:"slowOpThresholdMs"`
		Mode              *string  `yaml:"mode"`
		SlowOpSampleRate  *float64 `yaml:"slowOpSampleRate"`
	} `yaml:"operationProfiling"`
	Replication struct {
		ReplSetName               *string `yaml:"replSetName"`
		OplogSizeMB               *int    `yaml:"oplogSizeMB"`
		EnableMajorityReadConcern *bool   `yaml:"enableMajorityReadConcern"`
	} `yaml:"replication"`
	Sharding struct {
		ClusterRole *string `yaml:"clusterRole"`
	} `yaml:"sharding"`
}

// mongod's ports for the sharded-cluster roles when neither --port nor net.port is given
// (ServerGlobalParams::ConfigServerPort, ShardServerPort).
const (
	configServerPort = 27019
	shardServerPort  = 27018
)

// parseOptions parses argv (without the program name).
func parseOptions(args []string, stderr io.Writer) (*Options, error) {
	fs := process.NewFlags("humongod", process.NetExtras|process.SystemLog, stderr)
	var (
		dbPath    = fs.String("dbpath", defaultDBPath, "directory for datafiles (created if missing)")
		slowMS    = fs.Int("slowms", defaultSlowMS, "slow operation threshold in milliseconds")
		replSet   = fs.String("replSet", "", "replica set name: run as a replica-set member")
		oplogSize = fs.Int("oplogSize", 0, "size of the oplog in megabytes (0: default)")
		engine    = fs.String("storageEngine", "", "storage engine: wiredTiger (mongod's name) runs Humongo's engine")
		cacheGB   = fs.Float64("wiredTigerCacheSizeGB", 0, "storage engine block cache size in GB (0.25 to 10000)")
		configsvr = fs.Bool("configsvr", false, "declare this is a config db of a cluster; default port 27019")
		shardsvr  = fs.Bool("shardsvr", false, "declare this is a shard db of a cluster; default port 27018")
	)
	// mongod storage flags with no meaning for Humongo's engine.
	for _, name := range []string{"journal", "nojournal", "directoryperdb", "wiredTigerDirectoryForIndexes",
		"noscripting", "enableMajorityReadConcern", "cpu"} {
		fs.Ignore(name, true)
	}
	for _, name := range []string{"wiredTigerJournalCompressor", "wiredTigerCollectionBlockCompressor",
		"wiredTigerIndexPrefixCompression", "syncdelay", "slowOpSampleRate", "profile"} {
		fs.Ignore(name, false)
	}
	var cf configFile
	common, err := process.Parse(fs, args, &cf)
	if err != nil {
		return nil, err
	}
	// The switches are mutually exclusive (moe's incompatibleWith, checked on the command
	// line as given, before the config file is merged).
	if *configsvr && *shardsvr {
		return nil, fmt.Errorf("%w: BadValue: shardsvr is not allowed when configsvr is specified", process.ErrBadOptions)
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
	if v := cf.Storage.Engine; v != nil {
		o.StorageEngine = *v
	}
	if wt := cf.Storage.WiredTiger; wt != nil {
		if ec := wt.EngineConfig; ec != nil {
			if ec.CacheSizeGB != nil {
				o.CacheSizeGB = *ec.CacheSizeGB
			}
			for key, set := range map[string]bool{"journalCompressor": ec.JournalCompressor != nil,
				"directoryForIndexes": ec.DirectoryForIndexes != nil, "zstdCompressionLevel": ec.ZstdCompressionLevel != nil} {
				if set {
					o.Warnings = append(o.Warnings, "storage.wiredTiger.engineConfig."+key)
				}
			}
		}
		if wt.CollectionConfig != nil {
			o.Warnings = append(o.Warnings, "storage.wiredTiger.collectionConfig")
		}
		if wt.IndexConfig != nil {
			o.Warnings = append(o.Warnings, "storage.wiredTiger.indexConfig")
		}
	}
	for key, set := range map[string]bool{"storage.journal": cf.Storage.Journal != nil,
		"operationProfiling.mode":               cf.OperationProfiling.Mode != nil && *cf.OperationProfiling.Mode != "off",
		"operationProfiling.slowOpSampleRate":   cf.OperationProfiling.SlowOpSampleRate != nil,
		"replication.enableMajorityReadConcern": cf.Replication.EnableMajorityReadConcern != nil,
		"storage.directoryPerDB":                cf.Storage.DirectoryPerDB != nil, "storage.syncPeriodSecs": cf.Storage.SyncPeriodSecs != nil} {
		if set {
			o.Warnings = append(o.Warnings, key)
		}
	}
	sort.Strings(o.Warnings)
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
	if fs.IsSet("storageEngine") {
		o.StorageEngine = *engine
	}
	if fs.IsSet("wiredTigerCacheSizeGB") {
		o.CacheSizeGB = *cacheGB
	}
	if err := o.applyClusterRole(cf.Sharding.ClusterRole, *configsvr, *shardsvr); err != nil {
		return nil, err
	}
	if o.CacheSizeGB != 0 && (o.CacheSizeGB < 0.25 || o.CacheSizeGB > 10000) {
		return nil, fmt.Errorf("%w: wiredTigerCacheSizeGB must be between 0.25 and 10000, not %v", process.ErrBadOptions, o.CacheSizeGB)
	}
	if o.OplogSizeMB < 0 {
		return nil, fmt.Errorf("%w: oplogSize must be positive", process.ErrBadOptions)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// applyClusterRole settles sharding.clusterRole as mongod does: --configsvr / --shardsvr
// override the config file's value (canonicalizeMongodOptions), the file's value must be one
// of the two roles, the role picks the default port when none was given, and both roles
// need --replSet (storeMongodOptions).
func (o *Options) applyClusterRole(fromFile *string, configsvr, shardsvr bool) error {
	if fromFile != nil {
		o.ClusterRole = *fromFile
		if o.ClusterRole != "configsvr" && o.ClusterRole != "shardsvr" {
			return fmt.Errorf("%w: BadValue: sharding.clusterRole must be a string of the format: (configsvr/shardsvr)", process.ErrBadOptions)
		}
	}
	switch {
	case configsvr:
		o.ClusterRole = "configsvr"
	case shardsvr:
		o.ClusterRole = "shardsvr"
	}
	if o.ClusterRole == "" {
		return nil
	}
	if !o.PortSet {
		o.Port = shardServerPort
		if o.ClusterRole == "configsvr" {
			o.Port = configServerPort
		}
	}
	if o.ReplSet == "" {
		return fmt.Errorf("%w: BadValue: Cannot start a %s as a standalone server. Please use the option --replSet to start the node as a replica set.",
			process.ErrBadOptions, o.ClusterRole)
	}
	return nil
}

// parsed returns the effective options in the shape getCmdLineOpts reports as `parsed`.
func (o *Options) parsed() bsoncore.Document {
	return o.Parsed(func(b *bsoncore.DocumentBuilder) {
		if pm := o.ProcessManagementDoc(); pm != nil {
			b.AppendDocument("processManagement", pm)
		}
		storage := bsoncore.NewDocumentBuilder().AppendString("dbPath", o.DBPath)
		if o.StorageEngine != "" {
			storage.AppendString("engine", o.StorageEngine)
		}
		if o.CacheSizeGB != 0 {
			storage.AppendDocument("wiredTiger", bsoncore.NewDocumentBuilder().AppendDocument("engineConfig",
				bsoncore.NewDocumentBuilder().AppendDouble("cacheSizeGB", o.CacheSizeGB).Build()).Build())
		}
		b.AppendDocument("storage", storage.Build())
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
		if o.ClusterRole != "" {
			b.AppendDocument("sharding", bsoncore.NewDocumentBuilder().AppendString("clusterRole", o.ClusterRole).Build())
		}
	})
}

// cacheBytes is the storage engine's block cache size in bytes (0: its default).
func (o *Options) cacheBytes() int64 { return int64(o.CacheSizeGB * (1 << 30)) }

// checkStorageEngine reports whether Humongo runs the storage engine named by the options:
// its own ("pebble") and mongod's default name, "wiredTiger", which it stands in for (with a
// startup warning); any other name is mongod's error 18656.
func (o *Options) checkStorageEngine() (warn bool, err error) {
	switch o.StorageEngine {
	case "", "pebble":
		return false, nil
	case "wiredTiger":
		return true, nil
	}
	return false, mongoerr.Newf(mongoerr.Location18656, "Cannot start server with an unknown storage engine: %s", o.StorageEngine)
}
