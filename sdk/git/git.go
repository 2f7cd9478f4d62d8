// Package git runs git in a sandbox, through the SDK's process API
// (rayito.Commands), with credentials that serve one command only.
//
//	g := git.New(sbx)
//	_, err := g.Clone(ctx, url, "app", git.WithCredentials("x-access-token", token))
package git

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Client runs git in the sandbox, through the process API, as the sandbox's
// user (WithUser for another), with GIT_TERMINAL_PROMPT=0: a command that
// would ask for a password fails instead of waiting.
//
// Credentials (WithCredentials) serve one Clone, Push or Pull and
// nothing else:
//   - they reach git on its stdin, then its environment, and a credential
//     helper given on the command line answers git with them only for the
//     remote's own protocol and host; nothing is written: not the
//     repository's config, not the remote URL, not ~/.git-credentials;
//   - that command runs with -c core.hooksPath=/dev/null (a planted hook
//     does not run), -c credential.helper= (no configured helper sees or
//     stores them), no askpass program and no fsmonitor;
//   - a git configuration that rewrites URLs (url.*.insteadOf,
//     url.*.pushInsteadOf) is refused before anything is sent
//     (ErrURLRewrite), as is a remote that is not http(s), whose URL
//     holds credentials, or (with WithCredentialHost) on another host;
//   - errors, outputs and results never hold the password, its encoded
//     forms or a credentialed URL.
//
// Residual risk: code in the sandbox running as the same user can read
// the process's environment or watch the remote while a credentialed
// command runs. Treat the token as disclosed to the sandbox: use
// short-lived tokens scoped to one repository.
type Client struct {
	sbx *rayito.Sandbox
}

// New returns the Client of sbx's git. It holds nothing but sbx: make one
// where it is needed.
func New(sbx *rayito.Sandbox) *Client { return &Client{sbx: sbx} }

// The errors of git operations. A failed git command is a *Error that
// matches ErrFailed and, where the cause is known, one of the others.
var (
	// ErrFailed: a git command failed (see *Error).
	ErrFailed = errors.New("rayito: git failed")
	// ErrAuth: the remote refused the credentials, or asked for some
	// and none were given. It also matches rayito.ErrUnauthenticated.
	ErrAuth = errors.New("rayito: git authentication failed")
	// ErrConflict: a merge conflict, a rejected (non-fast-forward)
	// push, diverging branches or local changes in the way.
	ErrConflict = errors.New("rayito: git conflict")
	// ErrUpstream: the branch has no upstream to push to or pull from
	// (see WithSetUpstream, WithBranch).
	ErrUpstream = errors.New("rayito: git branch has no upstream")
	// ErrURLRewrite: the git configuration rewrites URLs
	// (url.*.insteadOf or pushInsteadOf), so credentials could go
	// elsewhere: nothing was sent. It also matches rayito.ErrPermissionDenied.
	ErrURLRewrite = errors.New("rayito: git configuration rewrites URLs")
	// ErrNotRepository: the path is not in a git repository. It also
	// matches rayito.ErrNotFound.
	ErrNotRepository = errors.New("rayito: not a git repository")
	// ErrIdentity: a commit without an author: give one (WithAuthor)
	// or configure the user (ConfigureUser).
	ErrIdentity = errors.New("rayito: git author identity unknown")
)

// Error is a git command that failed. Its message names the operation
// and the cause, never a URL; Stdout and Stderr are git's output with any
// credential removed.
type Error struct {
	Op       string // clone, push, ...
	Kind     error  // ErrAuth, ErrConflict, ... or nil
	ExitCode int
	Status   rayito.CommandStatus
	Stdout   string
	Stderr   string
}

