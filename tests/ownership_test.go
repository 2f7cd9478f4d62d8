package tests

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/localvm"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// scopeTraces lists what the machine holds for a platform scope: its
// cgroup directories, its host-side veths and its nftables table's rules
// (when the nft tool is installed).
func scopeTraces(t *testing.T, scope string) (cgroups, veths []string, rules string) {
	t.Helper()
	parent := "rayito-localvm-" + scope
	roots, _ := filepath.Glob("/sys/fs/cgroup/" + parent)
	more, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent)
	for _, root := range append(roots, more...) {
		es, _ := os.ReadDir(root)
		for _, e := range es {
			if e.IsDir() {
				cgroups = append(cgroups, filepath.Join(root, e.Name()))
			}
		}
	}
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		if strings.HasPrefix(l.Name(), "rs"+scope+"-") {
			veths = append(veths, l.Name())
		}
	}
	if nft, err := exec.LookPath("nft"); err == nil {
		out, _ := exec.Command(nft, "list", "table", "inet", "rayito_localvm_"+scope).CombinedOutput()
		rules = string(out)
	}
	return cgroups, veths, rules
}

// TestPlatformsOwnTheirStateDirs runs two platforms with different state
// dirs, a sandbox on each, and restarts each in turn (close leaving the
// sandboxes running, reopen): the other's sandbox keeps running and
// answering, and nothing of it is removed; each restarted platform
// re-adopts its own.
func TestPlatformsOwnTheirStateDirs(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: scopes only name machine-wide cgroups, veths and nftables rules in isolated mode")
	}
	ctx := context.Background()
	dirA, dirB := t.TempDir(), t.TempDir()
	pa := startPlatform(t, dirA)
	pb := startPlatform(t, dirB)
	if !pa.srv.Privileged() {
		t.Skip("needs root with namespaces: the platform runs unprivileged here")
	}
	scopeA, scopeB := pa.srv.Scope(), pb.srv.Scope()
	if scopeA == scopeB {
		t.Fatalf("two state dirs share scope %q", scopeA)
	}
	sa, sb := pa.create(ctx), pb.create(ctx)
	type sbx struct {
		id, token, scope string
		dir              string
	}
	boxes := []sbx{{sa.ID(), sa.AccessToken(), scopeA, dirA}, {sb.ID(), sb.AccessToken(), scopeB, dirB}}
	plats := []*platform{pa, pb}
	defer func() {
		for _, p := range plats {
			p.stop(true)
		}
	}()

	check := func(b sbx, p *platform, what string) {
		t.Helper()
		s, err := rayito.Connect(ctx, b.id, append(p.opts(), rayito.WithAccessToken(b.token))...)
		if err != nil {
			t.Fatalf("%s: connect %s: %v", what, b.id, err)
		}
		res, err := s.Commands.Run(ctx, "echo alive; sleep 0.1 & wait")
		if err != nil || res.Stdout != "alive\n" {
			t.Fatalf("%s: exec in %s: %+v %v", what, b.id, res, err)
		}
	}
	traces := func(b sbx) string {
		cg, veths, rules := scopeTraces(t, b.scope)
		n := 0
		for _, c := range cg {
			if filepath.Base(c) == b.id {
				n++
			}
		}
		s := "cgroups=" + strconv.Itoa(n) + " veths=" + strings.Join(veths, ",")
		if rules != "" {
			s += " rules=" + strconv.Itoa(strings.Count(rules, b.id))
		}
		return s
	}
	before := []string{traces(boxes[0]), traces(boxes[1])}
	for i, b := range before {
		if strings.Contains(b, "cgroups=0") || strings.Contains(b, "veths= ") || strings.HasSuffix(strings.Fields(b)[1], "=") {
			t.Fatalf("sandbox %d: traces not found: %s", i, b)
		}
	}

	for i := range plats {
		other := 1 - i
		dir := boxes[i].dir
		plats[i].stop(false)
		plats[i] = startPlatform(t, dir)
		if got := plats[i].srv.Scope(); got != boxes[i].scope {
			t.Fatalf("restarted platform %d has scope %q, had %q", i, got, boxes[i].scope)
		}
		// A second platform on the same state dir is refused, clearly.
		if _, err := localvm.New(ctx, localvm.Options{StateDir: dir}); !errors.Is(err, localvm.ErrInUse) ||
			!strings.Contains(err.Error(), "state dir "+dir+" (pid "+strconv.Itoa(os.Getpid())+")") {
			t.Fatalf("second platform on %s: %v", dir, err)
		}
		if got := traces(boxes[other]); got != before[other] {
			t.Fatalf("restarting platform %d touched the other's sandbox: %s, was %s", i, got, before[other])
		}
		check(boxes[other], plats[other], "other platform's sandbox after a restart")
		check(boxes[i], plats[i], "re-adopted sandbox")
		if got := traces(boxes[i]); got != before[i] {
			t.Fatalf("platform %d's own sandbox after its restart: %s, was %s", i, got, before[i])
		}
	}
}
