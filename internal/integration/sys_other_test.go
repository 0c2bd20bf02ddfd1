//go:build !linux

package integration

import "syscall"

// procAttr: no parent-death signal outside Linux; test cleanups still kill the server.
func procAttr() *syscall.SysProcAttr { return nil }