func (e *Error) Error() string {
	what := "failed"
	switch {
	case e.Status == rayito.StatusTimeout:
		what = "timed out"
	case e.Status == rayito.StatusSandboxTimeout:
		what = "ended by the sandbox's timeout"
	case errors.Is(e.Kind, ErrAuth):
		what = "authentication failed"
	case errors.Is(e.Kind, ErrConflict):
		what = "conflict"
	case errors.Is(e.Kind, ErrUpstream):
		what = "no upstream branch"
	case errors.Is(e.Kind, ErrNotRepository):
		what = "not a git repository"
	case errors.Is(e.Kind, ErrIdentity):
		what = "no author identity: give an author or configure the user's name and email"
	}
	if e.Status == rayito.StatusExited || e.Status == "" {
		return fmt.Sprintf("rayito: git %s: %s (exit code %d)", e.Op, what, e.ExitCode)
	}
	return fmt.Sprintf("rayito: git %s: %s", e.Op, what)
}

// Is matches ErrFailed, the Kind, rayito.ErrUnauthenticated for ErrAuth,
// rayito.ErrNotFound for ErrNotRepository, and rayito.ErrTimeout or
// rayito.ErrSandboxTimeout for a command a deadline ended.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrFailed:
		return true
	case rayito.ErrUnauthenticated:
		return e.Kind == ErrAuth
	case rayito.ErrNotFound:
		return e.Kind == ErrNotRepository
	case rayito.ErrTimeout:
		return e.Status == rayito.StatusTimeout
	case rayito.ErrSandboxTimeout:
		return e.Status == rayito.StatusSandboxTimeout
	}
	return e.Kind != nil && target == e.Kind
}

// gitInvalid is an rayito.ErrInvalidArgument of a Git operation. Its message
// never holds a value the caller passed that could be a secret.
func gitInvalid(op, why string) error {
	return fmt.Errorf("%w: git %s: %s", rayito.ErrInvalidArgument, op, why)
}

// credHelper answers git's "get" with the credentials of the environment
// only for the protocol and host rayito checked; it ignores store and
// erase, so nothing is kept. git runs it with sh -c, its arguments after.
const credHelper = `!f() { test "$1" = get || exit 0; p= h=; ` +
	`while IFS= read -r l; do case "$l" in protocol=*) p=${l#protocol=};; host=*) h=${l#host=};; "") break;; esac; done; ` +
	`if test "$p" = "$RAYITO_GIT_PROTOCOL" && test "$h" = "$RAYITO_GIT_HOST"; then ` +
	`printf 'username=%s\npassword=%s\n' "$RAYITO_GIT_USERNAME" "$RAYITO_GIT_PASSWORD"; fi; }; f`

// credReader reads the two lines of credentials from stdin into the
// environment, then becomes git.
const credReader = `IFS= read -r RAYITO_GIT_USERNAME && IFS= read -r RAYITO_GIT_PASSWORD && ` +
	`export RAYITO_GIT_USERNAME RAYITO_GIT_PASSWORD && exec git "$@"`

// hardening is what every credentialed git command carries.
var hardening = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "credential.helper=",
	"-c", "credential.helper=" + credHelper,
	"-c", "core.askPass=",
	"-c", "core.fsmonitor=false",
}

// gitCreds are checked credentials for one remote.
type gitCreds struct {
	username, password string
	protocol, host     string
	// pinned: WithCredentialHost named the only remote they may go to.
	pinProtocol, pinHost string
}

// checkCreds validates the credentials of cfg (nil when none were given).
func checkCreds(op string, cfg *gitConfig) (*gitCreds, error) {
	if !cfg.credsSet {
		return nil, nil
	}
	if cfg.username == "" {
		return nil, gitInvalid(op, "credentials need a username (a password without one is refused)")
	}
	if cfg.password == "" {
		return nil, gitInvalid(op, "credentials need a password or token")
	}
	if strings.ContainsAny(cfg.username, "\n\r\x00") || strings.ContainsAny(cfg.password, "\n\r\x00") {
		return nil, gitInvalid(op, "credentials may not hold a line break or NUL")
	}
	return &gitCreds{username: cfg.username, password: cfg.password, pinProtocol: cfg.protocol, pinHost: cfg.host}, nil
}

