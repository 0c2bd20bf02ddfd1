package server

import (
	"net"
	"strconv"
	"testing"
	"time"
)

func hasIPv6(t *testing.T) bool {
	t.Helper()
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}

// 0.0.0.0 listens on IPv4 only, so it and :: (what --bind_ip_all --ipv6 binds) take the same
// port side by side.
func TestBindWildcardsPerFamily(t *testing.T) {
	if !hasIPv6(t) {
		t.Skip("no IPv6 on this machine")
	}
	cfg := mongodConfig(nil, nil)
	cfg.BindIPs = []string{"0.0.0.0"}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	port := strconv.Itoa(s.Port())
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 5*time.Second); err != nil {
		t.Errorf("IPv4: %v", err)
	} else {
		_ = c.Close()
	}
	if c, err := net.DialTimeout("tcp6", "[::1]:"+port, 5*time.Second); err == nil {
		_ = c.Close()
		t.Errorf("--bind_ip 0.0.0.0 also listens on IPv6")
	}
	_ = s.Close()

	cfg = mongodConfig(nil, nil)
	cfg.BindIPs = []string{"0.0.0.0", "::"}
	s, err = New(cfg)
	if err != nil {
		t.Fatalf("0.0.0.0 and :: together: %v", err)
	}
	s.Start()
	defer s.Close()
	port = strconv.Itoa(s.Port())
	for _, addr := range []string{"127.0.0.1:" + port, "[::1]:" + port} {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Errorf("%s: %v", addr, err)
			continue
		}
		_ = c.Close()
	}
}
