package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// InputName is the lock's input: the kernel's top-level packages, each
// name==version.
const InputName = "requirements.in"

var (
	nameSep  = regexp.MustCompile(`[-_.]+`)
	lockReq  = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9,._-]+\])?==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$`)
	lockHash = regexp.MustCompile(`^--hash=sha256:[0-9a-f]{64}$`)
)

// ParseLock reads a hash-pinned requirements lock, as uv pip compile
// --generate-hashes (or pip-compile) writes it: comments, and one
// requirement per logical line (backslash continuations joined), each
// name==version, an optional environment marker after ";", and at least
// one --hash=sha256:<64 hex>. Anything else (an option line such as -e,
// -r or --index-url, a URL or direct reference, a range, a requirement
// without a hash) is an error naming the line. It returns the pinned
// versions by normalized name.
func ParseLock(text string) (map[string]string, error) {
	pins := map[string]string{}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		logical := stripComment(lines[i])
		for strings.HasSuffix(strings.TrimRight(logical, " \t\r"), `\`) && i+1 < len(lines) {
			logical = strings.TrimSuffix(strings.TrimRight(logical, " \t\r"), `\`) + " " + stripComment(lines[i+1])
			i++
		}
		fields := strings.Fields(logical)
		if len(fields) == 0 {
			continue
		}
		where := fmt.Sprintf("line %d", start)
		m := lockReq.FindStringSubmatch(fields[0])
		if m == nil {
			return nil, fmt.Errorf("%s: not name==version", where)
		}
		rest := fields[1:]
		if len(rest) > 0 && strings.HasPrefix(rest[0], ";") {
			// An environment marker runs until the first hash.
			for len(rest) > 0 && !strings.HasPrefix(rest[0], "--hash=") {
				rest = rest[1:]
			}
		}
		if len(rest) == 0 {
			return nil, fmt.Errorf("%s: %s has no --hash=sha256:", where, m[1])
		}
		for _, h := range rest {
			if !lockHash.MatchString(h) {
				return nil, fmt.Errorf("%s: %s: want only --hash=sha256:<64 hex> after the version", where, m[1])
			}
		}
		name := normalizeName(m[1])
		if v, dup := pins[name]; dup && v != m[3] {
			return nil, fmt.Errorf("%s: %s pinned twice", where, m[1])
		}
		pins[name] = m[3]
	}
	if len(pins) == 0 {
		return nil, errors.New("no packages")
	}
	return pins, nil
}

// stripComment drops a comment: a # at the start or after whitespace.
func stripComment(l string) string {
	for i := 0; i < len(l); i++ {
		if l[i] == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t') {
			return l[:i]
		}
	}
	return l
}

// normalizeName is PEP 503's: lower case, runs of -_. as one -.
func normalizeName(n string) string {
	return nameSep.ReplaceAllString(strings.ToLower(n), "-")
}

// checkLock checks the source directory's lock against its input: the
// lock parses (ParseLock) and pins every package of requirements.in (when
// there is one) at the version the input names.
func checkLock(srcDir string) error {
	p := filepath.Join(srcDir, LockName)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return &LockError{Path: p, Reason: "missing"}
	}
	if err != nil {
		return &LockError{Path: p, Reason: "unreadable"}
	}
	pins, err := ParseLock(string(b))
	if err != nil {
		return &LockError{Path: p, Reason: err.Error()}
	}
	in, err := os.ReadFile(filepath.Join(srcDir, InputName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &LockError{Path: filepath.Join(srcDir, InputName), Reason: "unreadable"}
	}
	for n, l := range strings.Split(string(in), "\n") {
		f := strings.Fields(stripComment(l))
		if len(f) == 0 {
			continue
		}
		m := lockReq.FindStringSubmatch(f[0])
		if m == nil || len(f) > 1 {
			return &LockError{Path: filepath.Join(srcDir, InputName), Reason: fmt.Sprintf("line %d: not name==version", n+1)}
		}
		if got := pins[normalizeName(m[1])]; got != m[3] {
			return &LockError{Path: p, Reason: fmt.Sprintf("does not pin %s==%s (from %s): make it again", m[1], m[3], InputName)}
		}
	}
	return nil
}
