package client

import (
	"crypto/tls"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Security is how a server's internal clients authenticate to other cluster members: TLS
// when the server's tlsMode makes outgoing connections use it (preferTLS, requireTLS), and
// the keyfile's key as the password of the internal user __system@local (MongoDB's
// clusterAuthMode keyFile: SCRAM over the key).
type Security struct {
	// TLS, when set, is the client side of TLS: the server's certificate as the client
	// certificate and its CA file as the roots.
	TLS *tls.Config
	// Key is the keyfile's key (security.keyFile), empty without internal authentication.
	Key string
}

// InternalUser and InternalUserDB name the user internal clients authenticate as.
const (
	InternalUser   = "__system"
	InternalUserDB = "local"
)

// apply sets s on a client's driver options (s may be nil).
func (s *Security) apply(opts *options.ClientOptions) {
	if s == nil {
		return
	}
	if s.TLS != nil {
		opts.SetTLSConfig(s.TLS)
	}
	if s.Key != "" {
		opts.SetAuth(options.Credential{AuthMechanism: "SCRAM-SHA-256", AuthSource: InternalUserDB,
			Username: InternalUser, Password: s.Key})
	}
}
