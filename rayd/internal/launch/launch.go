// Package launch turns an RPC's "run this as that user" into a proc.Spec:
// it resolves the account under the identity rules, builds the environment
// from scratch and picks the working directory. Processes and PTYs share
// it, so both follow the same rules.
package launch

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/proto/limits"
	"github.com/rayito-dev/rayito/rayd/internal/identity"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

// DefaultPath is the PATH every process starts with.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Bounds on what one request may carry.
const (
	maxArgs     = 4096
	maxEnvs     = 1024
	maxArgBytes = 128 << 10
	maxTagBytes = 256
	maxTimeout  = 7 * 24 * time.Hour
)

// Request is what a client asked to run.
type Request struct {
	User string // "" = the sandbox's default user
	Cmd  string
	Args []string
	Envs map[string]string
	Cwd  *string
	// Timeout is the client's time limit; 0 = none.
	Timeout time.Duration
	Stdin   bool
	Tag     *string
	// Shell is the login shell of a PTY (PTYSpec); nil means the user's.
	// Spec ignores it.
	Shell *string
}

// Builder builds specs. Privileged tells whether rayd may switch users
// (it runs as root); without it, a process may only run as rayd's own uid.
type Builder struct {
	Resolver   *identity.Resolver
	Privileged bool
	// SelfUID is rayd's own uid, used when not Privileged.
	SelfUID uint32
	// Env, when set, returns variables every process gets after PATH,
	// HOME, USER and LOGNAME and before the sandbox's and the request's
	// envs (which win): the egress proxy variables while a network policy
	// has host rules. It is read at each start.
	Env func() map[string]string
}

// extraEnv merges the Builder's Env with fixed defaults (defaults win).
func (b *Builder) extraEnv(defaults map[string]string) map[string]string {
	if b.Env == nil {
		return defaults
	}
	m := b.Env()
	if len(m) == 0 {
		return defaults
	}
	out := make(map[string]string, len(m)+len(defaults))
	for k, v := range m {
		out[k] = v
	}
	for k, v := range defaults {
		out[k] = v
	}
	return out
}

// Spec validates req and returns the spec to start. Errors wrap this
// package's sentinels with fixed messages (*Error).
func (b *Builder) Spec(boot *sandbox.Boot, req Request) (proc.Spec, error) {
	return b.spec(boot, req, nil)
}

// Workdir returns the working directory Spec would give a process of
// boot's default user with cwd (nil: the default one), under the same
// rules, without building the rest of the spec.
func (b *Builder) Workdir(boot *sandbox.Boot, cwd *string) (string, error) {
	id, err := b.identity(boot.User)
	if err != nil {
		return "", err
	}
	return workdir(boot, id, cwd)
}

// CommandPTYSpec is Spec for a command on a PTY of cols x rows (zero
// fields: 80x24) instead of pipes: the command and its args as given (not
// a login shell, unlike PTYSpec), with TERM=xterm-256color unless the
// sandbox's or the request's envs set it. req.Stdin is ignored (the
// terminal is the input). E2B's envd starts its terminals this way.
func (b *Builder) CommandPTYSpec(boot *sandbox.Boot, req Request, cols, rows uint16) (proc.Spec, error) {
	if cols > MaxPTYSize || rows > MaxPTYSize {
		return proc.Spec{}, fail(ErrInvalid, "size out of range: 1..4096 columns and rows")
	}
	req.Stdin = false
	spec, err := b.spec(boot, req, map[string]string{"TERM": Term})
	if err != nil {
		return proc.Spec{}, err
	}
	spec.PTY = &proc.PTYConfig{Cols: cols, Rows: rows}
	return spec, nil
}

func (b *Builder) spec(boot *sandbox.Boot, req Request, defaults map[string]string) (proc.Spec, error) {
	if err := validate(req); err != nil {
		return proc.Spec{}, err
	}
	username := req.User
	if username == "" {
		username = boot.User
	}
	id, err := b.identity(username)
	if err != nil {
		return proc.Spec{}, err
	}
	env := buildEnvWith(id, b.extraEnv(defaults), boot.Envs, req.Envs)
	dir, err := workdir(boot, id, req.Cwd)
	if err != nil {
		return proc.Spec{}, err
	}
	path, err := proc.LookPath(req.Cmd, lookupEnv(env, "PATH"), dir)
	if err != nil {
		return proc.Spec{}, lookPathErr(err, "executable not found")
	}
	spec := proc.Spec{
		Path:    path,
		Args:    append([]string{req.Cmd}, req.Args...),
		Env:     env,
		Dir:     dir,
		Stdin:   req.Stdin,
		Timeout: req.Timeout,
	}
	if req.Tag != nil {
		spec.Tag = *req.Tag
	}
	if b.Privileged {
		spec.Identity = &id
	}
	return spec, nil
}

// deniedWhy words the identity rules' refusals for the client (fixed
// texts: never the user name).
var deniedWhy = map[string]string{
	identity.ReasonUnknownUser:    "no such account in the sandbox",
	identity.ReasonRootNotAllowed: "running as root needs RAYITO_ALLOW_ROOT=1 in rayd's environment",
	identity.ReasonUIDOutOfRange:  "its uid is outside 1000-65535",
	identity.ReasonGIDOutOfRange:  "its gid is outside 1000-65535",
	identity.ReasonInGroup0:       "it is in group 0 (root)",
}

