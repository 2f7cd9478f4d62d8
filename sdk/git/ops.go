package git

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Clone clones url into dir (relative to the user's home; "" lets git
// name it after the URL). WithCredentials for a private http(s)
// remote, WithBranch, WithDepth. The remote URL recorded in the clone is
// url as given: it never holds the credentials.
func (g *Client) Clone(ctx context.Context, rawURL, dir string, opts ...Option) (*rayito.CommandResult, error) {
	const op = "clone"
	cfg := gitOpts(opts)
	creds, err := checkCreds(op, cfg)
	if err != nil {
		return nil, err
	}
	if rawURL == "" || strings.HasPrefix(rawURL, "-") || strings.ContainsFunc(rawURL, isControl) {
		return nil, gitInvalid(op, "the URL is empty, begins with '-' or holds a control character")
	}
	if urlHoldsCredentials(rawURL) {
		return nil, gitInvalid(op, "the URL holds credentials: give them with WithCredentials, so that they are not stored in the clone")
	}
	if creds != nil {
		if err := creds.bindRemote(op, rawURL); err != nil {
			return nil, err
		}
	}
	args := []string{"clone"}
	if cfg.depth < 0 {
		return nil, gitInvalid(op, "the depth must be positive")
	}
	if cfg.depth > 0 {
		args = append(args, "--depth", strconv.Itoa(cfg.depth))
	}
	if cfg.branch != "" {
		if err := checkRef(op, "the branch", cfg.branch); err != nil {
			return nil, err
		}
		args = append(args, "--branch", cfg.branch)
	}
	args = append(args, "--", rawURL)
	if dir != "" {
		if strings.ContainsRune(dir, 0) {
			return nil, gitInvalid(op, "the directory holds NUL")
		}
		args = append(args, dir)
	}
	if creds != nil {
		if err := g.checkRewrites(ctx, cfg, op, ""); err != nil {
			return nil, err
		}
	}
	return g.run(ctx, cfg, gitRun{op: op, args: args, creds: creds})
}

// Init creates a repository in dir (WithBare, WithInitialBranch).
func (g *Client) Init(ctx context.Context, dir string, opts ...Option) (*rayito.CommandResult, error) {
	const op = "init"
	cfg := gitOpts(opts)
	if err := checkPaths(op, []string{dir}); err != nil {
		return nil, err
	}
	args := []string{"init"}
	if cfg.bare {
		args = append(args, "--bare")
	}
	if cfg.branch != "" {
		if err := checkRef(op, "the initial branch", cfg.branch); err != nil {
			return nil, err
		}
		args = append(args, "--initial-branch", cfg.branch)
	}
	return g.run(ctx, cfg, gitRun{op: op, args: append(args, "--", dir)})
}

// RemoteAdd adds a remote (WithFetch fetches it; WithForce replaces the
// URL of an existing one).
func (g *Client) RemoteAdd(ctx context.Context, repo, name, rawURL string, opts ...Option) (*rayito.CommandResult, error) {
	const op = "remote add"
	cfg := gitOpts(opts)
	if err := g.checkRemoteArgs(op, repo, name, rawURL); err != nil {
		return nil, err
	}
	if cfg.force {
		if _, ok, err := g.RemoteGet(ctx, repo, name, opts...); err != nil {
			return nil, err
		} else if ok {
			return g.RemoteSet(ctx, repo, name, rawURL, opts...)
		}
	}
	args := []string{"remote", "add"}
	if cfg.fetch {
		args = append(args, "-f")
	}
	return g.run(ctx, cfg, gitRun{op: op, dir: repo, args: append(args, "--", name, rawURL)})
}

// RemoteSet changes a remote's URL.
func (g *Client) RemoteSet(ctx context.Context, repo, name, rawURL string, opts ...Option) (*rayito.CommandResult, error) {
	const op = "remote set-url"
	cfg := gitOpts(opts)
	if err := g.checkRemoteArgs(op, repo, name, rawURL); err != nil {
		return nil, err
	}
	return g.run(ctx, cfg, gitRun{op: op, dir: repo, args: []string{"remote", "set-url", "--", name, rawURL}})
}

// RemoteGet returns a remote's URL; ok is false when there is no such
// remote.
func (g *Client) RemoteGet(ctx context.Context, repo, name string, opts ...Option) (u string, ok bool, err error) {
	const op = "remote get-url"
	cfg := gitOpts(opts)
	if err := checkRef(op, "the remote", name); err != nil {
		return "", false, err
	}
	if err := checkPaths(op, []string{repo}); err != nil {
		return "", false, err
	}
	res, err := g.run(ctx, cfg, gitRun{op: op, dir: repo, args: []string{"remote", "get-url", "--", name}, ok: []int{2}})
	if err != nil {
		return "", false, err
	}
	if res.ExitCode != 0 {
		return "", false, nil
	}
	return strings.TrimSpace(res.Stdout), true, nil
}

func (g *Client) checkRemoteArgs(op, repo, name, rawURL string) error {
	if err := checkPaths(op, []string{repo}); err != nil {
		return err
	}
	if err := checkRef(op, "the remote", name); err != nil {
		return err
	}
	if rawURL == "" || strings.ContainsFunc(rawURL, isControl) {
		return gitInvalid(op, "the URL is empty or holds a control character")
	}
	if urlHoldsCredentials(rawURL) {
		return gitInvalid(op, "the URL holds credentials: they would be stored in the repository's config")
	}
	return nil
}

// Status reads the repository's state: branch, upstream, ahead/behind and
// the staged, unstaged, untracked and conflicted files.
func (g *Client) Status(ctx context.Context, repo string, opts ...Option) (*Status, error) {
	const op = "status"
	if err := checkPaths(op, []string{repo}); err != nil {
		return nil, err
	}
	res, err := g.run(ctx, gitOpts(opts), gitRun{op: op, dir: repo,
		args: []string{"status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all"}})
	if err != nil {
		return nil, err
	}
	if res.StdoutTruncated {
		return nil, fmt.Errorf("%w: git status: more than %d bytes of output", rayito.ErrResourceExhausted, rayito.MaxOutputBytes)
	}
	return parseGitStatus(res.Stdout)
}

// Branches lists the local branches and names the current one.
func (g *Client) Branches(ctx context.Context, repo string, opts ...Option) (*Branches, error) {
	const op = "branch"
	if err := checkPaths(op, []string{repo}); err != nil {
		return nil, err
	}
	res, err := g.run(ctx, gitOpts(opts), gitRun{op: op, dir: repo,
		args: []string{"for-each-ref", "--format=%(HEAD)%00%(refname:short)", "refs/heads"}})
	if err != nil {
		return nil, err
	}
	return parseGitBranches(res.Stdout)
}

// CreateBranch creates a branch at HEAD and checks it out.
func (g *Client) CreateBranch(ctx context.Context, repo, branch string, opts ...Option) (*rayito.CommandResult, error) {
	return g.branchOp(ctx, "checkout -b", repo, branch, opts, "checkout", "-b")
}

// CheckoutBranch checks out a branch.
func (g *Client) CheckoutBranch(ctx context.Context, repo, branch string, opts ...Option) (*rayito.CommandResult, error) {
	return g.branchOp(ctx, "checkout", repo, branch, opts, "checkout")
}

// DeleteBranch deletes a branch (WithForce: even unmerged).
func (g *Client) DeleteBranch(ctx context.Context, repo, branch string, opts ...Option) (*rayito.CommandResult, error) {
	flag := "-d"
	if gitOpts(opts).force {
		flag = "-D"
	}
	return g.branchOp(ctx, "branch "+flag, repo, branch, opts, "branch", flag)
}

func (g *Client) branchOp(ctx context.Context, op, repo, branch string, opts []Option, args ...string) (*rayito.CommandResult, error) {
	if err := checkPaths(op, []string{repo}); err != nil {
		return nil, err
	}
	if err := checkRef(op, "the branch", branch); err != nil {
		return nil, err
	}
	return g.run(ctx, gitOpts(opts), gitRun{op: op, dir: repo, args: append(args, branch)})
}

// Add stages WithPaths, or everything (-A) without it.
func (g *Client) Add(ctx context.Context, repo string, opts ...Option) (*rayito.CommandResult, error) {
	const op = "add"
	cfg := gitOpts(opts)
	if err := checkPaths(op, append([]string{repo}, cfg.paths...)); err != nil {
		return nil, err
	}
	args := []string{"add", "-A"}
	if len(cfg.paths) > 0 {
		args = append([]string{"add", "--"}, cfg.paths...)
	}
	return g.run(ctx, cfg, gitRun{op: op, dir: repo, args: args})
}

// Commit records the staged changes (WithAuthor, WithAllowEmpty).
func (g *Client) Commit(ctx context.Context, repo, message string, opts ...Option) (*rayito.CommandResult, error) {
	const op = "commit"
	cfg := gitOpts(opts)
	if err := checkPaths(op, []string{repo}); err != nil {
		return nil, err
	}
	if message == "" || strings.ContainsRune(message, 0) {
		return nil, gitInvalid(op, "the message is empty or holds NUL")
	}
	var args []string
	if cfg.author != "" || cfg.email != "" {
		if cfg.author == "" || cfg.email == "" || strings.ContainsAny(cfg.author+cfg.email, "\n\r\x00<>") {
			return nil, gitInvalid(op, "the author needs a name and an email without line breaks, NUL, '<' or '>'")
		}
		args = append(args, "-c", "user.name="+cfg.author, "-c", "user.email="+cfg.email)
	}
	args = append(args, "commit", "-m", message)
	if cfg.empty {
		args = append(args, "--allow-empty")
	}
	return g.run(ctx, cfg, gitRun{op: op, dir: repo, args: args})
}

// Reset moves HEAD (WithResetMode, WithTarget) or unstages WithPaths.
func (g *Client) Reset(ctx context.Context, repo string, opts ...Option) (*rayito.CommandResult, error) {
	const op = "reset"
	cfg := gitOpts(opts)
	if err := checkPaths(op, append([]string{repo}, cfg.paths...)); err != nil {
		return nil, err
	}
	args := []string{"reset"}
	switch cfg.mode {
	case "":
	case ResetSoft, ResetMixed, ResetHard, ResetMerge, ResetKeep:
		if len(cfg.paths) > 0 {
			return nil, gitInvalid(op, "a mode and paths together")
		}
		args = append(args, "--"+string(cfg.mode))
	default:
		return nil, gitInvalid(op, "unknown mode "+strconv.Quote(string(cfg.mode)))
	}
	if cfg.target != "" {
		if err := checkRef(op, "the target", cfg.target); err != nil {
			return nil, err
		}
		args = append(args, cfg.target)
	}
	if len(cfg.paths) > 0 {
		args = append(append(args, "--"), cfg.paths...)
	}
	return g.run(ctx, cfg, gitRun{op: op, dir: repo, args: args})
}

// Restore restores WithPaths in the working tree (default), the index
// (WithStaged) or both (WithStaged, WithWorktree), from WithSource.
func (g *Client) Restore(ctx context.Context, repo string, opts ...Option) (*rayito.CommandResult, error) {
	const op = "restore"
	cfg := gitOpts(opts)
	if len(cfg.paths) == 0 {
		return nil, gitInvalid(op, "WithPaths is required")
	}
	if err := checkPaths(op, append([]string{repo}, cfg.paths...)); err != nil {
		return nil, err
	}
	args := []string{"restore"}
	if cfg.staged {
		args = append(args, "--staged")
		if cfg.worktree {
			args = append(args, "--worktree")
		}
	}
	if cfg.source != "" {
		if err := checkRef(op, "the source", cfg.source); err != nil {
			return nil, err
		}
		args = append(args, "--source", cfg.source)
	}
	args = append(append(args, "--"), cfg.paths...)
	return g.run(ctx, cfg, gitRun{op: op, dir: repo, args: args})
}

// Push pushes to WithRemote (origin) the branch WithBranch names, or the
// current one (WithSetUpstream records it as the upstream).
// WithCredentials for an http(s) remote.
func (g *Client) Push(ctx context.Context, repo string, opts ...Option) (*rayito.CommandResult, error) {
	const op = "push"
	cfg := gitOpts(opts)
	remote, creds, err := g.remoteCall(ctx, op, repo, cfg, true)
	if err != nil {
		return nil, err
	}
	args := []string{"push"}
	if cfg.upstream {
		args = append(args, "--set-upstream")
	}
	args = append(args, remote)
	switch {
	case cfg.branch != "":
		args = append(args, cfg.branch)
	case cfg.upstream:
		args = append(args, "HEAD")
	}
	return g.run(ctx, cfg, gitRun{op: op, dir: repo, args: args, creds: creds})
}

// Pull pulls from WithRemote (origin) the branch WithBranch names, or the
// upstream. WithCredentials for an http(s) remote.
func (g *Client) Pull(ctx context.Context, repo string, opts ...Option) (*rayito.CommandResult, error) {
	const op = "pull"
	cfg := gitOpts(opts)
	remote, creds, err := g.remoteCall(ctx, op, repo, cfg, false)
	if err != nil {
		return nil, err
	}
	args := []string{"pull", "--no-rebase"}
	if cfg.branch != "" {
		args = append(args, remote, cfg.branch)
	} else if cfg.remote != "" {
		args = append(args, remote)
	}
	return g.run(ctx, cfg, gitRun{op: op, dir: repo, args: args, creds: creds})
}

// remoteCall checks a push or pull: the remote and branch names, and with
// credentials the remote's URL (as git will use it) and the absence of
// URL rewrites, before anything is sent.
func (g *Client) remoteCall(ctx context.Context, op, repo string, cfg *gitConfig, push bool) (string, *gitCreds, error) {
	creds, err := checkCreds(op, cfg)
	if err != nil {
		return "", nil, err
	}
	if err := checkPaths(op, []string{repo}); err != nil {
		return "", nil, err
	}
	remote := cfg.remote
	if remote == "" {
		remote = "origin"
	}
	if err := checkRef(op, "the remote", remote); err != nil {
		return "", nil, err
	}
	if cfg.branch != "" {
		if err := checkRef(op, "the branch", cfg.branch); err != nil {
			return "", nil, err
		}
	}
	if creds == nil {
		return remote, nil, nil
	}
	if err := g.checkRewrites(ctx, cfg, op, repo); err != nil {
		return "", nil, err
	}
	args := []string{"remote", "get-url"}
	if push {
		args = append(args, "--push")
	}
	res, err := g.run(ctx, cfg, gitRun{op: op, dir: repo, args: append(args, "--", remote)})
	if err != nil {
		return "", nil, err
	}
	if err := creds.bindRemote(op, strings.TrimSpace(res.Stdout)); err != nil {
		return "", nil, err
	}
	return remote, creds, nil
}

// SetConfig sets a git config key (WithConfigScope, WithRepository).
func (g *Client) SetConfig(ctx context.Context, key, value string, opts ...Option) (*rayito.CommandResult, error) {
	const op = "config"
	cfg := gitOpts(opts)
	dir, scope, err := configScope(op, key, cfg)
	if err != nil {
		return nil, err
	}
	if strings.ContainsRune(value, 0) {
		return nil, gitInvalid(op, "the value holds NUL")
	}
	return g.run(ctx, cfg, gitRun{op: op, dir: dir, args: []string{"config", scope, "--", key, value}})
}

// GetConfig reads a git config key (WithConfigScope, WithRepository); ok
// is false when it is not set.
func (g *Client) GetConfig(ctx context.Context, key string, opts ...Option) (value string, ok bool, err error) {
	const op = "config"
	cfg := gitOpts(opts)
	dir, scope, err := configScope(op, key, cfg)
	if err != nil {
		return "", false, err
	}
	res, err := g.run(ctx, cfg, gitRun{op: op, dir: dir, args: []string{"config", scope, "--get", "--", key}, ok: []int{1}})
	if err != nil || res.ExitCode != 0 {
		return "", false, err
	}
	return strings.TrimSuffix(res.Stdout, "\n"), true, nil
}

// ConfigureUser sets user.name and user.email (WithConfigScope,
// WithRepository).
func (g *Client) ConfigureUser(ctx context.Context, name, email string, opts ...Option) error {
	if name == "" || email == "" || strings.ContainsAny(name+email, "\n\r\x00") {
		return gitInvalid("config", "the user needs a name and an email without line breaks or NUL")
	}
	if _, err := g.SetConfig(ctx, "user.name", name, opts...); err != nil {
		return err
	}
	_, err := g.SetConfig(ctx, "user.email", email, opts...)
	return err
}

func configScope(op, key string, cfg *gitConfig) (dir, flag string, err error) {
	if key == "" || strings.HasPrefix(key, "-") || strings.ContainsFunc(key, isControl) || !strings.Contains(key, ".") {
		return "", "", gitInvalid(op, "the key must look like section.name")
	}
	switch cfg.scope {
	case "", ScopeGlobal:
		return "", "--global", nil
	case ScopeSystem:
		return "", "--system", nil
	case ScopeLocal:
		if cfg.repo == "" {
			return "", "", gitInvalid(op, "the local scope needs WithRepository")
		}
		return cfg.repo, "--local", checkPaths(op, []string{cfg.repo})
	}
	return "", "", gitInvalid(op, "unknown scope "+strconv.Quote(string(cfg.scope)))
}

// DangerouslyAuthenticate stores username and password in the sandbox
// user's ~/.git-credentials (git's store helper) for WithCredentialHost
// (default https://github.com), and makes it the user's credential helper,
// so every later git command, and any code in the sandbox, can use and
// read them. Prefer WithCredentials on each call.
func (g *Client) DangerouslyAuthenticate(ctx context.Context, username, password string, opts ...Option) error {
	const op = "credential approve"
	cfg := gitOpts(opts)
	cfg.username, cfg.password, cfg.credsSet = username, password, true
	creds, err := checkCreds(op, cfg)
	if err != nil {
		return err
	}
	protocol, host := cfg.protocol, cfg.host
	if protocol == "" {
		protocol = "https"
	}
	if host == "" {
		host = "github.com"
	}
	if protocol != "https" && protocol != "http" {
		return gitInvalid(op, "the protocol must be https or http")
	}
	if u, err := url.Parse(protocol + "://" + host); err != nil || u.Host != host || u.User != nil || strings.ContainsAny(host, "/\n\r\x00") {
		return gitInvalid(op, "the host must be a host name or host:port")
	}
	if _, err := g.SetConfig(ctx, "credential.helper", "store", WithConfigScope(ScopeGlobal), WithUser(cfg.user)); err != nil {
		return err
	}
	// Only the store helper sees the credentials, whatever else is
	// configured; they go on stdin.
	in := "protocol=" + protocol + "\nhost=" + host + "\nusername=" + creds.username + "\npassword=" + creds.password + "\n\n"
	_, err = g.run(ctx, cfg, gitRun{op: op, creds: creds, input: in,
		args: []string{"-c", "credential.helper=", "-c", "credential.helper=store", "credential", "approve"}})
	return err
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// urlHoldsCredentials tells whether a URL carries a password, or for
// http(s) any user part (a token is often given as the user name); an
// ssh user (git@host) is not a credential.
func urlHoldsCredentials(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return false
	}
	if _, has := u.User.Password(); has {
		return true
	}
	s := strings.ToLower(u.Scheme)
	return s == "http" || s == "https"
}
