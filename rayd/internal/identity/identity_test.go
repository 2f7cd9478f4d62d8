package identity

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const testPasswd = `# comment line
root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
user:x:1000:1000:Default User:/home/user:/bin/bash
alice:x:1001:1001::/srv/alice:/bin/zsh
bob:x:1002:1002:::
lowuid:x:999:1000::/home/lowuid:/bin/sh
lowgid:x:1003:999::/home/lowgid:/bin/sh
highuid:x:65536:1000::/home/highuid:/bin/sh
highgid:x:1004:70000::/home/highgid:/bin/sh
wheel0:x:1005:1005::/home/wheel0:/bin/sh
gid0:x:1006:0::/home/gid0:/bin/sh
maxid:x:65535:65535::/home/maxid:/bin/sh
dup:x:1007:1007::/home/dup-first:/bin/sh
dup:x:0:0::/home/dup-second:/bin/sh
+nis::::::
broken:x:abc:1000::/home/broken:/bin/sh
short:x:1008:1008
crlf:x:1009:1009::/home/crlf:/bin/sh` + "\r" + `
`

const testGroup = `root:x:0:wheel0
daemon:x:1:
user:x:1000:
alice:x:1001:
dev:x:2000:alice,user,bob
ops:x:3000:,user,,
bob:x:1002:
again:x:2000:bob
wheel0:x:1005:
notmember:x:4000:alicex,xalice
`

func writeDB(t *testing.T, passwd, group string) *Resolver {
	t.Helper()
	dir := t.TempDir()
	pp := filepath.Join(dir, "passwd")
	gp := filepath.Join(dir, "group")
	if err := os.WriteFile(pp, []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gp, []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
	return &Resolver{PasswdPath: pp, GroupPath: gp}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name      string
		user      string
		allowRoot bool
		want      Identity
		reason    string // expected DeniedError reason; "" means success
	}{
		{name: "default user", user: "", want: Identity{Username: "user", UID: 1000, GID: 1000, Groups: []uint32{1000, 2000, 3000}, Home: "/home/user", Shell: "/bin/bash"}},
		{name: "explicit user", user: "user", want: Identity{Username: "user", UID: 1000, GID: 1000, Groups: []uint32{1000, 2000, 3000}, Home: "/home/user", Shell: "/bin/bash"}},
		{name: "custom home and shell", user: "alice", want: Identity{Username: "alice", UID: 1001, GID: 1001, Groups: []uint32{1001, 2000}, Home: "/srv/alice", Shell: "/bin/zsh"}},
		{name: "defaults for empty home and shell, duplicate gid groups merged", user: "bob", want: Identity{Username: "bob", UID: 1002, GID: 1002, Groups: []uint32{1002, 2000}, Home: "/home/bob", Shell: "/bin/sh"}},
		{name: "upper bound inclusive", user: "maxid", want: Identity{Username: "maxid", UID: 65535, GID: 65535, Groups: []uint32{65535}, Home: "/home/maxid", Shell: "/bin/sh"}},
		{name: "first duplicate wins", user: "dup", want: Identity{Username: "dup", UID: 1007, GID: 1007, Groups: []uint32{1007}, Home: "/home/dup-first", Shell: "/bin/sh"}},
		{name: "crlf line endings", user: "crlf", want: Identity{Username: "crlf", UID: 1009, GID: 1009, Groups: []uint32{1009}, Home: "/home/crlf", Shell: "/bin/sh"}},
		{name: "root allowed", user: "root", allowRoot: true, want: Identity{Username: "root", UID: 0, GID: 0, Groups: []uint32{0}, Home: "/root", Shell: "/bin/bash"}},
		{name: "root refused", user: "root", reason: ReasonRootNotAllowed},
		{name: "unknown", user: "mallory", reason: ReasonUnknownUser},
		{name: "unknown even with AllowRoot", user: "mallory", allowRoot: true, reason: ReasonUnknownUser},
		{name: "system account", user: "daemon", reason: ReasonUIDOutOfRange},
		{name: "uid below range", user: "lowuid", reason: ReasonUIDOutOfRange},
		{name: "uid above range", user: "highuid", reason: ReasonUIDOutOfRange},
		{name: "gid below range", user: "lowgid", reason: ReasonGIDOutOfRange},
		{name: "gid above range", user: "highgid", reason: ReasonGIDOutOfRange},
		{name: "primary gid 0", user: "gid0", reason: ReasonInGroup0},
		{name: "supplementary group 0", user: "wheel0", reason: ReasonInGroup0},
		{name: "malformed uid line skipped", user: "broken", reason: ReasonUnknownUser},
		{name: "short line skipped", user: "short", reason: ReasonUnknownUser},
		{name: "nis entry is not an account", user: "+nis", reason: ReasonUnknownUser},
		{name: "name with colon", user: "user:x", reason: ReasonUnknownUser},
		{name: "name with newline", user: "user\nroot", reason: ReasonUnknownUser},
		{name: "overlong name", user: strings.Repeat("a", 300), reason: ReasonUnknownUser},
	}
	r := writeDB(t, testPasswd, testGroup)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rr := *r
			rr.AllowRoot = tc.allowRoot
			got, err := rr.Resolve(tc.user)
			if tc.reason != "" {
				var de *DeniedError
				if !errors.As(err, &de) {
					t.Fatalf("Resolve(%q) = %+v, %v; want DeniedError %s", tc.user, got, err, tc.reason)
				}
				if de.Reason != tc.reason {
					t.Fatalf("reason = %q, want %q", de.Reason, tc.reason)
				}
				wantName := tc.user
				if wantName == "" {
					wantName = "user"
				}
				if de.Username != wantName {
					t.Fatalf("DeniedError.Username = %q, want %q", de.Username, wantName)
				}
				if got.Username != "" || got.UID != 0 || got.Groups != nil {
					t.Fatalf("denied call returned identity %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tc.user, err)
			}
			if got.Username != tc.want.Username || got.UID != tc.want.UID || got.GID != tc.want.GID ||
				!slices.Equal(got.Groups, tc.want.Groups) || got.Home != tc.want.Home || got.Shell != tc.want.Shell {
				t.Fatalf("Resolve(%q) = %+v, want %+v", tc.user, got, tc.want)
			}
		})
	}
}

