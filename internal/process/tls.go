package process

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/certs"
	"humongo/internal/client"
	"humongo/internal/server"
)

// TLSOptions are net.tls as given (--tlsMode and friends, or the YAML keys), and what Validate
// loaded from the files they name.
type TLSOptions struct {
	// Mode is net.tls.mode as given: "" when not given (disabled).
	Mode                       string
	CertificateKeyFile         string
	CertificateKeyFilePassword string
	CAFile                     string
	ClusterFile                string
	ClusterPassword            string
	// AllowConnectionsWithoutCertificates lets clients connect without a certificate even
	// though a CA file is given.
	AllowConnectionsWithoutCertificates bool
	// AllowInvalidCertificates skips the verification of peers' certificates (clients' on
	// incoming connections, members' on outgoing ones).
	AllowInvalidCertificates bool
	// AllowInvalidHostnames skips the check that a member's certificate names the host
	// dialed (outgoing connections).
	AllowInvalidHostnames bool

	mode   server.TLSMode
	server *tls.Config // incoming connections
	client *tls.Config // outgoing connections to other members
}

// tlsFile is net.tls in the YAML file.
type tlsFile struct {
	Mode                                *string `yaml:"mode"`
	CertificateKeyFile                  *string `yaml:"certificateKeyFile"`
	CertificateKeyFilePassword          *string `yaml:"certificateKeyFilePassword"`
	CAFile                              *string `yaml:"CAFile"`
	ClusterFile                         *string `yaml:"clusterFile"`
	ClusterPassword                     *string `yaml:"clusterPassword"`
	AllowConnectionsWithoutCertificates *bool   `yaml:"allowConnectionsWithoutCertificates"`
	AllowInvalidCertificates            *bool   `yaml:"allowInvalidCertificates"`
	AllowInvalidHostnames               *bool   `yaml:"allowInvalidHostnames"`
}

// registerTLS adds the --tls flags to f.
func registerTLS(f *Flags) {
	str := func(name, usage string, set func(t *TLSOptions, v string)) {
		overrides(f, name, f.String(name, "", usage), func(o *Options, v string) { set(&o.TLS, v) })
	}
	boolean := func(name, usage string, set func(t *TLSOptions, v bool)) {
		overrides(f, name, f.Bool(name, false, usage), func(o *Options, v bool) { set(&o.TLS, v) })
	}
	str("tlsMode", "TLS mode: disabled, allowTLS, preferTLS or requireTLS", func(t *TLSOptions, v string) { t.Mode = v })
	str("tlsCertificateKeyFile", "PEM file with the server's certificate and private key",
		func(t *TLSOptions, v string) { t.CertificateKeyFile = v })
	str("tlsCertificateKeyFilePassword", "password of an encrypted tlsCertificateKeyFile (encrypted keys are not supported)",
		func(t *TLSOptions, v string) { t.CertificateKeyFilePassword = v })
	str("tlsCAFile", "PEM file of the certificate authorities that sign clients' and members' certificates",
		func(t *TLSOptions, v string) { t.CAFile = v })
	str("tlsClusterFile", "PEM file with the certificate and key presented to other members (default: tlsCertificateKeyFile)",
		func(t *TLSOptions, v string) { t.ClusterFile = v })
	str("tlsClusterPassword", "password of an encrypted tlsClusterFile (encrypted keys are not supported)",
		func(t *TLSOptions, v string) { t.ClusterPassword = v })
	boolean("tlsAllowConnectionsWithoutCertificates", "accept clients that present no certificate",
		func(t *TLSOptions, v bool) { t.AllowConnectionsWithoutCertificates = v })
	boolean("tlsAllowInvalidCertificates", "do not verify peers' certificates",
		func(t *TLSOptions, v bool) { t.AllowInvalidCertificates = v })
	boolean("tlsAllowInvalidHostnames", "do not check that members' certificates name their hosts",
		func(t *TLSOptions, v bool) { t.AllowInvalidHostnames = v })
}

// applyFile sets what net.tls gives.
func (t *TLSOptions) applyFile(f *tlsFile) {
	if f == nil {
		return
	}
	for _, s := range []struct {
		from *string
		to   *string
	}{{f.Mode, &t.Mode}, {f.CertificateKeyFile, &t.CertificateKeyFile}, {f.CertificateKeyFilePassword, &t.CertificateKeyFilePassword},
		{f.CAFile, &t.CAFile}, {f.ClusterFile, &t.ClusterFile}, {f.ClusterPassword, &t.ClusterPassword}} {
		if s.from != nil {
			*s.to = *s.from
		}
	}
	for _, b := range []struct {
		from *bool
		to   *bool
	}{{f.AllowConnectionsWithoutCertificates, &t.AllowConnectionsWithoutCertificates},
		{f.AllowInvalidCertificates, &t.AllowInvalidCertificates}, {f.AllowInvalidHostnames, &t.AllowInvalidHostnames}} {
		if b.from != nil {
			*b.to = *b.from
		}
	}
}

