package git

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestGitCredsChecks(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  Option
		want string
	}{
		{"password without username", WithCredentials("", "hunter2"), "username"},
		{"username without password", WithCredentials("u", ""), "password"},
		{"newline in password", WithCredentials("u", "a\nb"), "line break"},
		{"NUL in username", WithCredentials("u\x00", "p"), "line break"},
	} {
		_, err := checkCreds("push", gitOpts([]Option{c.opt}))
		if !errors.Is(err, rayito.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "a\nb")) {
			t.Errorf("%s: the error holds the password", c.name)
		}
	}
	if cr, err := checkCreds("push", gitOpts(nil)); cr != nil || err != nil {
		t.Fatal("no credentials")
	}
	cr, err := checkCreds("push", gitOpts([]Option{WithCredentials("u", "s3cr3t")}))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"ssh://git@h/r", "git@h:r.git", "file:///tmp/r", "https://u:p@h/r", "https://x@h/r", "ext::sh -c x", "/tmp/repo", ""} {
		if err := cr.bindRemote("push", bad); !errors.Is(err, rayito.ErrInvalidArgument) || (bad != "" && strings.Contains(err.Error(), bad)) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if err := cr.bindRemote("push", "https://git.example:8443/o/r.git"); err != nil || cr.protocol != "https" || cr.host != "git.example:8443" {
		t.Fatalf("%v %+v", err, cr)
	}
	// Pinned to one host: another host, port or protocol is refused.
	pinned, err := checkCreds("push", gitOpts([]Option{WithCredentials("u", "s3cr3t"), WithCredentialHost("https", "git.example")}))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"https://evil.example/r", "https://git.example:444/r", "http://git.example/r", "https://git.example.evil/r"} {
		if err := pinned.bindRemote("push", bad); !errors.Is(err, rayito.ErrInvalidArgument) {
			t.Errorf("pinned %q: %v", bad, err)
		}
	}
	if err := pinned.bindRemote("push", "https://GIT.example/o/r"); err != nil {
		t.Fatal(err)
	}
	anyProto, _ := checkCreds("push", gitOpts([]Option{WithCredentials("u", "s3cr3t"), WithCredentialHost("", "git.example")}))
	if err := anyProto.bindRemote("push", "http://git.example/r"); err != nil {
		t.Fatal(err)
	}
}

func TestGitRedact(t *testing.T) {
	cr := &gitCreds{username: "bot", password: "p@ss/w rd+"}
	in := "x p@ss/w rd+ p%40ss%2Fw+rd%2B p@ss%2Fw%20rd+ bot:p%40ss%2Fw%20rd+ Ym90OnBAc3Mvdy" + " " + "Ym90OnBAc3MvdyByZCs="
	out := cr.redact(in)
	for _, leak := range []string{"p@ss", "p%40ss", "Ym90OnBAc3MvdyByZCs="} {
		if strings.Contains(out, leak) {
			t.Errorf("%q left in %q", leak, out)
		}
	}
	var none *gitCreds
	if none.redact("abc") != "abc" {
		t.Fatal("nil creds")
	}
}

func TestGitClassify(t *testing.T) {
	for stderr, want := range map[string]error{
		"fatal: Authentication failed for 'http://h/r/'":                               ErrAuth,
		"fatal: could not read Username for 'http://h': terminal prompts disabled":     ErrAuth,
		"fatal: unable to access 'http://h/r/': The requested URL returned error: 403": ErrAuth,
		" ! [rejected]        main -> main (fetch first)":                              ErrConflict,
		"CONFLICT (content): Merge conflict in a.txt":                                  ErrConflict,
		"fatal: The current branch feature has no upstream branch.":                    ErrUpstream,
		"There is no tracking information for the current branch.":                     ErrUpstream,
		"fatal: not a git repository (or any of the parent directories): .git":         ErrNotRepository,
		"Author identity unknown\n\n*** Please tell me who you are.":                   ErrIdentity,
		"fatal: unable to auto-detect email address (got 'user@h.(none)')":             ErrIdentity,
		"fatal: repository 'http://h/nope/' not found":                                 nil,
	} {
		if got := classifyGit(stderr); got != want {
			t.Errorf("%q: %v, want %v", stderr, got, want)
		}
	}
	e := &Error{Op: "push", Kind: ErrAuth, ExitCode: 128, Status: rayito.StatusExited}
	if !errors.Is(e, ErrFailed) || !errors.Is(e, ErrAuth) || !errors.Is(e, rayito.ErrUnauthenticated) || errors.Is(e, ErrConflict) {
		t.Fatal("auth error matching")
	}
	if e.Error() != "rayito: git push: authentication failed (exit code 128)" {
		t.Fatal(e.Error())
	}
	to := &Error{Op: "clone", Status: rayito.StatusTimeout, ExitCode: 143}
	if !errors.Is(to, rayito.ErrTimeout) || to.Error() != "rayito: git clone: timed out" {
		t.Fatal(to.Error())
	}
}

func TestURLHoldsCredentials(t *testing.T) {
	for raw, want := range map[string]bool{
		"https://u:p@h/r": true, "https://ghp_token@h/r": true, "HTTP://u@h/r": true, "ssh://git@h/r": false,
		"ssh://git:pw@h/r": true, "https://h/r": false, "git@h:r.git": false, "/tmp/r": false, "%zz": false,
	} {
		if got := urlHoldsCredentials(raw); got != want {
			t.Errorf("%q: %v", raw, got)
		}
	}
}

