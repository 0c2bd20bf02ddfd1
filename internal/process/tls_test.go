package process

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/certs"
	"humongo/internal/server"
)

func localTLS(t *testing.T) certs.Local {
	t.Helper()
	f, err := certs.EnsureLocal(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The flags and the YAML keys give the same options; flags win; `parsed` shows net.tls as
// mongod does, passwords censored.
func TestTLSOptions(t *testing.T) {
	f := localTLS(t)
	o, err := parseAll(t, "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", f.Server, "--tlsCAFile", f.CA,
		"--tlsAllowConnectionsWithoutCertificates", "--tlsAllowInvalidHostnames", "--tlsCertificateKeyFilePassword", "secret")
	if err != nil {
		t.Fatal(err)
	}
	st := o.ServerTLS()
	if st.Mode != server.TLSRequire || st.Config == nil || st.Config.ClientAuth != tls.VerifyClientCertIfGiven ||
		len(st.Config.Certificates) != 1 || st.Config.ClientCAs == nil {
		t.Errorf("server TLS %+v", st)
	}
	sec := o.ClientSecurity()
	if sec == nil || sec.TLS == nil || sec.TLS.RootCAs == nil || len(sec.TLS.Certificates) != 1 ||
		!sec.TLS.InsecureSkipVerify || sec.TLS.VerifyConnection == nil || sec.Key != "" {
		t.Errorf("client security %+v", sec)
	}
	tlsDoc, err := o.Parsed(nil).LookupErr("net", "tls")
	if err != nil {
		t.Fatalf("parsed: %v", o.Parsed(nil))
	}
	var keys []string
	elems, _ := tlsDoc.Document().Elements()
	for _, e := range elems {
		keys = append(keys, e.Key())
	}
	if got := strings.Join(keys, ","); got != "CAFile,allowConnectionsWithoutCertificates,allowInvalidHostnames,certificateKeyFile,certificateKeyFilePassword,mode" {
		t.Errorf("net.tls keys %s", got)
	}
	if v := tlsDoc.Document().Lookup("certificateKeyFilePassword").StringValue(); v != "<password>" {
		t.Errorf("password shown as %q", v)
	}

	yml := "net:\n  tls:\n    mode: preferTLS\n    certificateKeyFile: " + f.Server + "\n    CAFile: " + f.CA +
		"\n    clusterFile: " + f.Client + "\n    allowInvalidCertificates: true\n"
	o, err = parseAll(t, "--config", writeConfig(t, yml))
	if err != nil {
		t.Fatal(err)
	}
	if st := o.ServerTLS(); st.Mode != server.TLSPrefer || st.Config.ClientAuth != tls.RequestClientCert {
		t.Errorf("YAML server TLS %+v", st)
	}
	sec = o.ClientSecurity()
	if sec == nil || !sec.TLS.InsecureSkipVerify || sec.TLS.Certificates[0].Leaf.Subject.CommonName != "humongo client" {
		t.Errorf("YAML client security: the cluster file is not the client certificate: %+v", sec)
	}
	o, err = parseAll(t, "--config", writeConfig(t, yml), "--tlsMode", "allowTLS")
	if err != nil || o.ServerTLS().Mode != server.TLSAllow || o.ClientSecurity() != nil {
		t.Errorf("--tlsMode over net.tls.mode, allowTLS members plain: %+v %v", o, err)
	}
	// The CA verifies clients unless told otherwise.
	o, err = parseAll(t, "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", f.Server, "--tlsCAFile", f.CA)
	if err != nil || o.ServerTLS().Config.ClientAuth != tls.RequireAndVerifyClientCert || o.ClientSecurity().TLS.InsecureSkipVerify {
		t.Errorf("default client certificate policy: %+v %v", o, err)
	}
	// No TLS option: nothing in parsed, no TLS anywhere.
	o, err = parseAll(t)
	if err != nil || o.ServerTLS().Mode != server.TLSDisabled || o.ClientSecurity() != nil {
		t.Errorf("defaults: %+v %v", o, err)
	}
	if _, err := o.Parsed(nil).LookupErr("net", "tls"); err == nil {
		t.Errorf("net.tls without TLS options: %v", o.Parsed(nil))
	}
}

// Bad TLS options fail as mongod's do, with exit code 2.
func TestTLSOptionErrors(t *testing.T) {
	f := localTLS(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tlsMode", "requireSSL"}, "BadValue: unsupported value for tlsMode requireSSL"},
		{[]string{"--tlsMode", "requireTLS", "--tlsCAFile", f.CA}, "BadValue: need tlsCertificateKeyFile or certificateSelector when TLS is enabled"},
		{[]string{"--tlsMode", "requireTLS", "--tlsCertificateKeyFile", f.Server}, "The use of TLS without specifying a chain of trust is no longer supported"},
		{[]string{"--tlsCAFile", f.CA}, "need to enable TLS via the sslMode/tlsMode flag when using TLS configuration parameters"},
		{[]string{"--tlsMode", "disabled", "--tlsAllowConnectionsWithoutCertificates"}, "need to enable TLS via the sslMode/tlsMode flag"},
		{[]string{"--tlsMode", "requireTLS", "--tlsCertificateKeyFile", filepath.Join(dir, "missing.pem"), "--tlsCAFile", f.CA},
			"Can not set up PEM key file: cannot read PEM key file " + filepath.Join(dir, "missing.pem")},
		{[]string{"--tlsMode", "requireTLS", "--tlsCertificateKeyFile", garbage, "--tlsCAFile", f.CA}, "Can not set up PEM key file"},
		{[]string{"--tlsMode", "requireTLS", "--tlsCertificateKeyFile", f.CA, "--tlsCAFile", f.CA}, "Can not set up PEM key file"},
		{[]string{"--tlsMode", "requireTLS", "--tlsCertificateKeyFile", f.Server, "--tlsCAFile", garbage}, "cannot read certificate authority file"},
		{[]string{"--tlsMode", "preferTLS", "--tlsCertificateKeyFile", f.Server, "--tlsCAFile", f.CA, "--tlsClusterFile", garbage},
			"Can not set up ssl clusterFile"},
		{[]string{"--config", writeConfig(t, "net:\n  tls:\n    mode: bogus\n")}, "unsupported value for tlsMode bogus"},
		{[]string{"--config", writeConfig(t, "net:\n  tls:\n    bogus: 1\n")}, "Unrecognized option: net.tls.bogus"},
		{[]string{"--config", writeConfig(t, "net:\n  tls:\n    allowInvalidCertificates: maybe\n")},
			`Bad value for option net.tls.allowInvalidCertificates: "maybe" is not a boolean`},
	} {
		_, err := parseAll(t, tc.args...)
		if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
			continue
		}
		var stderr strings.Builder
		if code := OptionsFailed(err, &stderr); code != ExitBadOptions {
			t.Errorf("%v: exit code %d", tc.args, code)
		}
	}
}

// humongos (no option groups) takes the TLS options too.
func TestTLSOptionsEveryBinary(t *testing.T) {
	f := localTLS(t)
	o, err := Parse(NewFlags("humongos", 0, os.Stderr), []string{"--tlsMode", "preferTLS", "--tlsCertificateKeyFile", f.Server, "--tlsCAFile", f.CA}, &noExt{})
	if err == nil {
		err = o.Validate()
	}
	if err != nil || o.ServerTLS().Mode != server.TLSPrefer || o.ClientSecurity() == nil {
		t.Fatalf("%+v %v", o, err)
	}
	if v := o.Parsed(nil).Lookup("net", "tls", "mode"); v.StringValue() != "preferTLS" {
		t.Errorf("parsed %v", bsoncore.Document(o.Parsed(nil)))
	}
}

func TestCensorArgv(t *testing.T) {
	got := strings.Join(CensorArgv([]string{"humongod", "--tlsCertificateKeyFilePassword", "s1", "--tlsClusterPassword=s2", "--port", "1"}), " ")
	if got != "humongod --tlsCertificateKeyFilePassword <password> --tlsClusterPassword=<password> --port 1" {
		t.Errorf("censored argv %q", got)
	}
}
