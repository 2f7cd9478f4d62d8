package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/e2b"
	"github.com/rayito-dev/rayito/localvm"
	"github.com/rayito-dev/rayito/localvm/localvmtest"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/git"
)

// The git tests' own peer namespace: the git server on gitAddr, a server
// that must never hear from the sandbox on gitEvil.
var (
	gitHost = netip.MustParseAddr("10.250.29.1")
	gitAddr = netip.MustParseAddr("10.250.29.2")
	gitEvil = netip.MustParseAddr("10.250.29.3")
)

// gitServer is `git http-backend` behind Basic auth (user "bot", one
// token) in a peer namespace, plus an "evil" server that records every
// request it gets.
type gitServer struct {
	root  string // the bare repositories
	token string

	mu       sync.Mutex
	requests int      // to the git server
	authed   int      // of them with the right credentials
	evil     []string // requests the evil server got, with "auth" when they carried credentials
}

func (s *gitServer) url(repo string) string { return "http://" + gitAddr.String() + "/" + repo }

func startGitServer(t *testing.T, token string) *gitServer {
	t.Helper()
	backend := filepath.Join(gitOut(t, "", "--exec-path"), "git-http-backend")
	s := &gitServer{root: t.TempDir(), token: token}
	pn, err := localvmtest.NewPeerNet(netip.PrefixFrom(gitHost, 24).Masked(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pn.Close)
	if pn.Host != gitHost || pn.Addrs[0] != gitAddr || pn.Addrs[1] != gitEvil {
		t.Fatalf("peer addresses %v %v", pn.Host, pn.Addrs)
	}
	cgiHandler := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=bot"}}
	good := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		s.mu.Lock()
		s.requests++
		if ok && user == "bot" && pass == s.token {
			s.authed++
		}
		s.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/slow.git/") {
			<-r.Context().Done() // a clone that never ends
			return
		}
		if !ok || user != "bot" || pass != s.token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		cgiHandler.ServeHTTP(w, r)
	})
	evil := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, auth := r.BasicAuth()
		s.mu.Lock()
		s.evil = append(s.evil, fmt.Sprintf("%s auth=%v", r.URL.Path, auth || r.Header.Get("Authorization") != ""))
		s.mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	for addr, h := range map[netip.Addr]http.Handler{gitAddr: good, gitEvil: evil} {
		ln, err := pn.Listen("tcp", netip.AddrPortFrom(addr, 80).String())
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	return s
}

// gitOut runs git on the host and returns its trimmed output.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Host", "-c", "user.email=host@test", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newBare makes root/name.git with one commit (README) on main.
func (s *gitServer) newBare(t *testing.T, name string) string {
	t.Helper()
	work := t.TempDir()
	gitOut(t, work, "init", "-q", ".")
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, work, "add", "README")
	gitOut(t, work, "commit", "-qm", "first")
	bare := filepath.Join(s.root, name+".git")
	gitOut(t, "", "clone", "-q", "--bare", work, bare)
	return bare
}

func (s *gitServer) counts() (requests, authed int, evil []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.authed, append([]string(nil), s.evil...)
}

