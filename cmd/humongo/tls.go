package main

// `humongo up --tls`: a local CA and the certificates it signs, made in <dir>/tls (and kept
// there for the next `up`), every process started in requireTLS with them, and connection
// strings that name the CA file, so that humongo itself (status, down, the replica-set and
// shard setup) and the user's clients connect over TLS.

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"humongo/internal/certs"
)

// tlsDir holds the TLS files of the deployment in dir.
func tlsDir(dir string) string { return filepath.Join(dir, "tls") }

// tlsFiles are the TLS files of the deployment in dir.
func tlsFiles(dir string) certs.Local { return certs.LocalFiles(tlsDir(dir)) }

// tlsArgs are the TLS options of every process of a --tls deployment: TLS only, the
// deployment's certificate (the server's and, for member-to-member connections, the client's)
// and its CA. Clients need not present a certificate: the CA file alone lets a driver or
// mongosh verify the servers, as MongoDB's one-way TLS.
func tlsArgs(f certs.Local) []string {
	return []string{"--tlsMode", "requireTLS", "--tlsCertificateKeyFile", f.Server, "--tlsCAFile", f.CA,
		"--tlsAllowConnectionsWithoutCertificates"}
}

// certificateHosts are the names the servers' certificate holds besides localhost, 127.0.0.1
// and ::1: each address of --bind-ip, or the machine's name for a wildcard (the name members
// then call each other by, see memberHost).
func certificateHosts(bindIP string) []string {
	var hosts []string
	for _, ip := range strings.Split(bindIP, ",") {
		ip = strings.TrimSpace(ip)
		switch ip {
		case "", "0.0.0.0", "::":
			if h, err := os.Hostname(); err == nil {
				hosts = append(hosts, h)
			}
		default:
			hosts = append(hosts, ip)
		}
	}
	return hosts
}

// tlsQuery is the connection string option of a client that trusts the CA file ca ("" for a
// plain deployment).
func tlsQuery(ca string) string {
	if ca == "" {
		return ""
	}
	// The path is escaped but for its slashes, so the printed URI stays readable.
	return "tls=true&tlsCAFile=" + strings.ReplaceAll(url.QueryEscape(ca), "%2F", "/")
}

// uri is the directConnection connection string of p.
func (p *Process) uri() string {
	u := "mongodb://" + p.addr() + "/?directConnection=true"
	if q := tlsQuery(p.TLSCAFile); q != "" {
		u += "&" + q
	}
	return u
}
