package registrytest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// RunWithLeakCheck runs the tests of m and then fails the package when a
// goroutine with a localvm function on its stack is still alive five
// seconds later. Use it from TestMain: os.Exit(registrytest.RunWithLeakCheck(m)).
func RunWithLeakCheck(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		leaked := leakedGoroutines()
		if len(leaked) == 0 {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "goroutines leaked by the tests:\n\n%s\n", strings.Join(leaked, "\n\n"))
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func leakedGoroutines() []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // this goroutine
			continue
		}
		if strings.Contains(g, "github.com/rayito-dev/rayito/localvm") && !strings.Contains(g, "_test.go") {
			out = append(out, g)
		}
	}
	return out
}