// bindRemote checks the remote URL credentials are to be sent to: http or
// https, no credentials of its own. The URL never enters an error.
func (c *gitCreds) bindRemote(op, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return gitInvalid(op, "credentials need an http(s) remote URL")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return gitInvalid(op, "credentials need an http(s) remote URL, not "+strconv.Quote(u.Scheme))
	}
	if u.User != nil {
		return gitInvalid(op, "the remote URL holds credentials of its own: give them with WithCredentials instead")
	}
	if c.pinHost != "" && (!strings.EqualFold(u.Host, c.pinHost) || (c.pinProtocol != "" && u.Scheme != c.pinProtocol)) {
		return gitInvalid(op, "the remote is not the host WithCredentialHost allows the credentials for")
	}
	c.protocol, c.host = u.Scheme, u.Host
	return nil
}

// redact removes the password and its encoded forms from s.
func (c *gitCreds) redact(s string) string {
	if c == nil || s == "" {
		return s
	}
	forms := []string{
		c.password,
		url.QueryEscape(c.password),
		url.PathEscape(c.password),
		url.UserPassword(c.username, c.password).String(),
		base64.StdEncoding.EncodeToString([]byte(c.username + ":" + c.password)),
		base64.RawStdEncoding.EncodeToString([]byte(c.username + ":" + c.password)),
	}
	for _, f := range forms {
		if f != "" {
			s = strings.ReplaceAll(s, f, "[REDACTED]")
		}
	}
	return s
}

// checkRef refuses a branch, remote or ref name git could read as an
// option, or that holds a control character.
func checkRef(op, what, name string) error {
	if name == "" {
		return gitInvalid(op, what+" is empty")
	}
	if strings.HasPrefix(name, "-") {
		return gitInvalid(op, what+" may not begin with '-'")
	}
	if strings.ContainsFunc(name, isControl) {
		return gitInvalid(op, what+" holds a control character")
	}
	return nil
}

// checkPaths refuses empty paths and NULs.
func checkPaths(op string, paths []string) error {
	for _, p := range paths {
		if p == "" || strings.ContainsRune(p, 0) {
			return gitInvalid(op, "an empty path or one holding NUL")
		}
	}
	return nil
}

// gitRun is one git command.
type gitRun struct {
	op    string
	dir   string // cwd; "" is the user's home
	args  []string
	creds *gitCreds // redacted from the outputs; passed on stdin unless input is set
	input string    // stdin instead of the credentials
	ok    []int     // exit codes that are not failures
}

