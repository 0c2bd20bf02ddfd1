package main

// `humongo up --auth`: a keyfile made in <dir>/keyfile (and kept for the next up) that every
// process starts with, so members, shards, config servers and routers authenticate to each
// other and authorization is on; a first user with the root role and a random password kept
// in <dir>/credentials, printed in the connection string. humongo itself (set-up, status)
// connects as the internal user with the keyfile, so it needs no password.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// adminUser is the first user `up --auth` creates.
const adminUser = "admin"

func keyfilePath(dir string) string     { return filepath.Join(dir, "keyfile") }
func credentialsPath(dir string) string { return filepath.Join(dir, "credentials") }

// randomBase64 returns n random bytes in base64 (a keyfile's and a password's alphabet).
func randomBase64(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// ensureKeyfile makes the deployment's keyfile unless it exists (owner-only, as humongod
// requires; 756 base64 characters as MongoDB's docs suggest).
func ensureKeyfile(dir string) (string, error) {
	p := keyfilePath(dir)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	key, err := randomBase64(567)
	if err != nil {
		return "", err
	}
	return p, os.WriteFile(p, []byte(key+"\n"), 0o600)
}

// adminPassword returns the first user's password, made (and kept, owner-only) on first use.
func adminPassword(dir string) (string, error) {
	if b, err := os.ReadFile(credentialsPath(dir)); err == nil {
		if _, pw, ok := strings.Cut(strings.TrimSpace(string(b)), ":"); ok && pw != "" {
			return pw, nil
		}
	}
	pw, err := randomBase64(18)
	if err != nil {
		return "", err
	}
	pw = strings.NewReplacer("+", "x", "/", "y", "=", "").Replace(pw)
	return pw, os.WriteFile(credentialsPath(dir), []byte(adminUser+":"+pw+"\n"), 0o600)
}

// withInternalAuth makes o authenticate as the internal user with keyFile's key ("": no
// authentication).
func withInternalAuth(o *options.ClientOptions, keyFile string) (*options.ClientOptions, error) {
	if keyFile == "" {
		return o, nil
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	key := strings.Join(strings.Fields(string(b)), "")
	return o.SetAuth(options.Credential{AuthMechanism: "SCRAM-SHA-256", AuthSource: "local",
		Username: "__system", Password: key}), nil
}

// connectProcess is humongo's client of p (directConnection, TLS and the internal user as
// the deployment needs).
func connectProcess(p *Process, o *options.ClientOptions) (*mongo.Client, error) {
	o, err := withInternalAuth(o.ApplyURI(p.uri()), p.KeyFile)
	if err != nil {
		return nil, err
	}
	return mongo.Connect(o)
}

// createAdmin creates the first user (root) through cl, unless it exists already (a
// deployment started again on its data).
func createAdmin(ctx context.Context, cl *mongo.Client, password string) error {
	err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "createUser", Value: adminUser},
		{Key: "pwd", Value: password}, {Key: "roles", Value: bson.A{"root"}}}).Err()
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code == 51003 {
		return nil
	}
	return err
}

// withCredentials puts the first user's name and password into a connection string.
func withCredentials(uri, password string) string {
	rest, ok := strings.CutPrefix(uri, "mongodb://")
	if !ok {
		return uri
	}
	sep := "?"
	if strings.Contains(rest, "?") {
		sep = "&"
	}
	if !strings.Contains(rest, "/") {
		rest += "/"
	}
	return fmt.Sprintf("mongodb://%s:%s@%s%sauthSource=admin", adminUser, url.QueryEscape(password), rest, sep)
}

// createAdmins creates the first user of an --auth deployment: through its standalone, its
// replica set's primary, or a sharded cluster's router (on the config servers) and on each
// shard's primary (a shard-local user, as MongoDB recommends, which also ends the shards'
// localhost exception). It returns the password.
func createAdmins(ctx context.Context, dir string, procs []Process) (string, error) {
	pw, err := adminPassword(dir)
	if err != nil {
		return "", err
	}
	create := func(uri, keyFile string) error {
		o, err := withInternalAuth(options.Client().ApplyURI(uri).SetAppName("humongo"), keyFile)
		if err != nil {
			return err
		}
		cl, err := mongo.Connect(o)
		if err != nil {
			return err
		}
		defer func() { _ = cl.Disconnect(context.WithoutCancel(ctx)) }()
		return createAdmin(ctx, cl, pw)
	}
	sets := map[string][]Process{}
	var order []string
	for _, p := range procs {
		switch p.Role {
		case "standalone", "router":
			if err := create(p.uri(), p.KeyFile); err != nil {
				return "", fmt.Errorf("creating user %s on %s: %w", adminUser, p.Name, err)
			}
		case "member", "shard":
			if _, ok := sets[p.ReplSet]; !ok {
				order = append(order, p.ReplSet)
			}
			sets[p.ReplSet] = append(sets[p.ReplSet], p)
		}
	}
	for _, set := range order {
		if err := create(replicaSetURI(sets[set]), sets[set][0].KeyFile); err != nil {
			return "", fmt.Errorf("creating user %s on %s: %w", adminUser, set, err)
		}
		if len(procs) > 0 && procs[0].Role == "member" {
			break // one replica set
		}
	}
	return pw, nil
}
