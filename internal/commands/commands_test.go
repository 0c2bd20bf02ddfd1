package commands

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func TestRegistryAliasesCaseSensitive(t *testing.T) {
	reg := NewRegistry()
	for _, n := range []string{"hello", "isMaster", "ismaster", "buildInfo", "buildinfo"} {
		if reg.Lookup(n) == nil {
			t.Errorf("%s not registered", n)
		}
	}
	for _, n := range []string{"Hello", "ISMASTER", "Ping"} {
		if reg.Lookup(n) != nil {
			t.Errorf("%s must not resolve", n)
		}
	}
	for _, c := range reg.List() {
		if c.Handler == nil || c.Help == "" {
			t.Errorf("%s: missing handler or help", c.Name)
		}
	}
}

func TestParamsTypeChecks(t *testing.T) {
	p := service.NewParams(DefaultParamSpecs())
	str := bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "x")}
	if _, err := p.SetValue("ttlMonitorSleepSecs", str); !mongoerr.Is(err, mongoerr.BadValue) {
		t.Errorf("string for int: %v", err)
	}
	half := bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, 1.5)}
	if _, err := p.SetValue("ttlMonitorSleepSecs", half); !mongoerr.Is(err, mongoerr.BadValue) {
		t.Errorf("1.5 for int: %v", err)
	}
	ten := bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 10)}
	was, err := p.SetValue("ttlMonitorSleepSecs", ten)
	if err != nil || was.Int32() != 60 || p.Int("ttlMonitorSleepSecs") != 10 {
		t.Errorf("set: %v %v %d", was, err, p.Int("ttlMonitorSleepSecs"))
	}
	if _, err := p.SetValue("journalCommitInterval", bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 501)}); err == nil {
		t.Error("out of range accepted")
	}
	if _, err := p.SetValue("nope", ten); !mongoerr.Is(err, mongoerr.InvalidOptions) {
		t.Errorf("unknown: %v", err)
	}
	if err := p.SetString("enableTestCommands", "1"); err != nil || !p.Bool("enableTestCommands") {
		t.Errorf("startup set: %v", err)
	}
	if err := p.SetString("cursorTimeoutMillis", "abc"); err == nil {
		t.Error("bad startup int accepted")
	}
}

func TestClientMetadataValidation(t *testing.T) {
	good := bsoncore.NewDocumentBuilder().
		AppendDocument("application", bsoncore.NewDocumentBuilder().AppendString("name", "app").Build()).
		AppendDocument("driver", bsoncore.NewDocumentBuilder().AppendString("name", "d").AppendString("version", "1").Build()).
		AppendDocument("os", bsoncore.NewDocumentBuilder().AppendString("type", "Linux").Build()).Build()
	if app, err := service.ValidateClientMetadata(good); err != nil || app != "app" {
		t.Errorf("good: %q %v", app, err)
	}
	noDriver := bsoncore.NewDocumentBuilder().
		AppendDocument("os", bsoncore.NewDocumentBuilder().AppendString("type", "Linux").Build()).Build()
	if _, err := service.ValidateClientMetadata(noDriver); !mongoerr.Is(err, mongoerr.ClientMetadataMissingField) {
		t.Errorf("no driver: %v", err)
	}
}
