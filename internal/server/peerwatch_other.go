//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package server

import "syscall"

// peerClosed cannot peek on this platform: a client disconnect is noticed when the reply is
// written, as before.
func peerClosed(syscall.RawConn) bool { return false }