// TestGit: git in a local sandbox against a real git server (git
// http-backend behind Basic auth) in a test network namespace. A private
// clone with a token, commit, branch, push and pull work; the token is in
// no config, remote URL, error, output or log afterwards (a canary
// searched for); a planted hook and askpass do not run on a credentialed
// push; a URL rewrite is refused before the token is sent; failed and
// timed-out commands leave the clean URL; errors are typed and name the
// action, not the URL.
func TestGit(t *testing.T) {
	t.Parallel() // a long wait on sandboxes: beside the other parallel tests (each has its own subnet, testSubnet)
	if !isRoot() {
		t.Skip("needs root: network namespaces and the root platform")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed (make deps installs it): ", err)
	}
	raw := make([]byte, 12)
	_, _ = rand.Read(raw)
	canary := "canary" + hex.EncodeToString(raw) // the token: searched for everywhere afterwards
	srv := startGitServer(t, canary)
	bare := srv.newBare(t, "private")
	var platformLog bytes.Buffer
	var logMu sync.Mutex
	stateDir := t.TempDir()
	p := startPlatform(t, stateDir, func(o *localvm.Options) {
		o.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &platformLog}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sbx, err := rayito.Create(ctx, p.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sbx.Kill(context.Background()) }()
	g := git.New(sbx)
	creds := git.WithCredentials("bot", canary)
	var errs []error // every error, searched for the canary at the end
	expect := func(err error, target error, what string) {
		t.Helper()
		errs = append(errs, err)
		if !errors.Is(err, target) {
			t.Fatalf("%s: %v, want %v", what, err, target)
		}
		if msg := err.Error(); strings.Contains(msg, "http://") || strings.Contains(msg, gitAddr.String()) {
			t.Fatalf("%s: the message names the URL: %s", what, msg)
		}
	}
	readFile := func(path string) string {
		t.Helper()
		b, err := sbx.Files.Read(ctx, path)
		if err != nil {
			t.Fatal(path, err)
		}
		return string(b)
	}

	// Without credentials, and with a wrong token: git.ErrAuth, naming the
	// action.
	_, err = g.Clone(ctx, srv.url("private.git"), "nocreds")
	expect(err, git.ErrAuth, "clone without credentials")
	if !strings.Contains(err.Error(), "git clone: authentication failed") {
		t.Fatalf("message %q", err)
	}
	_, err = g.Clone(ctx, srv.url("private.git"), "wrong", git.WithCredentials("bot", "wrong-token"))
	expect(err, rayito.ErrUnauthenticated, "clone with a wrong token")
	// Bad input: InvalidArgument before any call.
	before, _, _ := srv.counts()
	for name, call := range map[string]func() error{
		"password without username": func() error {
			_, err := g.Clone(ctx, srv.url("private.git"), "x", git.WithCredentials("", canary))
			return err
		},
		"credentials on ssh": func() error {
			_, err := g.Clone(ctx, "ssh://git@"+gitAddr.String()+"/private.git", "x", creds)
			return err
		},
		"credentials in the URL": func() error {
			_, err := g.Clone(ctx, "http://bot:"+canary+"@"+gitAddr.String()+"/private.git", "x")
			return err
		},
		"a token as the URL's user": func() error {
			_, err := g.Clone(ctx, "http://"+canary+"@"+gitAddr.String()+"/private.git", "x")
			return err
		},
		"option as URL": func() error { _, err := g.Clone(ctx, "--upload-pack=touch /tmp/x", "x"); return err },
		"option as branch": func() error {
			_, err := g.Clone(ctx, srv.url("private.git"), "x", git.WithBranch("--upload-pack=x"))
			return err
		},
	} {
		err := call()
		expect(err, rayito.ErrInvalidArgument, name)
		if strings.Contains(err.Error(), canary) {
			t.Fatalf("%s: the error holds the token", name)
		}
	}
	if after, _, _ := srv.counts(); after != before {
		t.Fatalf("refused calls reached the server: %d requests", after-before)
	}

	// A private clone with the token.
	if _, err := g.Clone(ctx, srv.url("private.git"), "repo", creds, git.WithBranch("main")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Clone(ctx, srv.url("private.git"), "shallow", creds, git.WithDepth(1)); err != nil {
		t.Fatal(err)
	}
	if out, _ := sh(ctx, t, sbx, "git -C shallow rev-parse --is-shallow-repository"); out != "true\n" {
		t.Fatalf("depth 1: shallow %q", out)
	}
	if _, authed, _ := srv.counts(); authed == 0 {
		t.Fatal("the clone never authenticated")
	}
	if u, ok, err := g.RemoteGet(ctx, "repo", "origin"); err != nil || !ok || u != srv.url("private.git") {
		t.Fatalf("remote %q %v %v", u, ok, err)
	}
	if readFile("repo/README") != "hello\n" {
		t.Fatal("README")
	}

	// Commit on a branch and push it with the token.
	if err := g.ConfigureUser(ctx, "Agent", "agent@example.com"); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := g.GetConfig(ctx, "user.email"); err != nil || !ok || v != "agent@example.com" {
		t.Fatalf("config %q %v %v", v, ok, err)
	}
	if _, err := g.CreateBranch(ctx, "repo", "feature"); err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Files.Write(ctx, "repo/change.txt", []byte("change\n")); err != nil {
		t.Fatal(err)
	}
	st, err := g.Status(ctx, "repo")
	if err != nil || st.Branch != "feature" || len(st.Untracked) != 1 || st.Untracked[0] != "change.txt" {
		t.Fatalf("status %+v %v", st, err)
	}
	if _, err := g.Add(ctx, "repo"); err != nil {
		t.Fatal(err)
	}
	if st, err = g.Status(ctx, "repo"); err != nil || len(st.Staged) != 1 || st.Staged[0].Change != git.Added {
		t.Fatalf("status %+v %v", st, err)
	}
	if _, err := g.Commit(ctx, "repo", "add change"); err != nil {
		t.Fatal(err)
	}
	// Planted: a pre-push hook (in .git/hooks and through core.hooksPath)
	// that would record the run and block the push, and an askpass.
	hook := "#!/bin/sh\necho ran >> \"$HOME/hook-ran\"\nexit 1\n"
	for _, f := range []string{"repo/.git/hooks/pre-push", "hooks/pre-push", "askpass.sh"} {
		if _, err := sbx.Files.Write(ctx, f, []byte(hook)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sbx.Commands.Run(ctx, "chmod +x repo/.git/hooks/pre-push hooks/pre-push askpass.sh && "+
		"git -C repo config core.hooksPath \"$HOME/hooks\" && git -C repo config core.askPass \"$HOME/askpass.sh\""); err != nil {
		t.Fatal(err)
	}
	res, err := g.Push(ctx, "repo", creds, git.WithSetUpstream(), git.WithCredentialHost("http", gitAddr.String()))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout+res.Stderr, canary) {
		t.Fatal("the push's output holds the token")
	}
	if out, _ := sh(ctx, t, sbx, "cat ~/hook-ran 2>/dev/null || echo none"); out != "none\n" {
		t.Fatalf("a planted hook or askpass ran: %q", out)
	}
	if got := gitOut(t, bare, "log", "-1", "--format=%s", "feature"); got != "add change" {
		t.Fatalf("server's feature branch: %q", got)
	}
	if st, err = g.Status(ctx, "repo"); err != nil || st.Upstream != "origin/feature" || st.Ahead != 0 || !st.Clean() {
		t.Fatalf("status after push %+v %v", st, err)
	}
	if b, err := g.Branches(ctx, "repo"); err != nil || b.Current != "feature" || len(b.Branches) != 2 {
		t.Fatalf("branches %+v %v", b, err)
	}

	// Pull a commit made on the server.
	work := t.TempDir()
	gitOut(t, work, "clone", "-q", "-b", "feature", bare, ".")
	if err := os.WriteFile(filepath.Join(work, "upstream.txt"), []byte("up\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, work, "add", ".")
	gitOut(t, work, "commit", "-qm", "upstream")
	gitOut(t, work, "push", "-q", "origin", "feature")
	// Planted for the pull: an fsmonitor, which a merge would run.
	if _, err := sbx.Commands.Run(ctx, "printf '#!/bin/sh\\necho ran >> \"$HOME/fsmon-ran\"\\n' > fsmon.sh && chmod +x fsmon.sh && "+
		"git -C repo config core.fsmonitor \"$HOME/fsmon.sh\""); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Pull(ctx, "repo", creds); err != nil {
		t.Fatal(err)
	}
	if out, _ := sh(ctx, t, sbx, "cat ~/fsmon-ran 2>/dev/null || echo none; git -C repo config --unset core.fsmonitor"); out != "none\n" {
		t.Fatalf("a planted fsmonitor ran: %q", out)
	}
	if readFile("repo/upstream.txt") != "up\n" {
		t.Fatal("pull did not bring upstream.txt")
	}

	// A rejected push (the server moved on) is a conflict.
	gitOut(t, work, "commit", "-q", "--allow-empty", "-m", "again")
	gitOut(t, work, "push", "-q", "origin", "feature")
	if _, err := g.Commit(ctx, "repo", "local", git.WithAllowEmpty(), git.WithAuthor("Other", "other@example.com")); err != nil {
		t.Fatal(err)
	}
	_, err = g.Push(ctx, "repo", creds)
	expect(err, git.ErrConflict, "a non-fast-forward push")

	// No git on the PATH: ErrExecutableNotFound, not a git failure.
	_, err = g.Push(ctx, "repo", creds, git.WithEnvs(map[string]string{"PATH": "/nonexistent"}))
	expect(err, rayito.ErrExecutableNotFound, "a push without git")

	// A failed push (wrong token) leaves the clean URL.
	_, err = g.Push(ctx, "repo", git.WithCredentials("bot", "wrong-token"))
	expect(err, git.ErrAuth, "a push with a wrong token")
	if cfg := readFile("repo/.git/config"); strings.Contains(cfg, "wrong-token") || strings.Contains(cfg, canary) {
		t.Fatal("a token in .git/config after a failed push")
	}

	// URL rewrites, in the repository and in the user's global config:
	// refused, and nothing reaches either server.
	evilURL := "http://" + gitEvil.String() + "/"
	for _, cmd := range []string{
		"git -C repo config url." + evilURL + ".insteadOf " + srv.url(""),
		"git -C repo config url." + evilURL + ".pushInsteadOf " + srv.url(""),
		"git config --global url." + evilURL + ".insteadOf http://",
	} {
		if _, err := sbx.Commands.Run(ctx, cmd); err != nil {
			t.Fatal(err)
		}
		_, err = g.Push(ctx, "repo", creds)
		expect(err, git.ErrURLRewrite, "push through "+cmd)
		expect(err, rayito.ErrPermissionDenied, "push through "+cmd)
		_, err = g.Pull(ctx, "repo", creds)
		expect(err, git.ErrURLRewrite, "pull through "+cmd)
		if strings.Contains(cmd, "--global") {
			// A clone reads the user's and the system's config.
			_, err = g.Clone(ctx, srv.url("private.git"), "rewritten", creds)
			expect(err, git.ErrURLRewrite, "clone through "+cmd)
		}
		if _, err := sbx.Commands.Run(ctx, "git -C repo config --remove-section url."+evilURL+" 2>/dev/null; git config --global --remove-section url."+evilURL+" 2>/dev/null; rm -rf rewritten; true"); err != nil {
			t.Fatal(err)
		}
	}
	// Code in the sandbox points the push URL elsewhere: credentials
	// pinned to the server's host (WithCredentialHost) are refused before
	// anything is sent.
	if _, err := sbx.Commands.Run(ctx, "git -C repo config remote.origin.pushurl "+evilURL+"private.git"); err != nil {
		t.Fatal(err)
	}
	_, err = g.Push(ctx, "repo", creds, git.WithCredentialHost("http", gitAddr.String()))
	expect(err, rayito.ErrInvalidArgument, "a pinned push to another host")
	if _, err := sbx.Commands.Run(ctx, "git -C repo config --unset remote.origin.pushurl"); err != nil {
		t.Fatal(err)
	}
	if _, _, evil := srv.counts(); len(evil) != 0 {
		t.Fatalf("the evil server was contacted: %v", evil)
	}

	// A clone that times out ends, leaves no git process and no token.
	_, err = g.Clone(ctx, "http://"+gitAddr.String()+"/slow.git", "slow", creds, git.WithTimeout(2*time.Second))
	expect(err, rayito.ErrTimeout, "a clone past its timeout")
	procs, err := sbx.Commands.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range procs {
		if pr.Cmd == "git" || pr.Cmd == "sh" {
			t.Fatalf("a git process outlived its timeout: %+v", pr)
		}
		if strings.Contains(strings.Join(pr.Args, " "), canary) {
			t.Fatal("a process's arguments hold the token")
		}
	}
	if cfg, err := sbx.Files.Read(ctx, "slow/.git/config"); err == nil && strings.Contains(string(cfg), canary) {
		t.Fatal("the timed-out clone's config holds the token")
	}

	// The CLI: the same rules, credentials from the environment or stdin.
	env := append(os.Environ(), "RAYITO_ENDPOINT="+p.endpoint, "RAYITO_ACCESS_TOKEN="+sbx.AccessToken(),
		"XDG_STATE_HOME="+t.TempDir(), "RAYITO_BACKEND=", "RAYITO_GIT_USERNAME=bot")
	var cliOut strings.Builder
	cli := func(want int, stdin string, env []string, args ...string) cliResult {
		t.Helper()
		r := runCLIInput(t, env, stdin, append([]string{"sandbox", "git", sbx.ID()}, args...)...)
		cliOut.WriteString(r.stdout + r.stderr)
		if r.code != want {
			t.Fatalf("rayito sandbox git %v: exit %d, want %d: %s%s", args, r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	withPass := append(append([]string{}, env...), "RAYITO_GIT_PASSWORD="+canary)
	cli(0, "", withPass, "clone", srv.url("private.git"), "cli-repo")
	if _, err := sbx.Commands.Run(ctx, "git -C cli-repo checkout -q -b cli-branch && echo cli > cli-repo/cli.txt"); err != nil {
		t.Fatal(err)
	}
	cli(0, "", env, "commit", "cli-repo", "-a", "-m", "from the cli")
	cli(0, canary+"\n", env, "push", "cli-repo", "--set-upstream", "--password-stdin")
	if got := gitOut(t, bare, "log", "-1", "--format=%s", "cli-branch"); got != "from the cli" {
		t.Fatalf("server's cli-branch: %q", got)
	}
	if r := cli(0, "", env, "status", "--json", "cli-repo"); !strings.Contains(r.stdout, `"upstream": "origin/cli-branch"`) {
		t.Fatalf("status --json: %s", r.stdout)
	}
	cli(0, "", withPass, "pull", "cli-repo")
	if r := cli(1, "wrong-token\n", env, "pull", "cli-repo", "--password-stdin"); !strings.Contains(r.stderr, "git pull: authentication failed") {
		t.Fatalf("a wrong token: %s", r.stderr)
	}
	if r := cli(2, canary+"\n", append(append([]string{}, env...), "RAYITO_GIT_USERNAME="), "push", "cli-repo", "--password-stdin"); !strings.Contains(r.stderr, "a password without a username") {
		t.Fatalf("no username: %s", r.stderr)
	}
	if strings.Contains(cliOut.String(), canary) {
		t.Fatal("the CLI printed the token")
	}

	// E2B's own SDK: its sandbox.git clones and pushes through the process
	// API rayd serves (its own rules: the credentialed URL goes into the
	// config for the command, then back out).
	t.Run("E2B SDK", func(t *testing.T) {
		dir := e2bScenarioDir(t)
		apiKey, err := e2b.NewAPIKey()
		if err != nil {
			t.Fatal(err)
		}
		es, err := e2b.New(context.Background(), e2b.Options{SDK: p.opts(), APIKeyHashes: [][32]byte{e2b.HashAPIKey(apiKey)}, Templates: map[string]string{"": "local"}})
		if err != nil {
			t.Fatal(err)
		}
		url := serveE2B(t, es)
		runE2BScenario(t, dir, map[string]string{"E2B_API_KEY": apiKey, "E2B_API_URL": url, "E2B_SANDBOX_URL": url, "E2B_GIT_TOKEN": canary}, "--git", srv.url("private.git"))
		if got := gitOut(t, bare, "log", "-1", "--format=%s", "e2b-branch"); got != "from the e2b sdk" {
			t.Fatalf("server's e2b-branch: %q", got)
		}
	})

	// The canary search: the repository, the sandbox's writable places,
	// its outputs, errors and logs, the platform's logs and state.
	if cfg := readFile("repo/.git/config"); strings.Contains(cfg, canary) || !strings.Contains(cfg, srv.url("private.git")) {
		t.Fatalf("repo config:\n%s", cfg)
	}
	if out, ok := sh(ctx, t, sbx, "grep -rlsF -- "+canary+" /home /tmp /var/tmp /dev/shm /run/user /etc 2>/dev/null; true"); !ok || out != "" {
		t.Fatalf("the token is in the sandbox's files: %q", out)
	}
	for _, e := range errs {
		if strings.Contains(fmt.Sprintf("%v %+v", e, e), canary) {
			t.Fatalf("an error holds the token: %v", e)
		}
		var ge *git.Error
		if errors.As(e, &ge) && strings.Contains(ge.Stdout+ge.Stderr, canary) {
			t.Fatal("a git error's output holds the token")
		}
	}
	logs, err := sbx.Logs(ctx, time.Time{}, rayito.MaxLogs)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		if strings.Contains(fmt.Sprint(l), canary) {
			t.Fatal("rayd's log holds the token")
		}
	}
	logMu.Lock()
	leaked := strings.Contains(platformLog.String(), canary)
	logMu.Unlock()
	if leaked {
		t.Fatal("the platform's log holds the token")
	}
	_ = filepath.WalkDir(stateDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(canary)) {
			t.Errorf("the platform's state holds the token: %s", path)
		}
		return nil
	})

	// DangerouslyAuthenticate stores the token where any code can read
	// it (documented): later plain pulls work.
	if err := g.DangerouslyAuthenticate(ctx, "bot", canary, git.WithCredentialHost("http", gitAddr.String())); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Clone(ctx, srv.url("private.git"), "stored"); err != nil {
		t.Fatal("clone with stored credentials: ", err)
	}
	if !strings.Contains(readFile(".git-credentials"), canary) {
		t.Fatal("DangerouslyAuthenticate stored nothing")
	}
}

// lockedWriter serializes writes to a buffer.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestGitOps: the operations without credentials, against repositories
// inside the sandbox (a bare one as the remote): init, remotes, branches,
// reset, restore, scoped config, a rename in status, a merge conflict, a
// push without upstream and a directory that is no repository, each with
// its typed error.
func TestGitOps(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sbx := p.create(ctx)
	defer func() { _ = sbx.Kill(context.Background()) }()
	g := git.New(sbx)
	must := func(_ *rayito.CommandResult, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, data string) {
		t.Helper()
		if _, err := sbx.Files.Write(ctx, path, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	must(g.Init(ctx, "origin.git", git.WithBare(), git.WithInitialBranch("trunk")))
	must(g.Init(ctx, "w", git.WithInitialBranch("trunk")))
	// No user configured yet: a commit says so, typed.
	if _, err := g.Commit(ctx, "w", "nobody", git.WithAllowEmpty()); !errors.Is(err, git.ErrIdentity) ||
		!strings.Contains(err.Error(), "no author identity") {
		t.Fatalf("a commit without identity: %v", err)
	}
	if err := g.ConfigureUser(ctx, "Local", "local@example.com", git.WithConfigScope(git.ScopeLocal), git.WithRepository("w")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := g.GetConfig(ctx, "user.name", git.WithConfigScope(git.ScopeLocal), git.WithRepository("w")); err != nil || !ok || v != "Local" {
		t.Fatalf("local user.name %q %v %v", v, ok, err)
	}
	if _, ok, err := g.GetConfig(ctx, "user.nothing"); err != nil || ok {
		t.Fatalf("an unset key: %v %v", ok, err)
	}
	if _, ok, err := g.RemoteGet(ctx, "w", "origin"); err != nil || ok {
		t.Fatalf("no remote yet: %v %v", ok, err)
	}
	must(g.RemoteAdd(ctx, "w", "origin", "/nowhere.git"))
	must(g.RemoteAdd(ctx, "w", "origin", "../origin.git", git.WithForce()))
	if u, ok, err := g.RemoteGet(ctx, "w", "origin"); err != nil || !ok || u != "../origin.git" {
		t.Fatalf("remote %q %v %v", u, ok, err)
	}
	must(g.RemoteSet(ctx, "w", "origin", "/home/user/origin.git"))

	write("w/a.txt", "a\n")
	must(g.Add(ctx, "w", git.WithPaths("a.txt")))
	must(g.Commit(ctx, "w", "first"))
	// A push without an upstream: git.ErrUpstream; with one: fine.
	if _, err := g.Push(ctx, "w"); !errors.Is(err, git.ErrUpstream) {
		t.Fatalf("push without upstream: %v", err)
	}
	must(g.Push(ctx, "w", git.WithSetUpstream()))

	// Reset and restore.
	write("w/a.txt", "changed\n")
	must(g.Add(ctx, "w"))
	must(g.Reset(ctx, "w", git.WithPaths("a.txt")))
	st, err := g.Status(ctx, "w")
	if err != nil || len(st.Staged) != 0 || len(st.Unstaged) != 1 {
		t.Fatalf("after reset of a path: %+v %v", st, err)
	}
	must(g.Restore(ctx, "w", git.WithPaths("a.txt")))
	if b, _ := sbx.Files.Read(ctx, "w/a.txt"); string(b) != "a\n" {
		t.Fatalf("restored %q", b)
	}
	if _, err := g.Restore(ctx, "w"); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Fatalf("restore without paths: %v", err)
	}
	must(g.Commit(ctx, "w", "empty", git.WithAllowEmpty()))
	must(g.Reset(ctx, "w", git.WithResetMode(git.ResetHard), git.WithTarget("HEAD~1")))
	if _, err := g.Reset(ctx, "w", git.WithResetMode("sideways")); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Fatalf("a bad mode: %v", err)
	}

	// A rename shows with its source.
	must(nil, func() error { _, err := sbx.Commands.Run(ctx, "git -C w mv a.txt b.txt"); return err }())
	if st, err = g.Status(ctx, "w"); err != nil || len(st.Staged) != 1 || st.Staged[0] != (git.FileChange{Path: "b.txt", Change: git.Renamed, From: "a.txt"}) {
		t.Fatalf("rename: %+v %v", st, err)
	}
	must(g.Commit(ctx, "w", "rename"))

	// Branches: create, check out, delete (unmerged needs WithForce).
	must(g.CreateBranch(ctx, "w", "side"))
	write("w/b.txt", "side\n")
	must(g.Commit(ctx, "w", "side change", git.WithAllowEmpty()))
	must(g.Add(ctx, "w"))
	must(g.Commit(ctx, "w", "side edit"))
	must(g.CheckoutBranch(ctx, "w", "trunk"))
	if b, err := g.Branches(ctx, "w"); err != nil || b.Current != "trunk" || len(b.Branches) != 2 {
		t.Fatalf("branches %+v %v", b, err)
	}
	if _, err := g.DeleteBranch(ctx, "w", "side"); !errors.Is(err, git.ErrFailed) {
		t.Fatalf("deleting an unmerged branch: %v", err)
	}
	// A conflicting change on trunk, then a merge through pull from the
	// side branch pushed to the remote: git.ErrConflict, and Status lists
	// the file as conflicted.
	must(nil, func() error { _, err := sbx.Commands.Run(ctx, "git -C w push -q origin side"); return err }())
	write("w/b.txt", "trunk\n")
	must(g.Add(ctx, "w"))
	must(g.Commit(ctx, "w", "trunk edit"))
	if _, err := g.Pull(ctx, "w", git.WithBranch("side")); !errors.Is(err, git.ErrConflict) {
		var ge *git.Error
		errors.As(err, &ge)
		t.Fatalf("a conflicting pull: %v %q %q", err, ge.Stdout, ge.Stderr)
	}
	if st, err = g.Status(ctx, "w"); err != nil || len(st.Conflicted) != 1 || st.Conflicted[0] != "b.txt" {
		t.Fatalf("conflict status %+v %v", st, err)
	}
	must(g.Reset(ctx, "w", git.WithResetMode(git.ResetMerge)))
	must(g.DeleteBranch(ctx, "w", "side", git.WithForce()))

	// No repository: git.ErrNotRepository (also ErrNotFound).
	must(nil, func() error { _, err := sbx.Commands.Run(ctx, "mkdir -p /tmp/plain"); return err }())
	if _, err := g.Status(ctx, "/tmp/plain"); !errors.Is(err, git.ErrNotRepository) || !errors.Is(err, rayito.ErrNotFound) {
		t.Fatalf("status outside a repository: %v", err)
	}
	// Option injection through names is refused before git runs.
	if _, err := g.CheckoutBranch(ctx, "w", "--orphan=x"); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Fatalf("an option as a branch: %v", err)
	}
}
