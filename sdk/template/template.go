package template

import (
	"maps"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

// Users a step, a copy's owner or the sandbox may run as.
const (
	UserRoot = ptemplate.UserRoot
	UserUser = ptemplate.UserUser
)

// Template is an immutable template definition: every method returns a
// new *Template and leaves its receiver unchanged, so a Template can be
// shared and extended from several places. Mistakes are not reported by
// the methods: they are collected and returned by Compile.
type Template struct {
	base  string
	steps []step
	start *ptemplate.Start
	errs  []*Error
}

// step is one builder step: exactly one field is set.
type step struct {
	run     string
	copy    *copyStep
	env     map[string]string
	workdir string
	user    string
}

// copyStep is a Copy before Compile knows whether its source is a file or
// a directory: intoDir (a destination written with a trailing slash)
// means a file source lands at dst/<its name>, as in a Dockerfile.
type copyStep struct {
	src, dst, owner string
	intoDir         bool
}

// CopyOption configures one Copy.
type CopyOption interface{ applyCopy(*copyConfig) }

type copyConfig struct{ owner string }

type copyOption func(*copyConfig)

func (f copyOption) applyCopy(c *copyConfig) { f(c) }

// WithOwner makes user (UserRoot or UserUser) the owner of what a Copy
// copies; the default is root, as in a Dockerfile.
func WithOwner(user string) CopyOption {
	return copyOption(func(c *copyConfig) { c.owner = user })
}

// FromBaseImage starts a template from base: an image reference
// ("python:3.12-slim", "ubuntu@sha256:...") or the name of another
// template.
func FromBaseImage(base string) *Template {
	t := &Template{base: base}
	if err := (&ptemplate.Spec{V: ptemplate.Version, Base: base}).Validate(); err != nil {
		t.errs = append(t.errs, stepErr(-1, "base", "must be a template name or an image reference"))
	}
	return t
}

// orEmpty lets the methods of a nil *Template report a mistake instead of
// panicking.
func (t *Template) orEmpty() *Template {
	if t == nil {
		return &Template{errs: []*Error{stepErr(-1, "base", "no base image: start with FromBaseImage")}}
	}
	return t
}

// with returns a copy of t with s appended and errs recorded.
func (t *Template) with(s step, errs ...*Error) *Template {
	t = t.orEmpty()
	return &Template{
		base:  t.base,
		steps: append(slices.Clip(t.steps), s),
		start: t.start,
		errs:  append(slices.Clip(t.errs), errs...),
	}
}

func (t *Template) next() int { return len(t.orEmpty().steps) }

// Copy copies src, a file or directory relative to the build context
// directory, to dst, an absolute path in the image. A directory's
// contents go into dst; a file becomes dst, or dst/<its name> when dst
// ends with a slash. The context's .dockerignore applies; symbolic links
// are never followed (see the package documentation). Glob characters
// (*, ?, [, ]) are refused in src, and quotes, backslashes, '$' and
// control characters in both paths (the Dockerfile layer could not write
// them unambiguously).
func (t *Template) Copy(src, dst string, opts ...CopyOption) *Template {
	var c copyConfig
	for _, o := range opts {
		o.applyCopy(&c)
	}
	i := t.next()
	cs, errs := newCopy(i, src, dst, c.owner)
	return t.with(step{copy: cs}, errs...)
}

func newCopy(i int, src, dst, owner string) (*copyStep, []*Error) {
	var errs []*Error
	cs := &copyStep{owner: owner}
	if src != "" && !strings.HasPrefix(src, "/") {
		cs.src = path.Clean(src)
	}
	if !ptemplate.ValidSrc(cs.src) || strings.ContainsAny(cs.src, "*?[]") || !layerPath(cs.src) {
		errs = append(errs, stepErr(i, "copy.src", "must be a relative path inside the context, without glob, quote, $ or control characters"))
	}
	cs.intoDir = strings.HasSuffix(dst, "/")
	cs.dst = path.Clean(dst)
	if !strings.HasPrefix(dst, "/") || !ptemplate.ValidAbs(cs.dst) || !layerPath(cs.dst) {
		errs = append(errs, stepErr(i, "copy.dst", "must be an absolute path without quote, $ or control characters"))
	}
	if owner != "" && owner != UserRoot && owner != UserUser {
		errs = append(errs, stepErr(i, "copy.owner", "must be root or user"))
	}
	return cs, errs
}

// RunCmd runs cmd with /bin/sh -c as the current user in the current
// directory.
func (t *Template) RunCmd(cmd string) *Template {
	return t.with(step{run: cmd}, checkRun(t.next(), "run", cmd)...)
}

func checkRun(i int, field, cmd string) []*Error {
	if !validCmd(cmd) {
		return []*Error{stepErr(i, field, "must be 1 to 65536 bytes of UTF-8 without NUL")}
	}
	return nil
}

// PipInstall installs Python packages: a run step
// "python3 -m pip install --no-cache-dir 'pkg'...". A package is a name
// with an optional extra and version specifier ("numpy", "pandas>=2",
// "uvicorn[standard]==0.30.*"); options (a leading '-'), whitespace,
// quotes and other shell metacharacters are refused.
func (t *Template) PipInstall(pkgs ...string) *Template {
	i := t.next()
	var errs []*Error
	if len(pkgs) == 0 {
		errs = append(errs, stepErr(i, "pip_install", "names no package"))
	}
	var b strings.Builder
	b.WriteString("python3 -m pip install --no-cache-dir")
	for _, p := range pkgs {
		if !validPipPackage(p) {
			errs = append(errs, stepErr(i, "pip_install", "a package must be a name with an optional version specifier, without options or shell characters"))
			break
		}
		b.WriteString(" '")
		b.WriteString(p)
		b.WriteString("'")
	}
	cmd := b.String()
	if len(errs) == 0 {
		errs = checkRun(i, "pip_install", cmd)
	}
	return t.with(step{run: cmd}, errs...)
}

// validPipPackage: a requirement specifier's characters only. Each
// package is single-quoted in the command, so '<', '>' and '!' of version
// specifiers are safe; the quote itself and every other shell character
// are refused.
func validPipPackage(p string) bool {
	if p == "" || len(p) > 512 || p[0] == '-' {
		return false
	}
	for _, r := range p {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("._-[],<>=!~+:/@*", r):
		default:
			return false
		}
	}
	return true
}