func TestGitArgChecks(t *testing.T) {
	for _, c := range []struct{ what, name string }{{"b", "-x"}, {"b", ""}, {"b", "a\nb"}, {"b", "a\x7fb"}} {
		if err := checkRef("push", c.what, c.name); !errors.Is(err, rayito.ErrInvalidArgument) {
			t.Errorf("%q: %v", c.name, err)
		}
	}
	if err := checkRef("push", "b", "feature/x"); err != nil {
		t.Fatal(err)
	}
	if err := checkPaths("add", []string{"a", ""}); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, _, err := configScope("config", "--global", gitOpts(nil)); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, _, err := configScope("config", "user.name", gitOpts([]Option{WithConfigScope(ScopeLocal)})); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if d, f, err := configScope("config", "user.name", gitOpts([]Option{WithConfigScope(ScopeLocal), WithRepository("r")})); err != nil || d != "r" || f != "--local" {
		t.Fatal(d, f, err)
	}
}

const statusSample = "# branch.oid 1234\x00# branch.head main\x00# branch.upstream origin/main\x00# branch.ab +2 -1\x00" +
	"1 M. N... 100644 100644 100644 aaa bbb staged.txt\x00" +
	"1 .M N... 100644 100644 100644 aaa bbb with space.txt\x00" +
	"1 AM N... 000000 100644 100644 000 bbb both.txt\x00" +
	"2 R. N... 100644 100644 100644 aaa bbb R100 new name.txt\x00old name.txt\x00" +
	"u UU N... 100644 100644 100644 100644 a b c conflict.txt\x00" +
	"? new\nline.txt\x00"

func TestParseGitStatus(t *testing.T) {
	st, err := parseGitStatus(statusSample)
	if err != nil {
		t.Fatal(err)
	}
	if st.Branch != "main" || st.Upstream != "origin/main" || st.Ahead != 2 || st.Behind != 1 || st.Detached {
		t.Fatalf("%+v", st)
	}
	if len(st.Staged) != 3 || st.Staged[0] != (FileChange{Path: "staged.txt", Change: Modified}) ||
		st.Staged[2] != (FileChange{Path: "new name.txt", Change: Renamed, From: "old name.txt"}) {
		t.Fatalf("staged %+v", st.Staged)
	}
	if len(st.Unstaged) != 2 || st.Unstaged[0].Path != "with space.txt" || st.Unstaged[1].Path != "both.txt" {
		t.Fatalf("unstaged %+v", st.Unstaged)
	}
	if len(st.Conflicted) != 1 || st.Conflicted[0] != "conflict.txt" || len(st.Untracked) != 1 || st.Untracked[0] != "new\nline.txt" || st.Clean() {
		t.Fatalf("%+v", st)
	}
	d, err := parseGitStatus("# branch.oid (initial)\x00# branch.head (detached)\x00")
	if err != nil || !d.Detached || d.Branch != "" || !d.Clean() {
		t.Fatalf("%+v %v", d, err)
	}
	for _, bad := range []string{"1 M.\x00", "2 R. N... 1 1 1 a b R100 x\x00", "# branch.ab +x -1\x00", "z\x00", "?\x00"} {
		if _, err := parseGitStatus(bad); !errors.Is(err, ErrFailed) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestParseGitBranches(t *testing.T) {
	b, err := parseGitBranches(" \x00feature/x\n*\x00main\n")
	if err != nil || len(b.Branches) != 2 || b.Current != "main" {
		t.Fatalf("%+v %v", b, err)
	}
	if _, err := parseGitBranches("main\n"); !errors.Is(err, ErrFailed) {
		t.Fatal(err)
	}
}

func FuzzParseGitStatus(f *testing.F) {
	f.Add(statusSample)
	f.Add("2 R. N... 100644 100644 100644 aaa bbb R100 x")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := parseGitStatus(s)
		if err == nil && st == nil {
			t.Fatal("nil status")
		}
	})
}

func FuzzParseGitBranches(f *testing.F) {
	f.Add("*\x00main\n \x00dev\n")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := parseGitBranches(s)
		if err == nil && b == nil {
			t.Fatal("nil branches")
		}
	})
}

// TestGitCredentialHelper runs the reader and the helper the SDK gives git
// with this machine's sh and git: the credentials come from stdin, the
// helper answers only its protocol and host, and ignores store and erase.
func TestGitCredentialHelper(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: ", err)
	}
	home := t.TempDir()
	fill := func(request string) string {
		t.Helper()
		args := append([]string{"-c", credReader, "rayito-git"}, append(append([]string{}, hardening...), "credential", "fill")...)
		cmd := exec.Command("sh", args...)
		// The credentials, then git credential fill's own request: the
		// reader consumes exactly two lines.
		cmd.Stdin = strings.NewReader("bot\ns3cr3t pass\\n\n" + request)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=",
			"RAYITO_GIT_PROTOCOL=https", "RAYITO_GIT_HOST=git.example:8443"}
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if out := fill("protocol=https\nhost=git.example:8443\n\n"); !strings.Contains(out, "username=bot\npassword=s3cr3t pass\\n\n") {
		t.Fatalf("matching host: %q", out)
	}
	for _, req := range []string{"protocol=https\nhost=evil.example\n\n", "protocol=http\nhost=git.example:8443\n\n", "protocol=https\nhost=git.example\n\n"} {
		if out := fill(req); strings.Contains(out, "s3cr3t") {
			t.Fatalf("%q got the password: %q", req, out)
		}
	}
	// A configured helper and askpass never run.
	canary := filepath.Join(home, "ran")
	script := filepath.Join(home, "evil.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+canary+"\necho password=stolen\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[credential]\n\thelper = "+script+"\n[core]\n\taskPass = "+script+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fill("protocol=https\nhost=evil.example\n\n")
	fill("protocol=https\nhost=git.example:8443\n\n")
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("a configured helper or askpass ran")
	}
}