// run runs git with cfg's user, envs and timeout. Canceling ctx kills it.
func (g *Client) run(ctx context.Context, cfg *gitConfig, r gitRun) (*rayito.CommandResult, error) {
	envs := make(map[string]string, len(cfg.envs)+6)
	for k, v := range cfg.envs {
		envs[k] = v
	}
	envs["GIT_TERMINAL_PROMPT"] = "0"
	argv := append([]string{"git"}, r.args...)
	var stdin []byte
	if r.input != "" {
		stdin = []byte(r.input)
	} else if r.creds != nil {
		// The password goes on stdin, so rayd's process table, its List
		// answers and its logs never hold it.
		envs["GIT_ASKPASS"] = ""
		// No start-up file runs before the reader (bash as sh reads
		// BASH_ENV), and git's traces stay redacted.
		envs["BASH_ENV"], envs["ENV"] = "", ""
		envs["GIT_TRACE_REDACT"] = "1"
		envs["RAYITO_GIT_PROTOCOL"] = r.creds.protocol
		envs["RAYITO_GIT_HOST"] = r.creds.host
		argv = append([]string{"sh", "-c", credReader, "rayito-git"}, append(append([]string{}, hardening...), r.args...)...)
		stdin = []byte(r.creds.username + "\n" + r.creds.password + "\n")
	}
	opts := []rayito.CommandOption{rayito.WithEnvs(envs)}
	if r.dir != "" {
		opts = append(opts, rayito.WithCwd(r.dir))
	}
	if cfg.user != "" {
		opts = append(opts, rayito.WithUser(cfg.user))
	}
	if cfg.timeout > 0 {
		opts = append(opts, rayito.WithTimeout(cfg.timeout))
	}
	if stdin != nil {
		opts = append(opts, rayito.WithStdin())
	}
	h, err := g.sbx.Commands.StartExec(ctx, argv, opts...)
	if err != nil {
		return nil, fmt.Errorf("rayito: git %s: %w", r.op, err)
	}
	kill := func() {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = h.Kill(kctx)
	}
	if stdin != nil {
		if err := h.SendStdin(ctx, stdin); err != nil {
			kill()
			return nil, fmt.Errorf("rayito: git %s: %w", r.op, err)
		}
		// Everything was read; a process that has already ended (git
		// credential approve stops at the blank line) refuses the close:
		// its end is what Wait reports.
		_ = h.CloseStdin(ctx)
	}
	res, err := h.Wait(ctx)
	if res == nil {
		if ctx.Err() != nil {
			kill()
		}
		return nil, fmt.Errorf("rayito: git %s: %w", r.op, err)
	}
	out := *res
	out.Stdout, out.Stderr = r.creds.redact(out.Stdout), r.creds.redact(out.Stderr)
	var exit *rayito.CommandExitError
	if err == nil || (errors.As(err, &exit) && out.Status == rayito.StatusExited && slices.Contains(r.ok, out.ExitCode)) {
		return &out, nil
	}
	if !errors.As(err, &exit) {
		return nil, fmt.Errorf("rayito: git %s: %w", r.op, err)
	}
	if r.creds != nil && r.input == "" && out.Status == rayito.StatusExited && out.ExitCode == 127 && strings.Contains(out.Stderr, "git: not found") {
		// sh could not exec git: the same error as a plain git command's.
		return nil, fmt.Errorf("rayito: git %s: git is not installed in the sandbox: %w", r.op, rayito.ErrExecutableNotFound)
	}
	return &out, &Error{Op: r.op, Kind: classifyGit(out.Stderr + "\n" + out.Stdout), ExitCode: out.ExitCode, Status: out.Status,
		Stdout: out.Stdout, Stderr: out.Stderr}
}

// classifyGit reads the cause of a failure from git's output (a merge
// reports its conflicts on stdout).
func classifyGit(output string) error {
	s := strings.ToLower(output)
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case has("authentication failed", "could not read username", "could not read password",
		"invalid username or password", "http basic: access denied", "the requested url returned error: 401",
		"the requested url returned error: 403", "permission denied (publickey"):
		return ErrAuth
	case has("not a git repository"):
		return ErrNotRepository
	case has("author identity unknown", "please tell me who you are", "unable to auto-detect email address", "empty ident name"):
		return ErrIdentity
	case has("has no upstream branch", "no tracking information", "no upstream configured", "does not point to a branch"):
		return ErrUpstream
	case has("conflict", "non-fast-forward", "[rejected]", "fetch first", "would be overwritten",
		"not possible to fast-forward", "divergent branches", "unmerged files", "you have unstaged changes"):
		return ErrConflict
	}
	return nil
}

// checkRewrites refuses a configuration that rewrites URLs, as seen from
// dir (every scope: system, global, the repository's, their includes).
func (g *Client) checkRewrites(ctx context.Context, cfg *gitConfig, op, dir string) error {
	res, err := g.run(ctx, cfg, gitRun{op: op, dir: dir, ok: []int{1},
		args: []string{"config", "--get-regexp", `^url\..*\.(insteadof|pushinsteadof)$`}})
	if err != nil {
		return err
	}
	if res.ExitCode == 0 && strings.TrimSpace(res.Stdout) != "" {
		return rayito.NewError(rayito.ReasonPermissionDenied, "rayito: git "+op+": the git configuration rewrites URLs (url.*.insteadOf or pushInsteadOf): refused before any credential was sent",
			ErrURLRewrite)
	}
	return nil
}