// SetEnvs sets environment variables for the steps after it and for the
// template's sandboxes. An empty map changes nothing. Values may not hold
// control characters other than tab (the Dockerfile layer could not carry
// them).
func (t *Template) SetEnvs(envs map[string]string) *Template {
	if len(envs) == 0 {
		return t.clone()
	}
	i := t.next()
	var errs []*Error
	if len(envs) > ptemplate.MaxEnvs {
		errs = append(errs, stepErr(i, "env", "sets more than 256 variables"))
	}
	for _, k := range slices.Sorted(maps.Keys(envs)) {
		if !ptemplate.ValidEnvKey(k) {
			errs = append(errs, stepErr(i, "env", "has a name that is not a variable name"))
			break
		}
		if v := envs[k]; len(v) > ptemplate.MaxEnvValueLen || !plainText(v) {
			errs = append(errs, stepErr(i, "env", "has a value longer than 4096 bytes or with control characters"))
			break
		}
	}
	return t.with(step{env: maps.Clone(envs)}, errs...)
}

// clone returns an unchanged copy of t (a no-op call still returns a new
// value).
func (t *Template) clone() *Template {
	t = t.orEmpty()
	n := *t
	return &n
}

// Workdir sets the directory (absolute, created when missing) of the
// steps after it and of the template's sandboxes.
func (t *Template) Workdir(dir string) *Template {
	i := t.next()
	var errs []*Error
	if !ptemplate.ValidAbs(dir) || !layerPath(dir) {
		errs = append(errs, stepErr(i, "workdir", "must be a clean absolute path without quote, $ or control characters"))
	}
	return t.with(step{workdir: dir}, errs...)
}

// SetUser sets the account (UserRoot or UserUser) of the steps after it
// and of the template's sandboxes.
func (t *Template) SetUser(user string) *Template {
	i := t.next()
	var errs []*Error
	if user != UserRoot && user != UserUser {
		errs = append(errs, stepErr(i, "user", "must be root or user"))
	}
	return t.with(step{user: user}, errs...)
}

// SetStartCmd sets the command a sandbox of the template starts with (run
// with /bin/sh -c as the sandbox's user, in its directory, with its
// environment); when waitForPort is not 0 the sandbox is not ready before
// something listens on that TCP port. A later call replaces an earlier
// one.
func (t *Template) SetStartCmd(cmd string, waitForPort int) *Template {
	n := t.clone()
	n.errs = slices.Clip(n.errs)
	if !validCmd(cmd) {
		n.errs = append(n.errs, stepErr(-1, "start.cmd", "must be 1 to 65536 bytes of UTF-8 without NUL"))
	}
	if waitForPort < 0 || waitForPort > 65535 {
		n.errs = append(n.errs, stepErr(-1, "start.ready_port", "must be between 0 and 65535"))
	}
	n.start = &ptemplate.Start{Cmd: cmd, ReadyPort: waitForPort}
	return n
}

func validCmd(cmd string) bool {
	return cmd != "" && len(cmd) <= ptemplate.MaxRunLen && !strings.ContainsRune(cmd, 0) && utf8.ValidString(cmd)
}

// layerPath reports whether p can be written in the Dockerfile layer
// without quoting: Docker's word processing gives quotes, backslashes
// and '$' a meaning even in the JSON form of COPY.
func layerPath(p string) bool { return plainText(p) && !strings.ContainsAny(p, "\"'$\\") }

// plainText reports whether s is UTF-8 without control characters but
// tab (paths and values the Dockerfile layer writes on one line).
func plainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// Err returns the mistakes recorded so far (errors.Join of *Error), or
// nil. Compile returns the same and more (limits, the context).
func (t *Template) Err() error {
	t = t.orEmpty()
	return joinErrs(t.errs)
}

func joinErrs(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return joinedError{all}
}

// joinedError is errors.Join's shape with one message per line.
type joinedError struct{ errs []error }

func (j joinedError) Error() string {
	msgs := make([]string, len(j.errs))
	for i, e := range j.errs {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

func (j joinedError) Unwrap() []error { return j.errs }

// spec turns t into a build spec; isDir tells whether a copy source is a
// directory (Compile asks the context).
func (t *Template) spec(isDir func(src string) bool) *ptemplate.Spec {
	s := &ptemplate.Spec{V: ptemplate.Version, Base: t.base, Steps: make([]ptemplate.Step, 0, len(t.steps))}
	for _, st := range t.steps {
		switch {
		case st.copy != nil:
			dst := st.copy.dst
			if st.copy.intoDir && !isDir(st.copy.src) {
				dst = path.Join(dst, path.Base(st.copy.src))
			}
			s.Steps = append(s.Steps, ptemplate.Step{Copy: &ptemplate.Copy{Src: st.copy.src, Dst: dst, Owner: st.copy.owner}})
		case st.env != nil:
			s.Steps = append(s.Steps, ptemplate.Step{Env: maps.Clone(st.env)})
		default:
			s.Steps = append(s.Steps, ptemplate.Step{Run: st.run, Workdir: st.workdir, User: st.user})
		}
	}
	if t.start != nil {
		st := *t.start
		s.Start = &st
	}
	return s
}
