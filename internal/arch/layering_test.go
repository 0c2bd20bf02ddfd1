package arch

import (
	"os/exec"
	"strings"
	"testing"
)

// rank orders internal packages bottom-up as in ARCHITECTURE.md. A package may import another
// internal package only if that package's rank is strictly lower. Packages of equal rank are
// independent of each other. Subpackages inherit the rank of their nearest listed parent.
var rank = map[string]int{
	"mongoerr":              0,
	"recordid":              0,
	"failpoint":             1,
	"bsonutil":              1,
	"collation":             1, // collations on x/text: sort keys for strings; bsonutil takes it as a StringComparer
	"logv2":                 1,
	"wire":                  2,
	"keystring":             2,
	"storage":               2,
	"lock":                  2,
	"catalog":               3,
	"client":                3, // internal client (host rewriter, per-host pools, replica-set targeting): under repl and sharding
	"index":                 5,
	"query":                 6,
	"validate":              6,
	"agg":                   7,
	"cursor":                7, // cursor manager: below commands, independent of the planner
	"opobserver":            4, // the hook interface sits below the write path; implementations (repl/oplog) sit above
	"vclock":                8,
	"repl":                  8,
	"txn":                   9,
	"primaryonly":           9,
	"sharding":              10,
	"resharding":            11,
	"serverless":            11,
	"router":                12,
	"commands":              13,
	"server":                14,
	"cluster":               15, // test harness: may start any binary
	"crashtest":             15,
	"repl/applier/repltest": 15, // in-process replica sets for tests: starts servers
	"integration":           16, // real-process driver tests; may use the cluster harness
	"bench":                 15, // humongo bench engine: a client of any server
	"arch":                  16,
}

const module = "humongo/"

// internalRank returns the rank of an import path under humongo/internal/, and whether it is one.
func internalRank(t *testing.T, path string) (string, int, bool) {
	rest, ok := strings.CutPrefix(path, module+"internal/")
	if !ok {
		return "", 0, false
	}
	// The longest listed prefix wins, so a harness below a low layer (repl/applier/repltest)
	// can sit with the harnesses.
	top, _, _ := strings.Cut(rest, "/")
	for p := rest; ; {
		if _, ok := rank[p]; ok {
			top = p
			break
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	r, ok := rank[top]
	if !ok {
		t.Errorf("internal package %s has no layer in arch.rank: add it (and to ARCHITECTURE.md)", path)
	}
	return top, r, true
}

func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		top, r, internal := internalRank(t, pkg)
		for _, imp := range imports {
			if strings.HasPrefix(imp, "github.com/cockroachdb/pebble") && top != "storage" {
				t.Errorf("%s imports %s: Pebble belongs to internal/storage only", pkg, imp)
			}
			if !internal {
				continue // cmd/* may import anything
			}
			itop, ir, ok := internalRank(t, imp)
			if !ok || itop == top {
				continue
			}
			if ir >= r {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must go downwards", pkg, r, imp, ir)
			}
		}
	}
}