func TestResolveUID(t *testing.T) {
	r := writeDB(t, testPasswd, testGroup)
	tests := []struct {
		uid       uint32
		allowRoot bool
		wantName  string
		reason    string
	}{
		{uid: 1000, wantName: "user"},
		{uid: 1001, wantName: "alice"},
		{uid: 1007, wantName: "dup"},
		{uid: 0, allowRoot: true, wantName: "root"},
		{uid: 0, reason: ReasonRootNotAllowed},
		{uid: 1, reason: ReasonUIDOutOfRange},
		{uid: 1005, reason: ReasonInGroup0},
		{uid: 1006, reason: ReasonInGroup0},
		{uid: 4242, reason: ReasonUnknownUser},
	}
	for _, tc := range tests {
		rr := *r
		rr.AllowRoot = tc.allowRoot
		id, err := rr.ResolveUID(tc.uid)
		if tc.reason != "" {
			var de *DeniedError
			if !errors.As(err, &de) || de.Reason != tc.reason {
				t.Errorf("ResolveUID(%d) = %+v, %v; want reason %s", tc.uid, id, err, tc.reason)
			}
			continue
		}
		if err != nil || id.Username != tc.wantName || id.UID != tc.uid {
			t.Errorf("ResolveUID(%d) = %+v, %v; want %s", tc.uid, id, err, tc.wantName)
		}
	}
	want, _ := r.Resolve("user")
	got, _ := r.ResolveUID(1000)
	if got.Username != want.Username || !slices.Equal(got.Groups, want.Groups) || got.Home != want.Home {
		t.Fatalf("ResolveUID(1000) = %+v, Resolve(user) = %+v", got, want)
	}
	var de *DeniedError
	if _, err := r.ResolveUID(4242); !errors.As(err, &de) || de.Username != "4242" {
		t.Fatalf("unknown uid: %v", err)
	}
}

