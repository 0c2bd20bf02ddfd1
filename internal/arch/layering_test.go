package arch

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// rank orders the production packages under internal/ bottom-up as in ARCHITECTURE.md. A
// package may import another internal package only if that package's rank is strictly lower;
// packages of equal rank are independent of each other. Subpackages inherit the rank of their
// nearest listed parent (the longest listed prefix wins). docs/architecture.md lists the same
// table with what each package owns; TestArchitectureDoc keeps the two equal.
var rank = map[string]int{
	"mongoerr":   0,
	"recordid":   0,
	"failpoint":  1,
	"bsonutil":   1,
	"optime":     1,
	"collation":  1,
	"auth":       1,
	"logv2":      1,
	"certs":      1, // X.509 certificates and keys in PEM files (TLS options, humongo up --tls)
	"wire":       2,
	"keystring":  2,
	"storage":    2,
	"lock":       2,
	"vclock":     2,
	"catalog":    3,
	"client":     3,
	"query/expr": 3,
	"query":      4,
	"opobserver": 4,
	"index":      5,
	"query/plan": 6,
	"validate":   6,
	"agg":        7,
	"cursor":     7,
	"operation":  8,
	"repl":       9,
	// primaryonly runs resumable services (DDL and commit coordinators) for any layer above.
	"primaryonly": 9,
	"txn":         10,
	// changestream turns the oplog into change events ($changeStream): it reads the oplog
	// (repl) and serves through the aggregation and cursor layers.
	"changestream": 10,
	"sharding":     11,
	// sharding/ddl drives the rest of sharding (routing, configclient, shardregistry) for
	// the shard's DDL; the command layer calls it.
	"sharding/ddl": 12,
	"service":      12,
	"router":       13,
	"commands":     14,
	"server":       15,
	"bench":        15, // humongo bench's engine: a client of any server, used by cmd/humongo
	"process":      16, // what every server binary does around its server: options, startup, signals

	// sharding/balancer reads the rest of sharding (configsvr's zone bounds, configclient's
	// collection entries, routing's chunks) for the config server primary's balancer.
	"sharding/balancer": 12,
	// sharding/migration runs chunk migrations on a shard over the rest of sharding
	// (filtering's critical section, routing) and the operation layer's storage.
	"sharding/migration": 12,
	// sharding/txncoord is the shard's two-phase commit coordinator; it needs only the error
	// codes and fail points (its store and sends are given by the command layer).
	"sharding/txncoord": 12,
}

// harness lists the test-only packages: harnesses that start servers and processes, and
// packages that hold only tests. They may import anything; no production package may import
// them, and they have no rank, so nothing built for users depends on test code.
var harness = map[string]bool{
	"cluster":               true, // real-process deployments, nemeses, checkers
	"crashtest":             true,
	"repl/applier/repltest": true, // in-process replica sets
	"bsonutil/bsontest":     true, // random BSON values for property tests and fuzz seeds
	"simtest":               true, // what the deterministic simulations share (seed ranges)
	"integration":           true,
	"arch":                  true,
}

// roleNeutral lists packages that serve every role (humongod, humongos) and so must not
// import a role's handlers or replication directly, whatever their rank; they reach them
// through service.Role and the registry value the binary hands over.
var roleNeutral = map[string][]string{
	"server": {"commands", "router", "repl"},
}

const module = "humongo/"

// classify returns the listed entry an import path under humongo/internal/ belongs to (the
// longest listed prefix), its rank, whether it is a harness, and whether it is internal at all.
func classify(t *testing.T, path string) (top string, r int, isHarness, internal bool) {
	rest, ok := strings.CutPrefix(path, module+"internal/")
	if !ok {
		return "", 0, false, false
	}
	for p := rest; ; {
		if harness[p] {
			return p, 0, true, true
		}
		if r, ok := rank[p]; ok {
			return p, r, false, true
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	t.Errorf("internal package %s has no layer in arch.rank and is not a harness: add it (and to docs/architecture.md)", path)
	return rest, 0, false, true
}

func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		top, r, pkgHarness, internal := classify(t, pkg)
		for _, imp := range imports {
			if strings.HasPrefix(imp, "github.com/cockroachdb/pebble") && top != "storage" {
				t.Errorf("%s imports %s: Pebble belongs to internal/storage only", pkg, imp)
			}
			itop, ir, impHarness, ok := classify(t, imp)
			if !ok {
				continue
			}
			if impHarness {
				if !pkgHarness {
					t.Errorf("%s imports the test-only package %s: production code must not depend on test harnesses", pkg, imp)
				}
				continue
			}
			if !internal || pkgHarness || itop == top {
				continue // cmd/* and harnesses may import any production package
			}
			for _, banned := range roleNeutral[top] {
				if itop == banned {
					t.Errorf("%s imports %s: the front end is role-neutral (use service.Role)", pkg, imp)
				}
			}
			if ir >= r {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must go downwards", pkg, r, imp, ir)
			}
		}
	}
}

// TestArchitectureDoc checks that docs/architecture.md's layer table names exactly the ranked
// packages with their ranks, and its harness table exactly the harnesses, and that every
// listed package exists.
func TestArchitectureDoc(t *testing.T) {
	f, err := os.Open("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| *(\\d+|test-only) *\\| *`internal/([a-z0-9/]+)`")
	docRank, docHarness := map[string]int{}, map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if m[1] == "test-only" {
			docHarness[m[2]] = true
			continue
		}
		n, _ := strconv.Atoi(m[1])
		docRank[m[2]] = n
	}
	for p, r := range rank {
		if d, ok := docRank[p]; !ok || d != r {
			t.Errorf("docs/architecture.md: internal/%s should be listed with rank %d (has %d, listed %v)", p, r, d, ok)
		}
	}
	for p := range docRank {
		if _, ok := rank[p]; !ok {
			t.Errorf("docs/architecture.md lists internal/%s, which arch.rank does not", p)
		}
	}
	for p := range harness {
		if !docHarness[p] {
			t.Errorf("docs/architecture.md: internal/%s should be listed as test-only", p)
		}
	}
	for p := range docHarness {
		if !harness[p] {
			t.Errorf("docs/architecture.md lists internal/%s as test-only; arch.harness does not", p)
		}
	}
	for p := range rank {
		if _, err := os.Stat("../" + p); err != nil {
			t.Errorf("arch.rank lists internal/%s, which does not exist", p)
		}
	}
}
