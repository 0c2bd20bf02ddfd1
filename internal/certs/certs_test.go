package certs

import (
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// EnsureLocal makes a CA and certificates that verify each other, and keeps them on a second
// call; a missing leaf is signed again by the kept CA.
func TestEnsureLocal(t *testing.T) {
	dir := t.TempDir()
	f, err := EnsureLocal(dir, []string{"db.example", "10.1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := LoadCAPool(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	server, err := LoadKeyPair(f.Server)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"localhost", "127.0.0.1", "::1", "db.example", "10.1.2.3"} {
		if _, err := server.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	if _, err := server.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("server certificate as a member's client certificate: %v", err)
	}
	client, err := LoadKeyPair(f.Client)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if st, _ := os.Stat(f.CAKey); st.Mode().Perm() != 0o600 {
		t.Errorf("CA key mode %v", st.Mode())
	}

	caBefore, _ := os.ReadFile(f.CA)
	serverBefore, _ := os.ReadFile(f.Server)
	if err := os.Remove(f.Client); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureLocal(dir, nil); err != nil {
		t.Fatal(err)
	}
	caAfter, _ := os.ReadFile(f.CA)
	serverAfter, _ := os.ReadFile(f.Server)
	if string(caBefore) != string(caAfter) || string(serverBefore) != string(serverAfter) {
		t.Error("EnsureLocal replaced existing files")
	}
	client, err = LoadKeyPair(f.Client)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("re-issued client certificate: %v", err)
	}
}

// Bad files are refused with a reason: missing, not PEM, a certificate without its key, an
// encrypted key, an expired certificate.
func TestLoadBadFiles(t *testing.T) {
	dir := t.TempDir()
	f, err := EnsureLocal(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := LoadKeyPair(filepath.Join(dir, "missing.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	garbage := write("garbage.pem", "this is not PEM\n")
	if _, err := LoadKeyPair(garbage); err == nil {
		t.Error("garbage accepted as a certificate-key file")
	}
	if _, err := LoadCAPool(garbage); err == nil || !strings.Contains(err.Error(), "no PEM CERTIFICATE") {
		t.Errorf("garbage CA file: %v", err)
	}
	if _, err := LoadKeyPair(f.CA); err == nil {
		t.Error("a certificate without its key accepted")
	}
	enc := write("enc.pem", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")
	if _, err := LoadKeyPair(enc); !errors.Is(err, ErrEncryptedKey) {
		t.Errorf("encrypted key: %v", err)
	}
	ca, err := LoadAuthority(f.CA, f.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := ca.Issue(Leaf{CommonName: "old", Hosts: []string{"localhost"}, Server: true, ValidFor: -time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyPair(write("expired.pem", string(expired))); err == nil || !strings.Contains(err.Error(), "expired or not yet valid") {
		t.Errorf("expired certificate: %v", err)
	}
}
