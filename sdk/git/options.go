package git

import (
	"maps"
	"time"
)

// Option configures one git operation. WithUser, WithEnvs and
// WithTimeout apply to every operation; the others below say which
// operations read them (the rest ignore them).
type Option interface{ applyGit(*gitConfig) }

// ResetMode is the mode of Client.Reset.
type ResetMode string

// The reset modes (git reset --soft, --mixed, ...).
const (
	ResetSoft  ResetMode = "soft"
	ResetMixed ResetMode = "mixed"
	ResetHard  ResetMode = "hard"
	ResetMerge ResetMode = "merge"
	ResetKeep  ResetMode = "keep"
)

// ConfigScope is where Client.SetConfig and Client.GetConfig act.
type ConfigScope string

// The config scopes. ScopeLocal needs the repository's path
// (WithRepository).
const (
	ScopeGlobal ConfigScope = "global"
	ScopeLocal  ConfigScope = "local"
	ScopeSystem ConfigScope = "system"
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
	mode     ResetMode
	target   string
	staged   bool
	worktree bool
	source   string
	bare     bool
	fetch    bool
	scope    ConfigScope
	repo     string
	host     string
	protocol string
}

func gitOpts(opts []Option) *gitConfig {
	c := &gitConfig{}
	for _, o := range opts {
		if o != nil {
			o.applyGit(c)
		}
	}
	return c
}

// option is a Option made of a function.
type option func(*gitConfig)

func (f option) applyGit(c *gitConfig) { f(c) }

// WithUser runs the git command as user (default: the sandbox's).
func WithUser(user string) Option { return option(func(c *gitConfig) { c.user = user }) }

// WithEnvs adds environment variables to the git command (later calls
// replace earlier ones).
func WithEnvs(envs map[string]string) Option {
	envs = maps.Clone(envs)
	return option(func(c *gitConfig) { c.envs = envs })
}

// WithTimeout bounds the git command (0: the SDK's default for commands).
func WithTimeout(d time.Duration) Option { return option(func(c *gitConfig) { c.timeout = d }) }

// WithCredentials gives Clone, Push and Pull a username and a password
// (or token) for an http(s) remote, for that one command only: they reach
// git through its stdin, never through its arguments, its environment as
// rayd starts it, the repository's config or the remote URL. Both are
// required; neither may hold a line break or NUL.
func WithCredentials(username, password string) Option {
	return option(func(c *gitConfig) { c.username, c.password, c.credsSet = username, password, true })
}

// WithBranch names the branch: the one Clone checks out, the one Push
// pushes and Pull pulls (default: the current one).
func WithBranch(name string) Option { return option(func(c *gitConfig) { c.branch = name }) }

// WithDepth makes Clone shallow (--depth n, n ≥ 1).
func WithDepth(n int) Option { return option(func(c *gitConfig) { c.depth = n }) }

// WithRemote names the remote of Push and Pull (default origin).
func WithRemote(name string) Option { return option(func(c *gitConfig) { c.remote = name }) }

// WithSetUpstream makes Push record the remote branch as the upstream
// (--set-upstream).
func WithSetUpstream() Option { return option(func(c *gitConfig) { c.upstream = true }) }

// WithAuthor sets Commit's author and committer (otherwise git's
// user.name and user.email, see ConfigureUser).
func WithAuthor(name, email string) Option {
	return option(func(c *gitConfig) { c.author, c.email = name, email })
}

// WithAllowEmpty lets Commit record a commit without changes.
func WithAllowEmpty() Option { return option(func(c *gitConfig) { c.empty = true }) }

// WithForce forces DeleteBranch (-D, an unmerged branch) and lets
// RemoteAdd replace an existing remote's URL.
func WithForce() Option {
	return option(func(c *gitConfig) { c.force = true })
}

// WithPaths limits Add, Reset and Restore to these paths (relative to the
// repository). Add without it adds everything (-A); Restore needs it.
func WithPaths(paths ...string) Option {
	return option(func(c *gitConfig) { c.paths = append([]string(nil), paths...) })
}

// WithResetMode sets Reset's mode (default mixed).
func WithResetMode(m ResetMode) Option { return option(func(c *gitConfig) { c.mode = m }) }

// WithTarget sets the commit Reset moves to (default HEAD).
func WithTarget(ref string) Option { return option(func(c *gitConfig) { c.target = ref }) }

// WithStaged makes Restore restore the index (--staged).
func WithStaged() Option { return option(func(c *gitConfig) { c.staged = true }) }

// WithWorktree makes Restore restore the working tree too when WithStaged
// is given (it is the default without it).
func WithWorktree() Option { return option(func(c *gitConfig) { c.worktree = true }) }

// WithSource sets the commit Restore takes files from (--source).
func WithSource(ref string) Option { return option(func(c *gitConfig) { c.source = ref }) }

// WithBare makes Init create a bare repository.
func WithBare() Option { return option(func(c *gitConfig) { c.bare = true }) }

// WithInitialBranch names Init's first branch; see also WithBranch.
func WithInitialBranch(name string) Option {
	return option(func(c *gitConfig) { c.branch = name })
}

// WithFetch makes RemoteAdd fetch the new remote.
func WithFetch() Option { return option(func(c *gitConfig) { c.fetch = true }) }

// WithConfigScope sets where SetConfig, GetConfig and ConfigureUser act
// (default global, the sandbox user's ~/.gitconfig).
func WithConfigScope(s ConfigScope) Option {
	return option(func(c *gitConfig) { c.scope = s })
}

// WithRepository names the repository of a local-scope SetConfig,
// GetConfig or ConfigureUser.
func WithRepository(path string) Option { return option(func(c *gitConfig) { c.repo = path }) }

// WithCredentialHost names the host (host or host:port) and protocol
// (https or http) credentials are for. With WithCredentials it pins
// them: a Clone, Push or Pull whose remote is elsewhere (say, a remote
// URL that code in the sandbox changed) is rayito.ErrInvalidArgument before
// anything is sent; protocol "" accepts both. For DangerouslyAuthenticate
// it is where the stored credentials apply (default https, github.com).
func WithCredentialHost(protocol, host string) Option {
	return option(func(c *gitConfig) { c.protocol, c.host = protocol, host })
}
