package checker

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// RegisterOpKind is what a register operation did.
type RegisterOpKind int

const (
	// RegRead reads the register: Value and Found are its result.
	RegRead RegisterOpKind = iota
	// RegWrite sets the register to Value (an upsert of the document).
	RegWrite
	// RegCAS sets the register to Value if it currently holds Expect (an update filtered on
	// the old value); OK is whether it matched.
	RegCAS
)

func (k RegisterOpKind) String() string {
	switch k {
	case RegRead:
		return "read"
	case RegWrite:
		return "write"
	case RegCAS:
		return "cas"
	}
	return fmt.Sprintf("RegisterOpKind(%d)", int(k))
}

// RegisterOp is one client operation on a single-document register identified by Key. The
// register starts absent (a read returns Found=false until the first write).
type RegisterOp struct {
	Client int
	Key    string
	Kind   RegisterOpKind
	// Value is the value written (RegWrite, RegCAS) or read (RegRead with Found).
	Value int64
	// Found is a read's result: false means the document did not exist.
	Found bool
	// Expect is the value a RegCAS compares with.
	Expect int64
	// OK is a RegCAS's result: whether the comparison matched and the write was applied.
	OK bool
	// Unknown marks an operation whose outcome the client never learned (timeout, network
	// error, crash). A write or CAS may or may not have taken effect, at any time after Call;
	// an unknown read carries no information and is dropped.
	Unknown bool
	// Call and Return are when the client sent the request and received the response, on
	// one monotonic clock (see RegisterHistory.Now). Return is ignored when Unknown.
	Call, Return int64
}

func (op RegisterOp) String() string {
	var s string
	switch op.Kind {
	case RegRead:
		if op.Found {
			s = fmt.Sprintf("read(%s) -> %d", op.Key, op.Value)
		} else {
			s = fmt.Sprintf("read(%s) -> absent", op.Key)
		}
	case RegWrite:
		s = fmt.Sprintf("write(%s, %d)", op.Key, op.Value)
	case RegCAS:
		s = fmt.Sprintf("cas(%s, %d -> %d) -> %v", op.Key, op.Expect, op.Value, op.OK)
	default:
		s = op.Kind.String()
	}
	if op.Unknown {
		s += " (unknown outcome)"
	}
	return fmt.Sprintf("client %d [%d, %d] %s", op.Client, op.Call, op.Return, s)
}

// RegisterHistory collects register operations from concurrent clients with a shared
// monotonic clock. The zero value is not usable; use NewRegisterHistory.
type RegisterHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []RegisterOp
}

// NewRegisterHistory starts a history whose clock reads zero now.
func NewRegisterHistory() *RegisterHistory { return &RegisterHistory{start: time.Now()} }

// Now is the history's clock: monotonic nanoseconds since NewRegisterHistory. Take Call before
// sending a request and Return after its response arrives.
func (h *RegisterHistory) Now() int64 { return int64(time.Since(h.start)) }

// Add appends a completed (or unknown-outcome) operation.
func (h *RegisterHistory) Add(op RegisterOp) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// Ops returns a copy of the operations recorded so far.
func (h *RegisterHistory) Ops() []RegisterOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]RegisterOp(nil), h.ops...)
}

// regState is the model's state: the register's value, or absent.
type regState struct {
	present bool
	v       int64
}

