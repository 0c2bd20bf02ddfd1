package auth

import (
	"sort"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// Privilege is a set of actions on a resource pattern.
type Privilege struct {
	Resource Resource
	Actions  ActionSet
}

// Privileges is a union of privileges, merged per resource pattern. The zero value is empty
// and ready to use; a value is read-only once shared.
type Privileges struct {
	m map[Resource]ActionSet
}

// Add merges p into ps.
func (ps *Privileges) Add(p Privilege) {
	if ps.m == nil {
		ps.m = map[Resource]ActionSet{}
	}
	s := ps.m[p.Resource]
	s.AddAll(p.Actions)
	ps.m[p.Resource] = s
}

// AddAll merges every privilege of o into ps.
func (ps *Privileges) AddAll(o Privileges) {
	for r, s := range o.m {
		ps.Add(Privilege{r, s})
	}
}

// Allows reports whether ps grants every action of want on r: the patterns that match r
// together must hold them (MongoDB's isAuthorizedForActionsOnResource).
func (ps Privileges) Allows(r Resource, want ActionSet) bool {
	if len(ps.m) == 0 {
		return want.Empty()
	}
	var list [5]Resource
	n := r.searchList(&list)
	var have ActionSet
	for _, p := range list[:n] {
		if s, ok := ps.m[p]; ok {
			have.AddAll(s)
		}
	}
	return have.HasAll(want)
}

// Allow reports whether ps grants action a on r.
func (ps Privileges) Allow(r Resource, a Action) bool { return ps.Allows(r, Actions(a)) }

// AnyOn reports whether ps grants any action on r. For a database it is MongoDB's
// isAuthorizedForAnyActionOnAnyResourceInDB (listDatabases' authorizedDatabases,
// listCollections' authorizedCollections): a privilege on the database, on a namespace in
// it, on a collection name in every database, on every normal resource (normal databases
// only) or on every resource. For a namespace or the cluster it is
// isAuthorizedForAnyActionOnResource: any action by the patterns that match it.
func (ps Privileges) AnyOn(r Resource) bool {
	if r.Kind == KindDB {
		for p, s := range ps.m {
			if s.Empty() {
				continue
			}
			switch p.Kind {
			case KindAny, KindCollection:
				return true
			case KindAnyNormal:
				if normalDB(r.DB) {
					return true
				}
			case KindDB, KindNS:
				if p.DB == r.DB {
					return true
				}
			}
		}
		return false
	}
	var list [5]Resource
	n := r.searchList(&list)
	for _, p := range list[:n] {
		if s, ok := ps.m[p]; ok && !s.Empty() {
			return true
		}
	}
	return false
}

// List returns the privileges sorted by resource (for usersInfo and rolesInfo).
func (ps Privileges) List() []Privilege {
	out := make([]Privilege, 0, len(ps.m))
	for r, s := range ps.m {
		if !s.Empty() {
			out = append(out, Privilege{r, s})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Resource, out[j].Resource
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.DB != b.DB {
			return a.DB < b.DB
		}
		return a.Coll < b.Coll
	})
	return out
}

// Len is the number of resource patterns with actions.
func (ps Privileges) Len() int { return len(ps.m) }

// AppendPrivileges appends privs as an array field key of {resource, actions} documents.
func AppendPrivileges(b []byte, key string, privs []Privilege) []byte {
	ai, b := bsoncore.AppendArrayElementStart(b, key)
	for i, p := range privs {
		di, b2 := bsoncore.AppendDocumentElementStart(b, itoa(i))
		b2 = p.Resource.AppendDoc(b2, "resource")
		aj, b3 := bsoncore.AppendArrayElementStart(b2, "actions")
		for k, n := range p.Actions.Names() {
			b3 = bsoncore.AppendStringElement(b3, itoa(k), n)
		}
		b2, _ = bsoncore.AppendArrayEnd(b3, aj)
		b, _ = bsoncore.AppendDocumentEnd(b2, di)
	}
	b, _ = bsoncore.AppendArrayEnd(b, ai)
	return b
}

// ParsePrivileges reads a privileges array ([{resource, actions}]), as createRole and
// grantPrivilegesToRole take and admin.system.roles stores. Unknown action names fail
// (FailedToParse, as mongod's "Unrecognized action privilege string").
func ParsePrivileges(v bsoncore.Value) ([]Privilege, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "privileges field must be an array")
	}
	vals, _ := arr.Values()
	out := make([]Privilege, 0, len(vals))
	for _, pv := range vals {
		pd, ok := pv.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Elements in privilege arrays must be objects")
		}
		rd, ok := pd.Lookup("resource").DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Privilege must have a 'resource' document")
		}
		res, err := ParseResource(rd)
		if err != nil {
			return nil, err
		}
		av, ok := pd.Lookup("actions").ArrayOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Privilege must have an 'actions' array")
		}
		avs, _ := av.Values()
		var set ActionSet
		for _, a := range avs {
			name, ok := a.StringValueOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.FailedToParse, "Privilege actions must be strings")
			}
			act, ok := ParseAction(name)
			if !ok {
				return nil, mongoerr.Newf(mongoerr.FailedToParse, "Unrecognized action privilege string: %s", name)
			}
			set.Add(act)
		}
		out = append(out, Privilege{res, set})
	}
	return out, nil
}

func badValue(msg string) error { return mongoerr.New(mongoerr.BadValue, msg) }

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
