//go:build unix

package fs

import (
	"errors"
	"os"
	"syscall"
)

// flock takes (how = syscall.LOCK_SH or LOCK_EX) or releases (LOCK_UN) an advisory lock
// on an open directory. It waits for a conflicting lock, across processes too. A file
// system that has no flock (some network and FUSE mounts) gives no error and no lock.
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var lockErr error
	err = rc.Control(func(fd uintptr) {
		for {
			lockErr = syscall.Flock(int(fd), how)
			if !errors.Is(lockErr, syscall.EINTR) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	if errors.Is(lockErr, syscall.ENOTSUP) || errors.Is(lockErr, syscall.EOPNOTSUPP) || errors.Is(lockErr, syscall.ENOLCK) {
		return nil
	}
	return lockErr
}

const (
	lockShared    = syscall.LOCK_SH
	lockExclusive = syscall.LOCK_EX
	unlock        = syscall.LOCK_UN
)
