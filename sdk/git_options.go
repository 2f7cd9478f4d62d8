package rayito

import (
	"maps"
	"time"
)

// GitOption configures one Git operation. WithUser, WithEnvs and
// WithTimeout are GitOptions too; the others below say which operations
// read them (the rest ignore them).
type GitOption interface{ applyGit(*gitConfig) }

// GitResetMode is the mode of Git.Reset.
type GitResetMode string

// The reset modes (git reset --soft, --mixed, ...).
const (
	GitResetSoft  GitResetMode = "soft"
	GitResetMixed GitResetMode = "mixed"
	GitResetHard  GitResetMode = "hard"
	GitResetMerge GitResetMode = "merge"
	GitResetKeep  GitResetMode = "keep"
)

// GitConfigScope is where Git.SetConfig and Git.GetConfig act.
type GitConfigScope string

// The config scopes. GitScopeLocal needs the repository's path
// (WithRepository).
const (
	GitScopeGlobal GitConfigScope = "global"
	GitScopeLocal  GitConfigScope = "local"
	GitScopeSystem GitConfigScope = "system"
)

type gitConfig struct {
	user     string
	envs     map[string]string
	timeout  time.Duration
	username string
	password string
	credsSet bool
	branch   string
	depth    int
	remote   string
	upstream bool
	author   string
	email    string
	empty    bool
	force    bool
	paths    []string
	mode     GitResetMode
	target   string
	staged   bool
	worktree bool
	source   string
	bare     bool
	fetch    bool
	scope    GitConfigScope
	repo     string
	host     string
	protocol string
}

func gitOpts(opts []GitOption) *gitConfig {
	c := &gitConfig{}
	for _, o := range opts {
		if o != nil {
			o.applyGit(c)
		}
	}
	return c
}

// gitOption is a GitOption made of a function.
type gitOption func(*gitConfig)

func (f gitOption) applyGit(c *gitConfig) { f(c) }

func (o userOption) applyGit(c *gitConfig)    { c.user = string(o) }
func (o envsOption) applyGit(c *gitConfig)    { c.envs = maps.Clone(o) }
func (o timeoutOption) applyGit(c *gitConfig) { c.timeout = time.Duration(o) }

// WithGitCredentials gives Clone, Push and Pull a username and a password
// (or token) for an http(s) remote, for that one command only: they reach
// git through its stdin, never through its arguments, its environment as
// rayd starts it, the repository's config or the remote URL. Both are
// required; neither may hold a line break or NUL.
func WithGitCredentials(username, password string) GitOption {
	return gitOption(func(c *gitConfig) { c.username, c.password, c.credsSet = username, password, true })
}

// WithBranch names the branch: the one Clone checks out, the one Push
// pushes and Pull pulls (default: the current one).
func WithBranch(name string) GitOption { return gitOption(func(c *gitConfig) { c.branch = name }) }

// WithDepth makes Clone shallow (--depth n, n ≥ 1).
func WithDepth(n int) GitOption { return gitOption(func(c *gitConfig) { c.depth = n }) }

// WithRemote names the remote of Push and Pull (default origin).
func WithRemote(name string) GitOption { return gitOption(func(c *gitConfig) { c.remote = name }) }

// WithSetUpstream makes Push record the remote branch as the upstream
// (--set-upstream).
func WithSetUpstream() GitOption { return gitOption(func(c *gitConfig) { c.upstream = true }) }

// WithAuthor sets Commit's author and committer (otherwise git's
// user.name and user.email, see ConfigureUser).
func WithAuthor(name, email string) GitOption {
	return gitOption(func(c *gitConfig) { c.author, c.email = name, email })
}

// WithAllowEmpty lets Commit record a commit without changes.
func WithAllowEmpty() GitOption { return gitOption(func(c *gitConfig) { c.empty = true }) }

// WithForce forces DeleteBranch (-D, an unmerged branch) and lets
// RemoteAdd replace an existing remote's URL.
func WithForce() GitOption {
	return gitOption(func(c *gitConfig) { c.force = true })
}

// WithPaths limits Add, Reset and Restore to these paths (relative to the
// repository). Add without it adds everything (-A); Restore needs it.
func WithPaths(paths ...string) GitOption {
	return gitOption(func(c *gitConfig) { c.paths = append([]string(nil), paths...) })
}

// WithResetMode sets Reset's mode (default mixed).
func WithResetMode(m GitResetMode) GitOption { return gitOption(func(c *gitConfig) { c.mode = m }) }

// WithTarget sets the commit Reset moves to (default HEAD).
func WithTarget(ref string) GitOption { return gitOption(func(c *gitConfig) { c.target = ref }) }

// WithStaged makes Restore restore the index (--staged).
func WithStaged() GitOption { return gitOption(func(c *gitConfig) { c.staged = true }) }

// WithWorktree makes Restore restore the working tree too when WithStaged
// is given (it is the default without it).
func WithWorktree() GitOption { return gitOption(func(c *gitConfig) { c.worktree = true }) }

// WithSource sets the commit Restore takes files from (--source).
func WithSource(ref string) GitOption { return gitOption(func(c *gitConfig) { c.source = ref }) }

// WithBare makes Init create a bare repository.
func WithBare() GitOption { return gitOption(func(c *gitConfig) { c.bare = true }) }

// WithInitialBranch names Init's first branch; see also WithBranch.
func WithInitialBranch(name string) GitOption {
	return gitOption(func(c *gitConfig) { c.branch = name })
}

// WithFetch makes RemoteAdd fetch the new remote.
func WithFetch() GitOption { return gitOption(func(c *gitConfig) { c.fetch = true }) }

// WithConfigScope sets where SetConfig, GetConfig and ConfigureUser act
// (default global, the sandbox user's ~/.gitconfig).
func WithConfigScope(s GitConfigScope) GitOption {
	return gitOption(func(c *gitConfig) { c.scope = s })
}

// WithRepository names the repository of a local-scope SetConfig,
// GetConfig or ConfigureUser.
func WithRepository(path string) GitOption { return gitOption(func(c *gitConfig) { c.repo = path }) }

// WithCredentialHost names the host (host or host:port) and protocol
// (https or http) credentials are for. With WithGitCredentials it pins
// them: a Clone, Push or Pull whose remote is elsewhere (say, a remote
// URL that code in the sandbox changed) is ErrInvalidArgument before
// anything is sent; protocol "" accepts both. For DangerouslyAuthenticate
// it is where the stored credentials apply (default https, github.com).
func WithCredentialHost(protocol, host string) GitOption {
	return gitOption(func(c *gitConfig) { c.protocol, c.host = protocol, host })
}