// identity resolves username under the identity rules, with one fallback:
// the sandbox's default account "user" is uid 1000 even when the image
// names uid 1000 differently or has no passwd entry for it.
func (b *Builder) identity(username string) (identity.Identity, error) {
	if !b.Privileged && username == limits.DefaultUser {
		// Without root the sandbox's default user is rayd's own.
		return selfIdentity(), nil
	}
	id, err := b.Resolver.Resolve(username)
	var denied *identity.DeniedError
	if err != nil && username == limits.DefaultUser && errors.As(err, &denied) && denied.Reason == identity.ReasonUnknownUser {
		id, err = b.defaultIdentity()
	}
	if err != nil {
		if errors.As(err, &denied) {
			return identity.Identity{}, fail(ErrUserDenied, "user not allowed: "+deniedWhy[denied.Reason])
		}
		return identity.Identity{}, fail(ErrAccounts, "cannot read the account database")
	}
	if !b.Privileged && id.UID != b.SelfUID {
		return identity.Identity{}, fail(ErrUserDenied,
			"rayd runs without root: processes can only run as rayd's own user")
	}
	return id, nil
}

// selfIdentity describes rayd's own account, for the unprivileged mode.
func selfIdentity() identity.Identity {
	// os/user does not tell the shell: PTYs get DefaultShell.
	id := identity.Identity{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if u, err := user.Current(); err == nil {
		id.Username, id.Home = u.Username, u.HomeDir
	}
	if id.Username == "" {
		id.Username = strconv.Itoa(int(id.UID))
	}
	if id.Home == "" {
		id.Home = "/"
	}
	return id
}

// defaultIdentity is uid 1000: the passwd entry that has it, if any and
// allowed, otherwise a synthesized user:user with HOME /home/user.
func (b *Builder) defaultIdentity() (identity.Identity, error) {
	if id, err := b.Resolver.ResolveUID(limits.DefaultUID); err == nil {
		return id, nil
	}
	return identity.Identity{
		Username: limits.DefaultUser,
		UID:      limits.DefaultUID,
		GID:      limits.DefaultUID,
		Home:     "/home/" + limits.DefaultUser,
		Shell:    "", // no passwd entry: PTYs get DefaultShell
	}, nil
}

func validate(req Request) error {
	if req.Cmd == "" {
		return fail(ErrInvalid, "cmd is empty")
	}
	return validateCommon(req)
}

// validateCommon checks what processes and PTYs share.
func validateCommon(req Request) error {
	if len(req.Args) > maxArgs || len(req.Envs) > maxEnvs {
		return fail(ErrInvalid, "too many args or envs")
	}
	if !clean(req.Cmd) {
		return fail(ErrInvalid, "cmd contains a NUL byte")
	}
	for _, a := range req.Args {
		if !clean(a) || len(a) > maxArgBytes {
			return fail(ErrInvalid, "an argument contains a NUL byte or is too long")
		}
	}
	for k, v := range req.Envs {
		if !validEnvName(k) || !clean(v) || len(v) > maxArgBytes {
			return fail(ErrInvalid, "invalid environment variable")
		}
	}
	if req.Cwd != nil && (!clean(*req.Cwd) || *req.Cwd == "") {
		return fail(ErrInvalid, "invalid cwd")
	}
	if req.Tag != nil && (len(*req.Tag) > maxTagBytes || !clean(*req.Tag)) {
		return fail(ErrInvalid, "invalid tag")
	}
	if req.Timeout < 0 || req.Timeout > maxTimeout {
		return fail(ErrInvalid, "timeout out of range")
	}
	return nil
}

func clean(s string) bool { return !strings.ContainsRune(s, 0) }

func validEnvName(k string) bool {
	if k == "" || len(k) > 256 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c == '=' || c == 0 {
			return false
		}
	}
	return true
}

// buildEnvWith builds the environment from scratch: PATH, HOME, USER,
// LOGNAME, then defaults, then the sandbox's envs, then the request's;
// later entries win.
func buildEnvWith(id identity.Identity, defaults, sandboxEnvs, reqEnvs map[string]string) []string {
	keys := []string{"PATH", "HOME", "USER", "LOGNAME"}
	vals := map[string]string{"PATH": DefaultPath, "HOME": id.Home, "USER": id.Username, "LOGNAME": id.Username}
	add := func(m map[string]string) {
		for _, k := range sortedKeys(m) {
			if _, ok := vals[k]; !ok {
				keys = append(keys, k)
			}
			vals[k] = m[k]
		}
	}
	add(defaults)
	add(sandboxEnvs)
	add(reqEnvs)
	env := make([]string, 0, len(keys))
	for _, k := range keys {
		env = append(env, k+"="+vals[k])
	}
	return env
}

func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// workdir picks the working directory: the request's cwd (relative to
// HOME when relative), else the
// sandbox's workdir, else HOME, else /. A directory the client or the
// payload named must exist; the default workdir falls back quietly.
func workdir(boot *sandbox.Boot, id identity.Identity, cwd *string) (string, error) {
	if cwd != nil {
		dir := *cwd
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(id.Home, dir)
		}
		if !isDir(dir) {
			return "", fail(ErrCwdNotFound, "cwd is not an existing directory")
		}
		return filepath.Clean(dir), nil
	}
	if boot.WorkdirSet {
		if !isDir(boot.Workdir) {
			return "", fail(ErrCwdNotFound, "the sandbox workdir is not an existing directory")
		}
		return boot.Workdir, nil
	}
	for _, d := range []string{boot.Workdir, id.Home} {
		if d != "" && isDir(d) {
			return d, nil
		}
	}
	return "/", nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Identity resolves username ("" = the sandbox's default user) under the
// same identity rules as Spec, for services that act for a user without
// starting a process (files). Errors wrap this package's sentinels
// with fixed messages (*Error).
func (b *Builder) Identity(boot *sandbox.Boot, username string) (identity.Identity, error) {
	if username == "" {
		username = boot.User
	}
	if !clean(username) {
		return identity.Identity{}, fail(ErrInvalid, "invalid user")
	}
	return b.identity(username)
}