// RegisterModel is the porcupine model of a set of independent registers, partitioned by key
// (a history is linearizable iff each key's sub-history is). Inputs and outputs are both the
// RegisterOp.
var RegisterModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(RegisterOp).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return regState{} },
	Step: func(state, input, _ interface{}) (bool, interface{}) {
		s := state.(regState)
		op := input.(RegisterOp)
		switch op.Kind {
		case RegRead:
			if op.Found {
				return s.present && s.v == op.Value, s
			}
			return !s.present, s
		case RegWrite:
			return true, regState{present: true, v: op.Value}
		case RegCAS:
			matches := s.present && s.v == op.Expect
			if op.Unknown {
				// Its result was never seen: applied if it matched, a no-op otherwise.
				if matches {
					return true, regState{present: true, v: op.Value}
				}
				return true, s
			}
			if op.OK != matches {
				return false, s
			}
			if matches {
				return true, regState{present: true, v: op.Value}
			}
			return true, s
		}
		return false, s
	},
	Equal: func(a, b interface{}) bool { return a.(regState) == b.(regState) },
	DescribeOperation: func(input, _ interface{}) string {
		op := input.(RegisterOp)
		return strings.TrimPrefix(op.String(), fmt.Sprintf("client %d [%d, %d] ", op.Client, op.Call, op.Return))
	},
	DescribeState: func(state interface{}) string {
		s := state.(regState)
		if !s.present {
			return "absent"
		}
		return fmt.Sprint(s.v)
	},
}

// RegisterInfo explains a CheckRegister result.
type RegisterInfo struct {
	Result porcupine.CheckResult // Ok, Illegal, or Unknown when the timeout expired
	Ops    int                   // operations checked (unknown reads dropped)
	// Illegal lists the keys whose sub-history is not linearizable, and Longest, for the first
	// of them, the longest prefix of operations porcupine could linearize: the operation after
	// it is where the history stops making sense.
	Illegal []string
	Longest []RegisterOp

	lin porcupine.LinearizationInfo
}

func (i RegisterInfo) String() string {
	if i.Result != porcupine.Illegal {
		return fmt.Sprintf("%s: %d operations", i.Result, i.Ops)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "not linearizable: keys %v; longest linearizable prefix of %q:", i.Illegal, i.Illegal[0])
	for _, op := range i.Longest {
		b.WriteString("\n  ")
		b.WriteString(op.String())
	}
	return b.String()
}

// Visualize writes porcupine's interactive HTML view of the history and its partial
// linearizations, for attaching to a failed test's artifacts.
func (i RegisterInfo) Visualize(w io.Writer) error {
	return porcupine.Visualize(RegisterModel, i.lin, w)
}

// CheckRegister checks a register history for linearizability, with no time limit.
func CheckRegister(history []RegisterOp) (bool, RegisterInfo) {
	return CheckRegisterTimeout(history, 0)
}

// CheckRegisterTimeout is CheckRegister bounded by timeout (0: none). On timeout the result
// is porcupine.Unknown and ok is true: no violation was found.
func CheckRegisterTimeout(history []RegisterOp, timeout time.Duration) (bool, RegisterInfo) {
	ops := make([]porcupine.Operation, 0, len(history))
	for _, op := range history {
		if op.Unknown && op.Kind == RegRead {
			continue
		}
		ret := op.Return
		if op.Unknown {
			// Porcupine's encoding of an operation that may or may not have happened: it
			// never returns, so it can be linearized anywhere after its call, including after
			// every other operation, where it affects nothing.
			ret = math.MaxInt64
		}
		ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: op, Output: op, Call: op.Call, Return: ret})
	}
	res, lin := porcupine.CheckOperationsVerbose(RegisterModel, ops, timeout)
	info := RegisterInfo{Result: res, Ops: len(ops), lin: lin}
	if res == porcupine.Illegal {
		// A partition is illegal exactly when none of its partial linearizations is complete.
		parts := RegisterModel.Partition(ops)
		partial := lin.PartialLinearizationsOperations()
		for pi, part := range parts {
			if pi >= len(partial) {
				break
			}
			var longest []porcupine.Operation
			for _, l := range partial[pi] {
				if len(l) > len(longest) {
					longest = l
				}
			}
			if len(longest) == len(part) {
				continue
			}
			info.Illegal = append(info.Illegal, part[0].Input.(RegisterOp).Key)
			if len(info.Illegal) == 1 {
				for _, o := range longest {
					info.Longest = append(info.Longest, o.Input.(RegisterOp))
				}
			}
		}
	}
	return res != porcupine.Illegal, info
}
