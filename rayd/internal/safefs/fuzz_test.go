package safefs

import (
	"maps"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "/", "x", "../x", "/proc/1", "/home/user/./a//b", "a\x00b", "/etc", "/etcx/..", "/run/rayd/x", "....", "/./proc"} {
		f.Add(s, "/home/user")
	}
	f.Add("x", "")
	f.Add("y", "/etc")
	f.Add("z", "/home/../etc")
	deny, _ := normalizeDeny(append(DefaultDeny, "/run/rayd"))
	f.Fuzz(func(t *testing.T, p, home string) {
		got, err := resolvePath(deny, home, p)
		if err != nil {
			if _, ok := err.(*PathError); !ok {
				t.Fatalf("error %T is not a *PathError", err)
			}
			return
		}
		if !strings.HasPrefix(got, "/") || path.Clean(got) != got || len(got) > MaxPathLen || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("accepted %q -> %q: not absolute and clean", p, got)
		}
		for _, c := range strings.Split(got, "/") {
			if c == ".." {
				t.Fatalf("accepted %q -> %q: contains ..", p, got)
			}
		}
		if strings.Contains(p, "..") && strings.Contains("/"+p+"/", "/../") {
			t.Fatalf("accepted %q with a .. component", p)
		}
		for _, d := range deny {
			if got == d || strings.HasPrefix(got, d+"/") {
				t.Fatalf("accepted %q -> %q under denied %q", p, got, d)
			}
		}
	})
}

// fakeWalker is an in-memory walker over nodes (canonical path -> node)
// that fails the test when followPath opens anything denied or misuses it.
type fakeWalker struct {
	t      *testing.T
	deny   []string
	nodes  map[string]fakeNode
	cur    string
	cand   string
	opens  int
	trace  []string
	denied bool
}

type fakeNode struct {
	kind   nodeKind
	target string
}

func (w *fakeWalker) open(name string, last bool) (nodeKind, string, error) {
	w.cand = ""
	w.opens++
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		w.t.Fatalf("open(%q): not a plain name", name)
	}
	p := path.Join(w.cur, name)
	w.trace = append(w.trace, p)
	if isDenied(w.deny, p) {
		w.t.Fatalf("opened denied %q (trace %q)", p, w.trace)
	}
	n, ok := w.nodes[p]
	if !ok {
		return 0, "", perr("read", "not_found", syscall.ENOENT)
	}
	if n.kind != nodeLink {
		w.cand = p
	}
	return n.kind, n.target, nil
}

func (w *fakeWalker) enter() error {
	if w.cand == "" || w.nodes[w.cand].kind != nodeDir {
		w.t.Fatalf("enter on %q", w.cand)
	}
	w.cur, w.cand = w.cand, ""
	return nil
}

func (w *fakeWalker) up() error {
	if w.cur == "/" {
		w.t.Fatal("up at /")
	}
	w.cur, w.cand = path.Dir(w.cur), ""
	return nil
}

func (w *fakeWalker) root() error {
	w.cur, w.cand = "/", ""
	return nil
}

// FuzzFollowPath drives followPath over a small tree with fuzzed link
// targets ("link=target" lines, links placed in existing directories) and
// a fuzzed request path. It checks that nothing denied is ever opened, the
// result is a clean absolute path that is not denied and is what the
// walker holds, at most MaxSymlinks links are followed, and every error is
// a *PathError.
func FuzzFollowPath(f *testing.F) {
	f.Add("l", "l=/proc/self/environ")
	f.Add("/etc/os-release", "/etc/os-release=../usr/lib/os-release")
	f.Add("c/x", "c=d\nd=/home/u/d/../..\n")
	f.Add("a", "a=b\nb=a")
	f.Add("l/token", "l=../../run/rayd")
	f.Add("l", "l=../../../../../proc")
	f.Add("l/", "l=.")
	f.Add("l/self/fd/0", "l=/proc")
	f.Add("d/l", "d/l=../../../run/./rayd/token")
	f.Add("x", "x=")
	deny, _ := normalizeDeny(append(slices.Clone(DefaultDeny), "/run/rayd"))
	base := map[string]fakeNode{
		"/": {kind: nodeDir}, "/home": {kind: nodeDir}, "/home/u": {kind: nodeDir}, "/home/u/d": {kind: nodeDir},
		"/home/u/d/f": {kind: nodeOther}, "/etc": {kind: nodeDir}, "/usr": {kind: nodeDir}, "/usr/lib": {kind: nodeDir},
		"/usr/lib/os-release": {kind: nodeOther}, "/proc": {kind: nodeDir}, "/proc/self": {kind: nodeDir},
		"/proc/self/environ": {kind: nodeOther}, "/run": {kind: nodeDir}, "/run/rayd": {kind: nodeDir},
		"/run/rayd/token": {kind: nodeOther}, "/dev": {kind: nodeDir}, "/dev/null": {kind: nodeOther},
	}
	f.Fuzz(func(t *testing.T, req, links string) {
		nodes := maps.Clone(base)
		for line := range strings.SplitSeq(links, "\n") {
			name, target, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			p, err := resolvePath(nil, "/home/u", name)
			if err != nil || p == "/" {
				continue
			}
			parent, ok := nodes[path.Dir(p)]
			if _, exists := nodes[p]; exists || !ok || parent.kind != nodeDir {
				continue
			}
			nodes[p] = fakeNode{kind: nodeLink, target: target}
		}
		c, err := resolvePath(deny, "/home/u", req)
		if err != nil {
			return
		}
		w := &fakeWalker{t: t, deny: deny, nodes: nodes, cur: "/"}
		got, atCand, err := followPath(w, "read", deny, splitPath(c))
		if err != nil {
			if _, ok := err.(*PathError); !ok {
				t.Fatalf("error %T is not a *PathError", err)
			}
			return
		}
		if !strings.HasPrefix(got, "/") || path.Clean(got) != got || len(got) > MaxPathLen || isDenied(deny, got) {
			t.Fatalf("%q -> %q: not clean, or denied", c, got)
		}
		nlinks := 0
		for _, p := range w.trace {
			if nodes[p].kind == nodeLink {
				nlinks++
			}
		}
		if nlinks > MaxSymlinks {
			t.Fatalf("%q: followed %d links", c, nlinks)
		}
		if atCand {
			if w.cand != got || nodes[got].kind == nodeLink {
				t.Fatalf("%q -> %q: candidate is %q", c, got, w.cand)
			}
		} else if w.cur != got || nodes[got].kind != nodeDir {
			t.Fatalf("%q -> %q: current directory is %q", c, got, w.cur)
		}
	})
}
