package auth

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/xdg-go/scram"
	"github.com/xdg-go/stringprep"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// The SCRAM mechanisms and their default iteration counts (the scramIterationCount and
// scramSHA256IterationCount parameters).
const (
	MechSCRAMSHA1   = "SCRAM-SHA-1"
	MechSCRAMSHA256 = "SCRAM-SHA-256"

	DefaultSHA1Iterations   = 10000
	DefaultSHA256Iterations = 15000
	// MinIterations is the lowest iteration count the parameters accept.
	MinSHA1Iterations   = 5000
	MinSHA256Iterations = 4096
)

// Credential is one mechanism's stored credential: base64 salt, stored key and server key.
type Credential struct {
	Iterations                 int
	Salt, StoredKey, ServerKey string
}

func parseCredential(d bsoncore.Document) (Credential, error) {
	var c Credential
	it, ok := d.Lookup("iterationCount").AsInt64OK()
	salt, ok1 := d.Lookup("salt").StringValueOK()
	sk, ok2 := d.Lookup("storedKey").StringValueOK()
	svk, ok3 := d.Lookup("serverKey").StringValueOK()
	if !ok || !ok1 || !ok2 || !ok3 || it <= 0 {
		return c, mongoerr.New(mongoerr.FailedToParse, "Invalid SCRAM credential document")
	}
	return Credential{Iterations: int(it), Salt: salt, StoredKey: sk, ServerKey: svk}, nil
}

// AppendDoc appends c as {iterationCount, salt, storedKey, serverKey} under key.
func (c Credential) AppendDoc(b []byte, key string) []byte {
	idx, b := bsoncore.AppendDocumentElementStart(b, key)
	b = bsoncore.AppendInt32Element(b, "iterationCount", int32(c.Iterations))
	b = bsoncore.AppendStringElement(b, "salt", c.Salt)
	b = bsoncore.AppendStringElement(b, "storedKey", c.StoredKey)
	b = bsoncore.AppendStringElement(b, "serverKey", c.ServerKey)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

func hashOf(mech string) (scram.HashGeneratorFcn, int, error) {
	switch mech {
	case MechSCRAMSHA1:
		return scram.SHA1, 16, nil // salt length: digest size minus 4, as mongod
	case MechSCRAMSHA256:
		return scram.SHA256, 28, nil
	}
	return nil, 0, mongoerr.Newf(mongoerr.BadValue, "Unknown auth mechanism '%s'", mech)
}

// SHA1PasswordDigest is MongoDB's SCRAM-SHA-1 password: hex(md5("user:mongo:password")).
// SCRAM-SHA-1 clients (the drivers) hash the password this way before SCRAM.
func SHA1PasswordDigest(user, password string) string {
	sum := md5.Sum([]byte(user + ":mongo:" + password))
	return hex.EncodeToString(sum[:])
}

// PreparePassword is the SCRAM password a mechanism uses for user's cleartext password:
// the SHA-1 digest, or the SASLprep'd password for SHA-256 (BadValue when SASLprep refuses
// it, as mongod's "Could not SASLprep password").
func PreparePassword(mech, user, password string) (string, error) {
	if mech == MechSCRAMSHA1 {
		return SHA1PasswordDigest(user, password), nil
	}
	p, err := stringprep.SASLprep.Prepare(password)
	if err != nil {
		return "", mongoerr.New(mongoerr.BadValue, "Could not SASLprep password")
	}
	return p, nil
}

// MakeCredential salts and derives a new credential for mech from the prepared password
// (PreparePassword's).
func MakeCredential(mech, prepared string, iterations int) (Credential, error) {
	h, saltLen, err := hashOf(mech)
	if err != nil {
		return Credential{}, err
	}
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, err
	}
	return deriveCredential(h, prepared, salt, iterations)
}

func deriveCredential(h scram.HashGeneratorFcn, prepared string, salt []byte, iterations int) (Credential, error) {
	cl, err := h.NewClientUnprepped("", prepared, "")
	if err != nil {
		return Credential{}, err
	}
	sc, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if err != nil {
		return Credential{}, err
	}
	enc := base64.StdEncoding.EncodeToString
	return Credential{Iterations: iterations, Salt: enc(salt), StoredKey: enc(sc.StoredKey), ServerKey: enc(sc.ServerKey)}, nil
}

// KeyfileCredentials are the internal user's (__system@local) credentials for a keyfile's
// key, freshly salted: each server sends its own salt in the conversation, so members need
// not agree on one.
func KeyfileCredentials(key string) (map[string]Credential, error) {
	out := map[string]Credential{}
	for _, m := range []string{MechSCRAMSHA1, MechSCRAMSHA256} {
		p, err := PreparePassword(m, "__system", key)
		if err != nil {
			return nil, err
		}
		iters := DefaultSHA1Iterations
		if m == MechSCRAMSHA256 {
			iters = DefaultSHA256Iterations
		}
		c, err := MakeCredential(m, p, iters)
		if err != nil {
			return nil, err
		}
		out[m] = c
	}
	return out, nil
}

// ErrUnknownUser is what a credential lookup returns for a user that does not exist.
var ErrUnknownUser = errors.New("unknown user")

// Conversation is the server side of one SCRAM authentication.
type Conversation struct {
	Mechanism string
	conv      *scram.ServerConversation
	user      string
}

// NewConversation starts a server conversation for mech; lookup finds the credential of the
// user the client names (its SCRAM name decoded).
func NewConversation(mech string, lookup func(user string) (Credential, error)) (*Conversation, error) {
	h, _, err := hashOf(mech)
	if err != nil {
		return nil, err
	}
	c := &Conversation{Mechanism: mech}
	srv, err := h.NewServer(func(name string) (scram.StoredCredentials, error) {
		c.user = decodeSCRAMName(name)
		cred, err := lookup(c.user)
		if err != nil {
			return scram.StoredCredentials{}, err
		}
		salt, err1 := base64.StdEncoding.DecodeString(cred.Salt)
		sk, err2 := base64.StdEncoding.DecodeString(cred.StoredKey)
		svk, err3 := base64.StdEncoding.DecodeString(cred.ServerKey)
		if err := errors.Join(err1, err2, err3); err != nil {
			return scram.StoredCredentials{}, err
		}
		return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: cred.Iterations},
			StoredKey: sk, ServerKey: svk}, nil
	})
	if err != nil {
		return nil, err
	}
	c.conv = srv.NewConversation()
	return c, nil
}

// Step answers one client message. An error means the authentication failed; it is never
// shown to the client (mongod answers AuthenticationFailed whatever the reason).
func (c *Conversation) Step(msg string) (string, error) { return c.conv.Step(msg) }

// Done reports whether the conversation is over; Valid whether the client proved itself.
func (c *Conversation) Done() bool  { return c.conv.Done() }
func (c *Conversation) Valid() bool { return c.conv.Valid() }

// User is the user the client named (empty before the first message).
func (c *Conversation) User() string { return c.user }

// decodeSCRAMName undoes SCRAM's saslname escaping ("=2C" is ',' and "=3D" is '=').
func decodeSCRAMName(s string) string {
	if !strings.Contains(s, "=") {
		return s
	}
	return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(s)
}
