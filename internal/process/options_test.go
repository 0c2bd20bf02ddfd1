package process

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

type extFile struct {
	Extra struct {
		Name *string `yaml:"name"`
	} `yaml:"extra"`
}

func writeConfig(t *testing.T, yml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The common sections and the binary's own come from one file; flags override it; a group a
// binary did not enable is neither a flag nor a config key.
func TestParseCommonAndExtension(t *testing.T) {
	path := writeConfig(t, "net:\n  port: 30001\n  bindIp: a, b\nextra:\n  name: x\nsetParameter:\n  p: 1\n")
	f := NewFlags("t", 0, io.Discard)
	var ext extFile
	o, err := Parse(f, []string{"-f", path, "--port", "30002", "--setParameter", "p=2"}, &ext)
	if err != nil {
		t.Fatal(err)
	}
	if o.Port != 30002 || strings.Join(o.BindIPs, "|") != "a|b" || ext.Extra.Name == nil || *ext.Extra.Name != "x" ||
		len(o.SetParameters) != 2 || o.SetParameters[1] != [2]string{"p", "2"} || !f.IsSet("port") || f.IsSet("bind_ip") {
		t.Fatalf("options %+v ext %+v", o, ext)
	}
	if _, err := Parse(NewFlags("t", 0, io.Discard), []string{"--bind_ip_all"}, &ext); !errors.Is(err, ErrBadOptions) {
		t.Errorf("--bind_ip_all without NetExtras: %v", err)
	}
	for _, yml := range []string{"net:\n  bindIpAll: true\n", "systemLog:\n  quiet: true\n", "bogus: 1\n", "extra:\n  bogus: 1\n"} {
		_, err := Parse(NewFlags("t", 0, io.Discard), []string{"--config", writeConfig(t, yml)}, &ext)
		if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), "Error parsing YAML config file") {
			t.Errorf("%q: %v", yml, err)
		}
	}
	o, err = Parse(NewFlags("t", NetExtras|SystemLog, io.Discard),
		[]string{"--config", writeConfig(t, "net:\n  bindIpAll: true\nsystemLog:\n  path: /l\n"), "--networkMessageCompressors", "disabled"}, &ext)
	if err != nil || len(o.BindIPs) != 1 || o.BindIPs[0] != "0.0.0.0" || o.LogPath != "/l" || o.Compressors == nil || len(o.Compressors) != 0 {
		t.Fatalf("groups: %+v %v", o, err)
	}
	if err := (&Options{Port: 70000, BindIPs: []string{"x"}}).Validate(); !errors.Is(err, ErrBadOptions) {
		t.Errorf("port 70000: %v", err)
	}
}

// Parsed puts the binary's sections between net and setParameter, and net's
// maxIncomingConnections only where NetExtras is enabled.
func TestParsedShape(t *testing.T) {
	o, err := Parse(NewFlags("t", NetExtras, io.Discard), []string{"--setParameter", "a=b", "--port", "1"}, &extFile{})
	if err != nil {
		t.Fatal(err)
	}
	doc := o.Parsed(func(b *bsoncore.DocumentBuilder) {
		b.AppendDocument("own", bsoncore.NewDocumentBuilder().AppendInt32("x", 1).Build())
	})
	elems, _ := doc.Elements()
	var keys []string
	for _, e := range elems {
		keys = append(keys, e.Key())
	}
	if strings.Join(keys, ",") != "net,own,setParameter" {
		t.Errorf("keys %v", keys)
	}
	if v, ok := doc.Lookup("net", "maxIncomingConnections").Int32OK(); !ok || v != 1000000 {
		t.Errorf("net: %v", doc.Lookup("net"))
	}
	o, _ = Parse(NewFlags("t", 0, io.Discard), nil, &extFile{})
	if _, err := o.Parsed(nil).LookupErr("net", "maxIncomingConnections"); err == nil {
		t.Errorf("maxIncomingConnections without NetExtras: %v", o.Parsed(nil))
	}
}

// TestKeyFile checks mongod's keyfile rules: owner-only permissions, base64 characters
// (whitespace ignored), 6 to 1024 of them; a keyfile implies clusterAuthMode keyFile.
func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	parse := func(args ...string) (*Options, error) {
		var ext struct{}
		return Parse(NewFlags("humongod", 0, io.Discard), args, &ext)
	}
	good := write("good", "abc def\nghi+/=\n", 0o600)
	o, err := parse("--keyFile", good)
	if err != nil || o.Key != "abcdefghi+/=" || o.ClusterAuthMode != "keyFile" {
		t.Fatalf("good keyfile: %+v %v", o, err)
	}
	for name, c := range map[string]struct {
		content string
		mode    os.FileMode
		want    string
	}{
		"open":  {"abcdefgh", 0o644, "too open"},
		"short": {"abc", 0o600, "too short"},
		"bad":   {"abc*defgh", 0o600, "invalid char"},
		"long":  {strings.Repeat("a", 1025), 0o600, "too long"},
	} {
		if _, err := parse("--keyFile", write(name, c.content, c.mode)); err == nil || !strings.Contains(err.Error(), c.want) ||
			!errors.Is(err, ErrBadOptions) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if _, err := parse("--keyFile", filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing keyfile was accepted")
	}
	if _, err := parse("--clusterAuthMode", "x509"); err == nil {
		t.Error("clusterAuthMode x509 was accepted")
	}
}
