package mongoerr

import (
	"errors"
	"fmt"
	"testing"
)

func TestNamesMatchMongoDB(t *testing.T) {
	for c, want := range map[Code]string{
		BadValue: "BadValue", TypeMismatch: "TypeMismatch", WriteConflict: "WriteConflict",
		DuplicateKey: "DuplicateKey", NotWritablePrimary: "NotWritablePrimary",
		CommandNotFound: "CommandNotFound", Location40324: "Location40324",
		BSONObjectTooLarge: "BSONObjectTooLarge", CannotIndexParallelArrays: "CannotIndexParallelArrays",
	} {
		if got := c.Name(); got != want {
			t.Errorf("%d: name %q, want %q", int32(c), got, want)
		}
	}
}

func TestCodesUnique(t *testing.T) {
	seen := map[Code]string{}
	for _, e := range codeTable {
		if prev, ok := seen[e.code]; ok {
			t.Errorf("code %d named both %s and %s", e.code, prev, e.name)
		}
		seen[e.code] = e.name
	}
}

func TestWrapKeepsCode(t *testing.T) {
	err := fmt.Errorf("insert: %w", New(DuplicateKey, "dup"))
	if CodeOf(err) != DuplicateKey || !Is(err, DuplicateKey) {
		t.Fatalf("code lost through wrapping: %v", CodeOf(err))
	}
	if !errors.Is(err, &Error{Code: DuplicateKey}) {
		t.Fatal("errors.Is by code failed")
	}
	if CodeOf(errors.New("plain")) != InternalError || CodeOf(nil) != OK {
		t.Fatal("uncoded errors must be InternalError, nil must be OK")
	}
}
