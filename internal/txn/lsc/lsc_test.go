package lsc

import (
	"testing"
	"time"

	"humongo/internal/mongoerr"
)

func TestExpiryAndLimits(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(30*time.Minute, 2, func() time.Time { return now })
	a, err := c.Start("")
	if err != nil || a.Key.UID != NoUserUID || a.Key.ID[6]>>4 != 4 {
		t.Fatalf("start: %+v %v", a, err)
	}
	b, _ := c.Start("")
	if _, err := c.Start(""); !mongoerr.Is(err, mongoerr.TooManyLogicalSessions) {
		t.Fatalf("third session: %v", err)
	}
	now = now.Add(20 * time.Minute)
	if err := c.Refresh([]Key{a.Key}, ""); err != nil {
		t.Fatal(err)
	}
	now = now.Add(15 * time.Minute) // b idle 35 min, a 15 min
	if c.Has(b.Key) || !c.Has(a.Key) || c.Len() != 1 {
		t.Fatalf("expiry: has a=%v b=%v len=%d", c.Has(a.Key), c.Has(b.Key), c.Len())
	}
	c.End([]Key{a.Key})
	if c.Len() != 0 {
		t.Fatal("end")
	}
}
