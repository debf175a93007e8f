// Package testenv holds what the tests and benchmarks of several packages
// need from the machine they run on.
package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// CPUTime is the user and system CPU time the process has used: on a
// machine whose cores are shared, a steadier figure than the wall time.
func CPUTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// freePorts are the ports FreePort has handed out in this process, and
// the files that reserve them against other test processes.
var freePorts struct {
	sync.Mutex
	used  map[int]bool
	locks []*os.File
}

// FreePort returns a port of 127.0.0.1 that is free now, below the
// kernel's ephemeral range (32768 and up on Linux), and not handed out
// before in this process nor held by another test process. A server
// restarted on the same ports must not find one taken meanwhile by another
// test's outgoing connection or port-0 listener, as a port the kernel
// picked could be, nor by another package's test (go test runs packages in
// parallel processes): each port handed out is reserved by a lock on a
// file under the temporary directory, which the process holds until it
// exits.
func FreePort(tb testing.TB) int {
	tb.Helper()
	freePorts.Lock()
	defer freePorts.Unlock()
	if freePorts.used == nil {
		freePorts.used = map[int]bool{}
	}
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if freePorts.used[port] {
			continue
		}
		if !reservePort(port) {
			continue // another test process has it
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			l.Close()
			return port
		}
	}
	tb.Fatal("no free port below the ephemeral range")
	return 0
}

// reservePort takes the lock of port's file, which no other process holds
// then; it reports false if another has it. The port is marked used in
// this process either way (freePorts is locked).
func reservePort(port int) bool {
	freePorts.used[port] = true
	dir := os.TempDir() + "/cairn-test-ports"
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true // no reservation: the listen check alone
	}
	f, err := os.OpenFile(fmt.Sprintf("%s/%d", dir, port), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	freePorts.locks = append(freePorts.locks, f) // held until the process exits
	return true
}

// Seed returns the seed of a randomized test and logs it: the value of
// CAIRN_TEST_SEED when set (to rerun a failure), else one drawn from the
// clock.
func Seed(tb testing.TB) uint64 {
	tb.Helper()
	if s := os.Getenv("CAIRN_TEST_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			tb.Fatalf("CAIRN_TEST_SEED=%q is not a seed: %v", s, err)
		}
		tb.Logf("seed %d (from CAIRN_TEST_SEED)", seed)
		return seed
	}
	seed := uint64(time.Now().UnixNano())
	tb.Logf("seed %d (rerun with CAIRN_TEST_SEED=%d)", seed, seed)
	return seed
}
