package launch

import (
	"os"
	"path/filepath"

	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

// PTY defaults.
const (
	// Term is the TERM of every PTY, unless the sandbox's or the request's
	// envs set another.
	Term = "xterm-256color"
	// MaxPTYSize bounds the columns and rows of a PTY.
	MaxPTYSize = 4096
)

// fallbackShells are tried in order when the user has no usable shell.
var fallbackShells = []string{"/bin/bash", "/bin/sh"}

// PTYSpec validates req and returns the spec of a login shell on a PTY of
// cols x rows (zero fields: 80x24): req.Shell, else the user's shell from
// the account database, else /bin/bash if it exists, else /bin/sh. The
// shell starts as a login shell (argv[0] is "-" and its base name, e.g.
// "-bash"). Identity, environment (plus TERM=xterm-256color, which the
// sandbox's or the request's envs may override) and working directory
// follow the same rules as Spec. req.Cmd, req.Args, req.Stdin and req.Tag
// are ignored.
func (b *Builder) PTYSpec(boot *sandbox.Boot, req Request, cols, rows uint16) (proc.Spec, error) {
	req.Cmd, req.Args, req.Stdin, req.Tag = "", nil, false, nil
	if err := validateCommon(req); err != nil {
		return proc.Spec{}, err
	}
	if cols > MaxPTYSize || rows > MaxPTYSize {
		return proc.Spec{}, fail(ErrInvalid, "size out of range: 1..4096 columns and rows")
	}
	if req.Shell != nil && (*req.Shell == "" || !clean(*req.Shell) || len(*req.Shell) > maxArgBytes) {
		return proc.Spec{}, fail(ErrInvalid, "invalid shell")
	}
	username := req.User
	if username == "" {
		username = boot.User
	}
	id, err := b.identity(username)
	if err != nil {
		return proc.Spec{}, err
	}
	env := buildEnvWith(id, b.extraEnv(map[string]string{"TERM": Term}), boot.Envs, req.Envs)
	dir, err := workdir(boot, id, req.Cwd)
	if err != nil {
		return proc.Spec{}, err
	}
	var path string
	if req.Shell != nil {
		path, err = proc.LookPath(*req.Shell, lookupEnv(env, "PATH"), dir)
		if err != nil {
			return proc.Spec{}, lookPathErr(err, "shell not found")
		}
	} else {
		path = loginShell(id.Shell)
	}
	spec := proc.Spec{
		Path:    path,
		Args:    []string{"-" + filepath.Base(path)},
		Env:     env,
		Dir:     dir,
		Timeout: req.Timeout,
		PTY:     &proc.PTYConfig{Cols: cols, Rows: rows},
	}
	if b.Privileged {
		spec.Identity = &id
	}
	return spec, nil
}

// loginShell returns the account's shell when it is an absolute path to an
// executable that lets one log in, otherwise the first fallback shell that
// exists. nologin and false would only print a refusal and exit: a sandbox
// user asking for a terminal gets a working shell instead.
func loginShell(shell string) string {
	switch filepath.Base(shell) {
	case "nologin", "false":
		shell = ""
	}
	if shell != "" && filepath.IsAbs(shell) && executable(shell) {
		return shell
	}
	for _, s := range fallbackShells {
		if executable(s) {
			return s
		}
	}
	return fallbackShells[len(fallbackShells)-1]
}

func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
