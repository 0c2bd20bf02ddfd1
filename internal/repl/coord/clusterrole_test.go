package coord

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/repl/topology"
)

func TestValidateClusterRole(t *testing.T) {
	member := func(extra func(b *bsoncore.DocumentBuilder)) bsoncore.Document {
		b := bsoncore.NewDocumentBuilder().AppendInt32("_id", 0).AppendString("host", "h:1")
		if extra != nil {
			extra(b)
		}
		return b.Build()
	}
	cfgDoc := func(configsvr bool, m bsoncore.Document) bsoncore.Document {
		b := bsoncore.NewDocumentBuilder().AppendString("_id", "cfg")
		if configsvr {
			b.AppendBoolean("configsvr", true)
		}
		return b.AppendArray("members", bsoncore.NewArrayBuilder().AppendDocument(m).Build()).Build()
	}
	for _, tc := range []struct {
		name         string
		doc          bsoncore.Document
		configServer bool
		err          string
	}{
		{"config server set", cfgDoc(true, member(nil)), true, ""},
		{"plain set, plain node", cfgDoc(false, member(nil)), false, ""},
		{"plain set on a config server", cfgDoc(false, member(nil)), true,
			"Nodes started with the --configsvr flag must have configsvr:true in their config"},
		{"config server set on a plain node", cfgDoc(true, member(nil)), false,
			"Nodes being used for config servers must be started with the --configsvr flag"},
		{"delayed member", cfgDoc(true, member(func(b *bsoncore.DocumentBuilder) {
			b.AppendDouble("priority", 0).AppendBoolean("hidden", true).AppendInt32("secondaryDelaySecs", 5)
		})), true, "Members in replica set configurations being used for config servers cannot have a non-zero secondaryDelaySecs"},
	} {
		cfg, err := ParseConfig(tc.doc)
		if err != nil {
			t.Fatalf("%s: parse: %v", tc.name, err)
		}
		err = ValidateClusterRole(cfg, tc.configServer)
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if mongoerr.CodeOf(err) != mongoerr.InvalidReplicaSetConfig || err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want InvalidReplicaSetConfig %q", tc.name, err, tc.err)
		}
	}
	// configsvr survives the round trip through the stored/shown document.
	cfg, err := ParseConfig(cfgDoc(true, member(nil)))
	if err != nil || !cfg.ConfigSvr {
		t.Fatalf("parse: %+v %v", cfg, err)
	}
	if v, ok := ConfigDocument(cfg).Lookup("configsvr").BooleanOK(); !v || !ok {
		t.Errorf("ConfigDocument lacks configsvr: true: %v", ConfigDocument(cfg))
	}
	if ConfigDocument(topology.NewDefaultConfig("rs", "h:1")).Lookup("configsvr").Type != 0 {
		t.Errorf("a plain set's document shows configsvr")
	}
	if _, err := ParseConfig(bsoncore.NewDocumentBuilder().AppendString("_id", "cfg").AppendString("configsvr", "yes").
		AppendArray("members", bsoncore.NewArrayBuilder().AppendDocument(member(nil)).Build()).Build()); mongoerr.CodeOf(err) != mongoerr.InvalidReplicaSetConfig {
		t.Errorf("configsvr: \"yes\": %v", err)
	}
}