// validate checks net.tls as mongod does (storeSSLServerOptions) and loads its files: the
// server's certificate and key, the cluster file, the CA file. Every error is a bad option.
func (t *TLSOptions) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadOptions}, args...)...)
	}
	mode := server.TLSDisabled
	if t.Mode != "" {
		var ok bool
		if mode, ok = server.ParseTLSMode(t.Mode); !ok {
			return bad("BadValue: unsupported value for tlsMode %s", t.Mode)
		}
	}
	t.mode = mode
	if mode == server.TLSDisabled {
		if t.CertificateKeyFile != "" || t.CertificateKeyFilePassword != "" || t.ClusterFile != "" ||
			t.ClusterPassword != "" || t.CAFile != "" || t.AllowConnectionsWithoutCertificates {
			return bad("BadValue: need to enable TLS via the sslMode/tlsMode flag when using TLS configuration parameters")
		}
		return nil
	}
	if t.CertificateKeyFile == "" {
		return bad("BadValue: need tlsCertificateKeyFile or certificateSelector when TLS is enabled")
	}
	// MongoDB 7.0.6 and later refuse TLS without a CA file (SERVER-72839): without one,
	// a client's certificate could not be verified.
	if t.CAFile == "" {
		return bad("InvalidSSLConfiguration: The use of TLS without specifying a chain of trust is no longer supported. Please specify tlsCAFile")
	}
	cert, err := certs.LoadKeyPair(t.CertificateKeyFile)
	if err != nil {
		return bad("InvalidSSLConfiguration: Can not set up PEM key file: cannot read PEM key file %s: %v", t.CertificateKeyFile, err)
	}
	clusterCert := cert
	if t.ClusterFile != "" {
		if clusterCert, err = certs.LoadKeyPair(t.ClusterFile); err != nil {
			return bad("InvalidSSLConfiguration: Can not set up ssl clusterFile: cannot read PEM key file %s: %v", t.ClusterFile, err)
		}
	}
	roots, err := certs.LoadCAPool(t.CAFile)
	if err != nil {
		return bad("InvalidSSLConfiguration: cannot read certificate authority file %s: %v", t.CAFile, err)
	}
	t.server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert}
	switch {
	case t.AllowInvalidCertificates:
		t.server.ClientAuth = tls.RequestClientCert
	case t.AllowConnectionsWithoutCertificates:
		t.server.ClientAuth = tls.VerifyClientCertIfGiven
	}
	t.client = &tls.Config{Certificates: []tls.Certificate{clusterCert}, RootCAs: roots}
	switch {
	case t.AllowInvalidCertificates:
		t.client.InsecureSkipVerify = true
	case t.AllowInvalidHostnames:
		// The chain is still verified, against the CA file; only the host name is not.
		t.client.InsecureSkipVerify = true
		t.client.VerifyConnection = func(cs tls.ConnectionState) error { return verifyChain(cs, roots) }
	}
	return nil
}

// verifyChain verifies a server's certificate chain against roots, ignoring its names.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
	return err
}

// ServerTLS is the server side of net.tls for internal/server (valid after Validate).
func (o *Options) ServerTLS() server.TLS {
	return server.TLS{Mode: o.TLS.mode, Config: o.TLS.server}
}

// ClientSecurity is how the server's internal clients connect to other members, nil when
// plainly: as in MongoDB, members use TLS to each other in preferTLS and requireTLS, with the
// cluster file (else the certificate-key file) as their client certificate and the CA file
// as roots, and authenticate as the internal user with the keyfile's key. Valid after
// Validate.
func (o *Options) ClientSecurity() *client.Security {
	useTLS := o.TLS.mode == server.TLSPrefer || o.TLS.mode == server.TLSRequire
	if !useTLS && o.Key == "" {
		return nil
	}
	s := &client.Security{Key: o.Key}
	if useTLS {
		s.TLS = o.TLS.client
	}
	return s
}

// parsed is net.tls in getCmdLineOpts's `parsed`, nil when no TLS option was given. Keys
// are in mongod's order (its options map is sorted) and passwords are censored as mongod
// censors them.
func (t *TLSOptions) parsed() bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	n := 0
	str := func(key, v string) {
		if v != "" {
			b.AppendString(key, v)
			n++
		}
	}
	flag := func(key string, v bool) {
		if v {
			b.AppendBoolean(key, true)
			n++
		}
	}
	str("CAFile", t.CAFile)
	flag("allowConnectionsWithoutCertificates", t.AllowConnectionsWithoutCertificates)
	flag("allowInvalidCertificates", t.AllowInvalidCertificates)
	flag("allowInvalidHostnames", t.AllowInvalidHostnames)
	str("certificateKeyFile", t.CertificateKeyFile)
	if t.CertificateKeyFilePassword != "" {
		str("certificateKeyFilePassword", "<password>")
	}
	str("clusterFile", t.ClusterFile)
	if t.ClusterPassword != "" {
		str("clusterPassword", "<password>")
	}
	str("mode", t.Mode)
	if n == 0 {
		return nil
	}
	return b.Build()
}

// passwordFlags are the flags whose value getCmdLineOpts's argv censors, as mongod does.
var passwordFlags = map[string]bool{"tlsCertificateKeyFilePassword": true, "tlsClusterPassword": true}

// CensorArgv returns argv with the values of password flags replaced by "<password>" (mongod's
// censorArgvArray), for getCmdLineOpts.
func CensorArgv(argv []string) []string {
	out := append([]string(nil), argv...)
	for i := 0; i < len(out); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
		if !strings.HasPrefix(out[i], "-") || !passwordFlags[name] {
			continue
		}
		if hasValue {
			out[i] = out[i][:strings.Index(out[i], "=")+1] + "<password>"
		} else if i+1 < len(out) {
			i++
			out[i] = "<password>"
		}
	}
	return out
}
