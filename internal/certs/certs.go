// Package certs holds X.509 certificates and keys in PEM files, as MongoDB's TLS options name
// them: reading a certificate-key file (tlsCertificateKeyFile, tlsClusterFile: a certificate
// chain and its private key in one PEM file) and a CA file (tlsCAFile), and making a local
// certificate authority and the certificates it signs (ECDSA P-256) for `humongo up --tls` and
// for tests. It uses the standard library's crypto/x509 only.
//
// Errors say which file and what is wrong with it; the callers (internal/process) put them in
// mongod's words.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrEncryptedKey marks a certificate-key file whose private key is encrypted (a PEM
// "ENCRYPTED PRIVATE KEY" or a legacy Proc-Type: 4,ENCRYPTED block): the standard library
// cannot decrypt PKCS#8, so such keys are refused rather than half supported.
var ErrEncryptedKey = errors.New("the private key is encrypted; encrypted keys are not supported (decrypt it, e.g. `openssl pkey -in key.pem -out plain.pem`)")

// LoadKeyPair reads a certificate-key file: one or more CERTIFICATE blocks (the leaf first)
// and the leaf's private key, in any order. The leaf must be valid now.
func LoadKeyPair(path string) (tls.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return tls.Certificate{}, err
	}
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
			return tls.Certificate{}, ErrEncryptedKey
		}
	}
	// X509KeyPair finds the CERTIFICATE blocks and the key among the rest of the blocks.
	cert, err := tls.X509KeyPair(data, data)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return tls.Certificate{}, err
		}
		cert.Leaf = leaf
	}
	if now := time.Now(); now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return tls.Certificate{}, fmt.Errorf("the certificate is expired or not yet valid (valid from %s to %s)",
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return cert, nil
}

// LoadCAPool reads a CA file: one or more CERTIFICATE blocks, the roots a peer's certificate
// is verified against.
func LoadCAPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("no PEM CERTIFICATE block found")
	}
	return pool, nil
}

// Authority is a certificate authority: its certificate and signing key.
type Authority struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewAuthority makes a self-signed CA valid for validFor from an hour ago (so a clock a little
// behind still accepts what it signs).
func NewAuthority(commonName string, validFor time.Duration) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(commonName, validFor)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{Cert: cert, Key: key}, nil
}

// Leaf describes a certificate for an Authority to issue.
type Leaf struct {
	CommonName string
	// Hosts are the subject alternative names: IP addresses and DNS names.
	Hosts []string
	// Server and Client are the extended key usages; a cluster member's certificate has both,
	// as it is also the client certificate of the member's connections to the others.
	Server, Client bool
	ValidFor       time.Duration
}

// Issue makes a certificate for l signed by a and returns it and its new key as one PEM
// certificate-key file.
func (a *Authority) Issue(l Leaf) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(l.CommonName, l.ValidFor)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if l.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	for _, h := range l.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, &key.PublicKey, a.Key)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM...), nil
}

// CertPEM is a's certificate, the content of a CA file.
func (a *Authority) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Cert.Raw})
}

// KeyPEM is a's private key.
func (a *Authority) KeyPEM() ([]byte, error) { return keyPEM(a.Key) }

// LoadAuthority reads a CA's certificate and key files, as written by CertPEM and KeyPEM.
func LoadAuthority(certPath, keyPath string) (*Authority, error) {
	data, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: no PEM PRIVATE KEY block", keyPath)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", keyPath)
	}
	data, err = os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	if b, _ = pem.Decode(data); b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE block", certPath)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, fmt.Errorf("%s does not hold the key of %s", keyPath, certPath)
	}
	return &Authority{Cert: cert, Key: key}, nil
}

// Local are the TLS files of a local deployment, all in one directory.
type Local struct {
	// CA is the CA file (tlsCAFile) of servers and clients; CAKey its key, kept to sign
	// certificates later.
	CA, CAKey string
	// Server is the servers' certificate-key file (tlsCertificateKeyFile), valid for
	// localhost, 127.0.0.1, ::1 and the extra hosts, for server and client authentication.
	Server string
	// Client is a client certificate-key file, for clients that present one.
	Client string
}

// LocalFiles names the files of a local deployment in dir (see EnsureLocal).
func LocalFiles(dir string) Local {
	return Local{CA: filepath.Join(dir, "ca.pem"), CAKey: filepath.Join(dir, "ca-key.pem"),
		Server: filepath.Join(dir, "server.pem"), Client: filepath.Join(dir, "client.pem")}
}

// localValidity is how long local certificates are valid: a development deployment outlives
// many restarts, and its files are kept.
const localValidity = 5 * 365 * 24 * time.Hour

// EnsureLocal makes dir's local CA and the server and client certificates it signs (see
// Local), keeping each file that exists: a deployment restarted on the same directory keeps
// the CA its clients trust. Keys are written readable by the owner only.
func EnsureLocal(dir string, hosts []string) (Local, error) {
	f := LocalFiles(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return f, err
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if exists(f.Server) && exists(f.Client) && exists(f.CA) {
		return f, nil
	}
	var ca *Authority
	var err error
	if exists(f.CA) {
		if ca, err = LoadAuthority(f.CA, f.CAKey); err != nil {
			return f, fmt.Errorf("a certificate is missing and the CA cannot sign it: %w", err)
		}
	} else {
		if ca, err = NewAuthority("Humongo local CA", localValidity); err != nil {
			return f, err
		}
		key, err := ca.KeyPEM()
		if err != nil {
			return f, err
		}
		if err := writeFile(f.CAKey, key, 0o600); err != nil {
			return f, err
		}
		if err := writeFile(f.CA, ca.CertPEM(), 0o644); err != nil {
			return f, err
		}
	}
	if !exists(f.Server) {
		all := append([]string{"localhost", "127.0.0.1", "::1"}, hosts...)
		pemData, err := ca.Issue(Leaf{CommonName: "localhost", Hosts: all, Server: true, Client: true, ValidFor: localValidity})
		if err != nil {
			return f, err
		}
		if err := writeFile(f.Server, pemData, 0o600); err != nil {
			return f, err
		}
	}
	if !exists(f.Client) {
		pemData, err := ca.Issue(Leaf{CommonName: "humongo client", Client: true, ValidFor: localValidity})
		if err != nil {
			return f, err
		}
		if err := writeFile(f.Client, pemData, 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}

// writeFile writes data to path through a temporary file and a rename, so a file that exists
// is whole (EnsureLocal keeps existing files).
func writeFile(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func template(commonName string, validFor time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"Humongo"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validFor),
	}, nil
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
