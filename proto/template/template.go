// Package template defines version 1 of a template's build specification:
// the JSON document (SpecName) the SDK writes into a template's artifact
// beside its Dockerfile and its copied files, and that the local platform
// reads to build the template's root filesystem layer.
//
// An artifact is a zip with, at its root:
//
//	Dockerfile      the template as a Dockerfile layer (what AWS builds)
//	template.json   this Spec (what the local platform builds)
//	context/...     the files Copy steps name (ContextDir)
//
// A Spec is a base and an ordered list of steps, each exactly one of run,
// copy, env, workdir or user, plus an optional start command. Steps run in
// order as the user and in the directory the steps before them set (root
// and / at first, as in a Dockerfile); the environment, directory and user
// in force after the last step are the sandbox's defaults.
//
// Decode is strict (size cap, unknown fields, trailing data, every rule of
// Validate) and its errors name the step and field, never a value.
package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
)

// Version is the only spec version this package understands.
const Version = 1

// Artifact layout.
const (
	// SpecName is the spec's file name at the artifact's root.
	SpecName = "template.json"
	// DockerfileName is the Dockerfile at the artifact's root.
	DockerfileName = "Dockerfile"
	// ContextDir is the directory of copied files in the artifact; a Copy
	// step's Src is relative to it.
	ContextDir = "context/"
)

// Limits.
const (
	MaxSpecLen     = 1 << 20 // encoded spec, bytes
	MaxSteps       = 256
	MaxRunLen      = 64 << 10 // one run command, bytes
	MaxPathLen     = 4096
	MaxEnvs        = 256 // per env step
	MaxEnvKeyLen   = 256
	MaxEnvValueLen = 4096
	MaxNameLen     = 48 // a template name; with a "-8192mb"-style size suffix it stays within 64
)

// Users a step or the sandbox may run as: the two accounts every sandbox
// has.
const (
	UserRoot = "root"
	UserUser = "user"
)

// Spec is a template's build specification.
type Spec struct {
	V     int    `json:"v"`
	Base  string `json:"base"`
	Steps []Step `json:"steps"`
	Start *Start `json:"start,omitempty"`
}

// Step is one build step: exactly one field is set.
type Step struct {
	// Run is a shell command run with /bin/sh -c.
	Run string `json:"run,omitempty"`
	// Copy copies a file or a directory tree of the context.
	Copy *Copy `json:"copy,omitempty"`
	// Env sets environment variables for the steps after it and the
	// sandbox.
	Env map[string]string `json:"env,omitempty"`
	// Workdir sets the directory of the steps after it and the sandbox's
	// (created when missing).
	Workdir string `json:"workdir,omitempty"`
	// User sets the account of the steps after it and the sandbox's.
	User string `json:"user,omitempty"`
}

// Copy is a copy step.
type Copy struct {
	// Src is a slash-separated, clean, relative path under ContextDir
	// ("." for the whole context).
	Src string `json:"src"`
	// Dst is an absolute, clean path in the image.
	Dst string `json:"dst"`
	// Owner is the account owning what is copied (default root).
	Owner string `json:"owner,omitempty"`
}

// Start is the command a sandbox of the template starts with.
type Start struct {
	// Cmd is a shell command, run with /bin/sh -c as the sandbox's user in
	// its directory with its environment.
	Cmd string `json:"cmd"`
	// ReadyPort, when not 0, is a TCP port on loopback the sandbox is not
	// ready before something listens on.
	ReadyPort int `json:"ready_port,omitempty"`
}

// Config is what a sandbox of the template starts with: the state after
// the last step.
type Config struct {
	Envs    map[string]string
	Workdir string
	User    string
}

// ErrInvalid is wrapped by every error of Decode and Validate.
var ErrInvalid = errors.New("invalid template spec")

