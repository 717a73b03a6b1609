package testenv

import "syscall"

// childAttr makes a child process get SIGKILL when the test binary dies.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