func TestDeniedErrorMessage(t *testing.T) {
	r := writeDB(t, testPasswd, testGroup)
	_, err := r.Resolve("daemon")
	msg := err.Error()
	if !strings.Contains(msg, `"daemon"`) {
		t.Fatalf("message %q does not name the user", msg)
	}
	for _, leak := range []string{"1", "uid", "range", "passwd", r.PasswdPath} {
		if strings.Contains(msg, leak) {
			t.Fatalf("message %q leaks %q", msg, leak)
		}
	}
}

func TestRootWithoutPasswdFile(t *testing.T) {
	r := &Resolver{PasswdPath: filepath.Join(t.TempDir(), "missing"), AllowRoot: true}
	got, err := r.Resolve("root")
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != 0 || got.GID != 0 || got.Home != "/root" || got.Shell != "/bin/sh" {
		t.Fatalf("got %+v", got)
	}
}

func TestRootIDsIgnoreFile(t *testing.T) {
	r := writeDB(t, "root:x:1234:1234::/rootish:/bin/ash\n", "")
	r.AllowRoot = true
	got, err := r.Resolve("root")
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != 0 || got.GID != 0 || got.Home != "/rootish" || got.Shell != "/bin/ash" {
		t.Fatalf("got %+v", got)
	}
}

func TestMissingFiles(t *testing.T) {
	dir := t.TempDir()
	r := &Resolver{PasswdPath: filepath.Join(dir, "nope"), GroupPath: filepath.Join(dir, "nope")}
	if _, err := r.Resolve("user"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing passwd: err = %v", err)
	}
	r = writeDB(t, testPasswd, "")
	r.GroupPath = filepath.Join(dir, "nope")
	if _, err := r.Resolve("user"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing group: err = %v", err)
	}
}

func TestBounds(t *testing.T) {
	t.Run("file too large", func(t *testing.T) {
		big := testPasswd + strings.Repeat("#"+strings.Repeat("x", 1000)+"\n", MaxFileSize/1000)
		r := writeDB(t, big, testGroup)
		if _, err := r.Resolve("user"); !errors.Is(err, errFileTooLarge) {
			t.Fatalf("err = %v, want errFileTooLarge", err)
		}
	})
	t.Run("group file too large", func(t *testing.T) {
		big := testGroup + strings.Repeat("#"+strings.Repeat("x", 1000)+"\n", MaxFileSize/1000)
		r := writeDB(t, testPasswd, big)
		if _, err := r.Resolve("user"); !errors.Is(err, errFileTooLarge) {
			t.Fatalf("err = %v, want errFileTooLarge", err)
		}
	})
	t.Run("line too long", func(t *testing.T) {
		long := testPasswd + "x:x:1100:1100:" + strings.Repeat("g", MaxLineLength) + ":/h:/bin/sh\n"
		r := writeDB(t, long, testGroup)
		if _, err := r.Resolve("user"); !errors.Is(err, errLineTooLong) {
			t.Fatalf("err = %v, want errLineTooLong", err)
		}
	})
	t.Run("longest line accepted", func(t *testing.T) {
		prefix := "big:x:1100:1100:"
		suffix := ":/h:/bin/sh"
		line := prefix + strings.Repeat("g", MaxLineLength-len(prefix)-len(suffix)) + suffix
		r := writeDB(t, line+"\n", "")
		id, err := r.Resolve("big")
		if err != nil || id.UID != 1100 {
			t.Fatalf("Resolve = %+v, %v", id, err)
		}
	})
}

func TestParseID(t *testing.T) {
	for in, want := range map[string]bool{
		"0": true, "1000": true, "4294967295": true, "4294967296": false,
		"": false, "-1": false, "+1": false, " 1": false, "1 ": false, "0x10": false, "1_000": false,
	} {
		if _, ok := parseID(in); ok != want {
			t.Errorf("parseID(%q) ok = %v, want %v", in, ok, want)
		}
	}
}