var (
	nameRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	envKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	baseRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$`)
)

// ValidName reports whether name can name a template: 1 to MaxNameLen of
// a-z, 0-9, '-' and '_', starting with a letter or digit.
func ValidName(name string) bool {
	return len(name) > 0 && len(name) <= MaxNameLen && nameRe.MatchString(name)
}

// ValidEnvKey reports whether k can name an environment variable.
func ValidEnvKey(k string) bool { return len(k) <= MaxEnvKeyLen && envKeyRe.MatchString(k) }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks every rule of the spec.
func (s *Spec) Validate() error {
	if s.V != Version {
		return invalid("v must be %d", Version)
	}
	if s.Base == "" || len(s.Base) > 2048 || !baseRe.MatchString(s.Base) {
		return invalid("base must be a template name or an image reference")
	}
	if len(s.Steps) > MaxSteps {
		return invalid("at most %d steps", MaxSteps)
	}
	for i, st := range s.Steps {
		if err := st.validate(); err != nil {
			return fmt.Errorf("%w: steps[%d]: %w", ErrInvalid, i, err)
		}
	}
	if s.Start != nil {
		if s.Start.Cmd == "" || len(s.Start.Cmd) > MaxRunLen || !printable(s.Start.Cmd) {
			return invalid("start.cmd must be 1 to %d bytes of text", MaxRunLen)
		}
		if s.Start.ReadyPort < 0 || s.Start.ReadyPort > 65535 {
			return invalid("start.ready_port must be between 0 and 65535")
		}
	}
	return nil
}

func (st *Step) validate() error {
	n := 0
	if st.Run != "" {
		n++
	}
	if st.Copy != nil {
		n++
	}
	if st.Env != nil {
		n++
	}
	if st.Workdir != "" {
		n++
	}
	if st.User != "" {
		n++
	}
	if n != 1 {
		return errors.New("a step sets exactly one of run, copy, env, workdir, user")
	}
	switch {
	case st.Run != "":
		if len(st.Run) > MaxRunLen || !printable(st.Run) {
			return fmt.Errorf("run must be at most %d bytes of text", MaxRunLen)
		}
	case st.Copy != nil:
		if !ValidSrc(st.Copy.Src) {
			return errors.New("copy.src must be a clean relative path inside the context")
		}
		if !ValidAbs(st.Copy.Dst) {
			return errors.New("copy.dst must be a clean absolute path")
		}
		if st.Copy.Owner != "" && !validUser(st.Copy.Owner) {
			return errors.New("copy.owner must be root or user")
		}
	case st.Env != nil:
		if len(st.Env) == 0 || len(st.Env) > MaxEnvs {
			return fmt.Errorf("env must set 1 to %d variables", MaxEnvs)
		}
		for k, v := range st.Env {
			if !ValidEnvKey(k) {
				return errors.New("env has a name that is not a variable name")
			}
			if len(v) > MaxEnvValueLen || strings.ContainsRune(v, 0) {
				return fmt.Errorf("env values must be at most %d bytes without NUL", MaxEnvValueLen)
			}
		}
	case st.Workdir != "":
		if !ValidAbs(st.Workdir) {
			return errors.New("workdir must be a clean absolute path")
		}
	case st.User != "":
		if !validUser(st.User) {
			return errors.New("user must be root or user")
		}
	}
	return nil
}

func validUser(u string) bool { return u == UserRoot || u == UserUser }

// printable: no NUL (a command is passed as one argument).
func printable(s string) bool { return !strings.ContainsRune(s, 0) }

// ValidSrc reports whether p is a clean, slash-separated path relative to
// the context: "." or names without "..", empty or absolute parts.
func ValidSrc(p string) bool {
	if p == "" || len(p) > MaxPathLen || strings.ContainsAny(p, "\x00\\") {
		return false
	}
	if p == "." {
		return true
	}
	if path.IsAbs(p) || path.Clean(p) != p {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." || part == "" {
			return false
		}
	}
	return true
}

// ValidAbs reports whether p is a clean absolute path without NUL.
func ValidAbs(p string) bool {
	return p != "" && len(p) <= MaxPathLen && path.IsAbs(p) && path.Clean(p) == p && !strings.ContainsRune(p, 0)
}

// Config is the state after the last step: the environment, directory and
// user a sandbox of the template starts with (defaults: no variables,
// /home/user, user "user" — the sandbox's defaults, not the build's).
func (s *Spec) Config() Config {
	c := Config{Envs: map[string]string{}}
	for _, st := range s.Steps {
		switch {
		case st.Env != nil:
			for k, v := range st.Env {
				c.Envs[k] = v
			}
		case st.Workdir != "":
			c.Workdir = st.Workdir
		case st.User != "":
			c.User = st.User
		}
	}
	if c.Workdir == "" {
		c.Workdir = "/home/user"
	}
	if c.User == "" {
		c.User = UserUser
	}
	return c
}

// Encode returns the spec's JSON after validating it.
func Encode(s *Spec) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, invalid("cannot encode")
	}
	if len(b) > MaxSpecLen {
		return nil, invalid("the spec is larger than %d bytes", MaxSpecLen)
	}
	return b, nil
}

// Decode parses and validates a spec.
func Decode(b []byte) (*Spec, error) {
	if len(b) > MaxSpecLen {
		return nil, invalid("the spec is larger than %d bytes", MaxSpecLen)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, invalid("not a spec object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("trailing data after the spec")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// RuntimePath is where a sandbox's root filesystem holds the template's
// runtime configuration (Runtime): rayd reads it at start.
const RuntimePath = "/etc/rayito/template.json"

// Runtime is what rayd needs of a template: the defaults its sandboxes
// start with and the start command. The run payload's envs, user and
// workdir win over these defaults.
type Runtime struct {
	V       int               `json:"v"`
	Name    string            `json:"name"`
	Envs    map[string]string `json:"envs,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	User    string            `json:"user,omitempty"`
	Start   *Start            `json:"start,omitempty"`
}

// RuntimeOf is the runtime configuration of a template named name built
// from s.
func RuntimeOf(name string, s *Spec) *Runtime {
	c := s.Config()
	r := &Runtime{V: Version, Name: name, Workdir: c.Workdir, User: c.User}
	if len(c.Envs) > 0 {
		r.Envs = c.Envs
	}
	if s.Start != nil {
		st := *s.Start
		r.Start = &st
	}
	return r
}

// Validate checks every rule of the runtime configuration.
func (r *Runtime) Validate() error {
	if r.V != Version {
		return invalid("v must be %d", Version)
	}
	if !ValidName(r.Name) {
		return invalid("name must be a template name")
	}
	steps := []Step{{Workdir: r.Workdir}, {User: r.User}}
	if len(r.Envs) > 0 {
		steps = append(steps, Step{Env: r.Envs})
	}
	s := Spec{V: Version, Base: "runtime", Steps: steps, Start: r.Start}
	return s.Validate()
}

// DecodeRuntime parses and validates a runtime configuration.
func DecodeRuntime(b []byte) (*Runtime, error) {
	if len(b) > MaxSpecLen {
		return nil, invalid("the runtime configuration is larger than %d bytes", MaxSpecLen)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Runtime
	if err := dec.Decode(&r); err != nil {
		return nil, invalid("not a runtime object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("trailing data after the runtime configuration")
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// EncodeRuntime returns the runtime configuration's JSON after validating
// it.
func EncodeRuntime(r *Runtime) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, invalid("cannot encode")
	}
	return b, nil
}
