//go:build !linux

package testenv

import "syscall"

// childAttr: elsewhere the test's cleanup is what stops a child process.
func childAttr() *syscall.SysProcAttr { return nil }
