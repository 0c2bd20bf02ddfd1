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
	"optime":                1, // Timestamp and OpTime: plain values shared by storage, repl (incl. the pure topology core) and txn
	"collation":             1, // collations on x/text: sort keys for strings; bsonutil takes it as a StringComparer
	"logv2":                 1,
	"wire":                  2,
	"keystring":             2,
	"storage":               2,
	"lock":                  2,
	"catalog":               3,
	"index":                 5,
	"query/expr":            3, // aggregation expressions and accumulators: the matcher's $expr, find projections and agg use them
	"query":                 4, // match expressions, projection, update: pure BSON; index compiles partial filters with them
	"query/plan":            6, // the planner and plan stages read indexes
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
	"service":               12, // ServiceContext and the entry point's request types, shared by every role
	"router":                13,
	"commands":              14,
	"server":                15,
	"cluster":               16, // test harness: may start any binary
	"crashtest":             16,
	"repl/applier/repltest": 16, // in-process replica sets for tests: starts servers
	"integration":           17, // real-process driver tests; may use the cluster harness
	"bench":                 16, // humongo bench engine: a client of any server
	"arch":                  17,
}

// roleNeutral lists packages that serve every role (humongod, humongos) and so must not
// import a role's handlers or replication directly, whatever their rank; they reach them
// through service.Role and the registry value the binary hands over.
var roleNeutral = map[string][]string{
	"server": {"commands", "router", "repl"},
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
