package template

import (
	"encoding/json"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

// MaxDockerfileLen bounds FromDockerfile's input.
const MaxDockerfileLen = 1 << 20

var (
	readyPortRe = regexp.MustCompile(`^#\s*rayito:\s*ready-port\s*=\s*(\S*)\s*$`)
	escapeDirRe = regexp.MustCompile(`^#\s*(?i:escape)\s*=\s*(\S*)\s*$`)
	// heredocRe is a Dockerfile heredoc opener (<<EOF, <<-"EOF"): Docker
	// reads the lines after it as the heredoc's body.
	heredocRe = regexp.MustCompile(`<<-?\s*["']?[A-Za-z_]`)
)

// FromDockerfile reads a template from a Dockerfile in a strict subset:
//
//   - FROM <image> [AS <name>], exactly once, first;
//   - RUN in shell form or JSON exec form (an exec form is joined into one
//     shell command with quoting; ["/bin/sh", "-c", cmd] is cmd);
//   - COPY [--chown=root|user] <src>... <dst> (shell or JSON form; sources
//     relative to the context, no URLs, no globs; a relative destination
//     is under the current WORKDIR; several sources need a destination
//     ending with '/');
//   - ENV k=v ... and the legacy ENV k v;
//   - WORKDIR <dir>; USER root|user (or 0, 1000, and name:group of the
//     same account);
//   - CMD and ENTRYPOINT: the start command, combined as Docker combines
//     them (JSON forms joined with shell quoting);
//   - EXPOSE: its first TCP port is the start command's ready port, unless
//     a comment "# rayito: ready-port=N" names one (N 0 means none);
//
// with comments, blank lines, backslash line continuations and a leading
// UTF-8 byte order mark. Variable references ($VAR, ${VAR}) are refused
// outside RUN, as is every other instruction (ADD, ARG, LABEL, ONBUILD,
// HEALTHCHECK, VOLUME, SHELL...), a second FROM (multi-stage builds),
// COPY --from and other flags, heredocs and an escape directive other than
// the backslash. Errors are *Error values matching ErrDockerfile, naming
// the line and the instruction.
func FromDockerfile(text string) (*Template, error) {
	if len(text) > MaxDockerfileLen {
		return nil, lineErr(0, "", "the Dockerfile is larger than 1 MiB")
	}
	text = strings.TrimPrefix(text, "\uFEFF")
	if !utf8.ValidString(text) {
		return nil, lineErr(0, "", "the Dockerfile is not UTF-8")
	}
	p := &dfParser{workdir: "/", readyPort: -1}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); {
		lineNo := i + 1
		cur := strings.TrimRight(lines[i], "\r")
		i++
		trimmed := strings.TrimSpace(cur)
		if trimmed == "" {
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			if err := p.comment(lineNo, trimmed); err != nil {
				return nil, err
			}
			continue
		}
		// Join continuation lines: a trailing backslash removes the line
		// break; blank and comment lines inside are dropped, as Docker does.
		var joined strings.Builder
		for {
			t := strings.TrimRightFunc(cur, unicode.IsSpace)
			if !strings.HasSuffix(t, `\`) {
				joined.WriteString(cur)
				break
			}
			joined.WriteString(t[:len(t)-1])
			cur = ""
			for i < len(lines) {
				l := strings.TrimRight(lines[i], "\r")
				i++
				if lt := strings.TrimSpace(l); lt == "" || strings.HasPrefix(lt, "#") {
					continue
				}
				cur = l
				break
			}
			if cur == "" {
				break
			}
		}
		if err := p.instruction(lineNo, strings.TrimSpace(joined.String())); err != nil {
			return nil, err
		}
	}
	return p.finish()
}

// firstWord splits s at its first whitespace; rest is trimmed.
func firstWord(s string) (word, rest string) {
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}

type dfParser struct {
	t          *Template
	workdir    string
	seenInstr  bool
	cmd, entry *dfCommand
	cmdLine    int
	exposePort int
	readyPort  int // from the comment; -1 when none
	readyLine  int
}

// dfCommand is a CMD or ENTRYPOINT: exec form (argv) or shell form.
type dfCommand struct {
	argv  []string
	shell string
	exec  bool
}

func (p *dfParser) comment(line int, c string) error {
	if m := readyPortRe.FindStringSubmatch(c); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 0 || n > 65535 {
			return lineErr(line, "# rayito: ready-port", "must be a port number")
		}
		p.readyPort, p.readyLine = n, line
		return nil
	}
	if m := escapeDirRe.FindStringSubmatch(c); m != nil && !p.seenInstr && m[1] != `\` {
		return lineErr(line, "# escape", "only the backslash escape is supported")
	}
	return nil
}

func (p *dfParser) instruction(line int, text string) error {
	kw, rest := firstWord(text)
	kw = strings.ToUpper(kw)
	first := !p.seenInstr
	p.seenInstr = true
	if kw != "FROM" && first {
		return lineErr(line, instrName(kw), "a Dockerfile starts with FROM")
	}
	switch kw {
	case "FROM":
		return p.from(line, first, rest)
	case "RUN":
		return p.run(line, rest)
	case "COPY":
		return p.copy(line, rest)
	case "ENV":
		return p.env(line, rest)
	case "WORKDIR":
		return p.workdirInstr(line, rest)
	case "USER":
		return p.user(line, rest)
	case "CMD", "ENTRYPOINT":
		return p.command(line, kw, rest)
	case "EXPOSE":
		return p.expose(line, rest)
	}
	if instrName(kw) == "" {
		return lineErr(line, "", "not an instruction")
	}
	return lineErr(line, kw, "instruction not supported")
}

// instrName is kw when it looks like an instruction (up to 16 letters),
// else "": an error names an instruction, never other text of the line.
func instrName(kw string) string {
	if kw == "" || len(kw) > 16 {
		return ""
	}
	for _, r := range kw {
		if r < 'A' || r > 'Z' {
			return ""
		}
	}
	return kw
}

// push makes next (p.t plus the steps of one instruction) current, or
// returns the first mistake the builder recorded for them as an error of
// line.
func (p *dfParser) push(line int, instr string, next *Template) error {
	if len(next.steps) > ptemplate.MaxSteps {
		return lineErr(line, instr, "a template has at most 256 steps")
	}
	if len(next.errs) > len(p.t.errs) {
		e := next.errs[len(p.t.errs)]
		return lineErr(line, instr, e.Reason)
	}
	p.t = next
	return nil
}

func (p *dfParser) from(line int, first bool, rest string) error {
	if !first {
		return lineErr(line, "FROM", "multi-stage builds are not supported")
	}
	words, err := lexWords(rest, true)
	if err != nil {
		return lineErr(line, "FROM", err.Error())
	}
	if len(words) > 0 && strings.HasPrefix(words[0], "--") {
		return lineErr(line, "FROM", "flags are not supported")
	}
	if len(words) != 1 && !(len(words) == 3 && strings.EqualFold(words[1], "AS")) {
		return lineErr(line, "FROM", "must be FROM <image> [AS <name>]")
	}
	t := FromBaseImage(words[0])
	if len(t.errs) > 0 {
		return lineErr(line, "FROM", t.errs[0].Reason)
	}
	p.t = t
	return nil
}

func (p *dfParser) run(line int, rest string) error {
	if strings.HasPrefix(rest, "--") {
		return lineErr(line, "RUN", "flags are not supported")
	}
	if heredocRe.MatchString(rest) {
		return lineErr(line, "RUN", "heredocs are not supported")
	}
	cmd := rest
	if argv, ok := jsonArgs(rest); ok {
		if len(argv) == 0 {
			return lineErr(line, "RUN", "names no command")
		}
		cmd = execToShell(argv)
	}
	return p.push(line, "RUN", p.t.RunCmd(cmd))
}

// execToShell turns an exec form into a /bin/sh -c command: a shell's own
// -c form is its command, anything else is quoted word by word.
func execToShell(argv []string) string {
	if len(argv) == 3 && (argv[0] == "/bin/sh" || argv[0] == "sh") && argv[1] == "-c" {
		return argv[2]
	}
	return shellJoin(argv)
}

// jsonArgs parses Docker's JSON form; ok is false for the shell form (text
// that does not parse as an array of strings, as Docker treats it).
func jsonArgs(rest string) ([]string, bool) {
	if !strings.HasPrefix(rest, "[") {
		return nil, false
	}
	var argv []string
	if err := json.Unmarshal([]byte(rest), &argv); err != nil {
		return nil, false
	}
	return argv, true
}

func (p *dfParser) copy(line int, rest string) error {
	if heredocRe.MatchString(rest) {
		return lineErr(line, "COPY", "heredocs are not supported")
	}
	owner := ""
	for strings.HasPrefix(rest, "--") {
		var flag string
		flag, rest = firstWord(rest)
		name, val, _ := strings.Cut(flag, "=")
		if name != "--chown" {
			return lineErr(line, "COPY", "only the --chown flag is supported")
		}
		o, ok := accountOf(val)
		if !ok {
			return lineErr(line, "COPY", "--chown must be root or user")
		}
		owner = o
	}
	args, ok := jsonArgs(rest)
	if ok {
		for _, a := range args {
			if strings.ContainsAny(a, "$\\\"'") {
				return lineErr(line, "COPY", "quotes, backslashes and variables are not supported in the JSON form")
			}
		}
	} else {
		var err error
		if args, err = lexWords(rest, true); err != nil {
			return lineErr(line, "COPY", err.Error())
		}
	}
	if len(args) < 2 {
		return lineErr(line, "COPY", "needs a source and a destination")
	}
	srcs, dst := args[:len(args)-1], args[len(args)-1]
	intoDir := strings.HasSuffix(dst, "/") || dst == "." || strings.HasSuffix(dst, "/.")
	if len(srcs) > 1 && !intoDir {
		return lineErr(line, "COPY", "with several sources the destination must end with /")
	}
	if !path.IsAbs(dst) {
		dst = path.Join(p.workdir, dst)
	}
	if intoDir && dst != "/" {
		dst += "/"
	}
	for _, src := range srcs {
		if strings.Contains(src, "://") {
			return lineErr(line, "COPY", "URLs are not supported")
		}
		if strings.ContainsAny(src, "*?[]") {
			return lineErr(line, "COPY", "globs are not supported")
		}
		// Docker reads a source as relative to the context even with a
		// leading slash.
		src = strings.TrimLeft(src, "/")
		if src == "" {
			src = "."
		}
		var opts []CopyOption
		if owner != "" {
			opts = append(opts, WithOwner(owner))
		}
		if err := p.push(line, "COPY", p.t.Copy(src, dst, opts...)); err != nil {
			return err
		}
	}
	return nil
}

// accountOf maps a --chown or USER value to one of the two accounts.
func accountOf(v string) (string, bool) {
	name, group, hasGroup := strings.Cut(v, ":")
	acct := map[string]string{"root": UserRoot, "0": UserRoot, "user": UserUser, "1000": UserUser}
	a, ok := acct[name]
	if !ok {
		return "", false
	}
	if hasGroup && acct[group] != a {
		return "", false
	}
	return a, true
}

func (p *dfParser) env(line int, rest string) error {
	envs := map[string]string{}
	firstTok, val := firstWord(rest)
	if !strings.Contains(firstTok, "=") {
		// The legacy form: ENV key value-to-the-end-of-the-line.
		if firstTok == "" || val == "" {
			return lineErr(line, "ENV", "must be ENV key=value or ENV key value")
		}
		words, err := lexWords(val, false)
		if err != nil {
			return lineErr(line, "ENV", err.Error())
		}
		envs[firstTok] = words[0]
	} else {
		words, err := lexWords(rest, true)
		if err != nil {
			return lineErr(line, "ENV", err.Error())
		}
		for _, w := range words {
			k, v, ok := strings.Cut(w, "=")
			if !ok || k == "" {
				return lineErr(line, "ENV", "each word must be key=value")
			}
			envs[k] = v
		}
	}
	return p.push(line, "ENV", p.t.SetEnvs(envs))
}

func (p *dfParser) workdirInstr(line int, rest string) error {
	words, err := lexWords(rest, false)
	if err != nil {
		return lineErr(line, "WORKDIR", err.Error())
	}
	dir := strings.TrimSpace(words[0])
	if dir == "" {
		return lineErr(line, "WORKDIR", "names no directory")
	}
	if !path.IsAbs(dir) {
		dir = path.Join(p.workdir, dir)
	}
	dir = path.Clean(dir)
	if err := p.push(line, "WORKDIR", p.t.Workdir(dir)); err != nil {
		return err
	}
	p.workdir = dir
	return nil
}

func (p *dfParser) user(line int, rest string) error {
	words, err := lexWords(rest, true)
	if err != nil {
		return lineErr(line, "USER", err.Error())
	}
	if len(words) != 1 {
		return lineErr(line, "USER", "must name one account")
	}
	u, ok := accountOf(words[0])
	if !ok {
		return lineErr(line, "USER", "must be root or user")
	}
	return p.push(line, "USER", p.t.SetUser(u))
}

func (p *dfParser) command(line int, kw, rest string) error {
	if rest == "" {
		return lineErr(line, kw, "names no command")
	}
	if heredocRe.MatchString(rest) {
		return lineErr(line, kw, "heredocs are not supported")
	}
	c := &dfCommand{shell: rest}
	if argv, ok := jsonArgs(rest); ok {
		c = &dfCommand{argv: argv, exec: true}
	}
	if kw == "CMD" {
		p.cmd = c
	} else {
		p.entry = c
	}
	p.cmdLine = line
	return nil
}

func (p *dfParser) expose(line int, rest string) error {
	words, err := lexWords(rest, true)
	if err != nil {
		return lineErr(line, "EXPOSE", err.Error())
	}
	if len(words) == 0 {
		return lineErr(line, "EXPOSE", "names no port")
	}
	for _, w := range words {
		port, proto, _ := strings.Cut(w, "/")
		proto = strings.ToLower(proto)
		if proto != "" && proto != "tcp" && proto != "udp" && proto != "sctp" {
			return lineErr(line, "EXPOSE", "must be port[/tcp|udp|sctp]")
		}
		if strings.Contains(port, "-") {
			continue // a range is exposed but is no ready port
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return lineErr(line, "EXPOSE", "must be port[/tcp|udp|sctp]")
		}
		if p.exposePort == 0 && (proto == "" || proto == "tcp") {
			p.exposePort = n
		}
	}
	return nil
}

// finish combines CMD and ENTRYPOINT as Docker does: an exec-form
// ENTRYPOINT takes CMD's words as arguments (a shell-form CMD as
// /bin/sh -c cmd); a shell-form ENTRYPOINT ignores CMD.
func (p *dfParser) finish() (*Template, error) {
	if p.t == nil {
		return nil, lineErr(0, "FROM", "the Dockerfile has no FROM")
	}
	start := ""
	switch {
	case p.entry != nil && !p.entry.exec:
		start = p.entry.shell
	case p.entry != nil:
		argv := p.entry.argv
		if p.cmd != nil && p.cmd.exec {
			argv = append(append([]string(nil), argv...), p.cmd.argv...)
		} else if p.cmd != nil {
			argv = append(append([]string(nil), argv...), "/bin/sh", "-c", p.cmd.shell)
		}
		start = shellJoin(argv)
	case p.cmd != nil && p.cmd.exec:
		start = execToShell(p.cmd.argv)
	case p.cmd != nil:
		start = p.cmd.shell
	}
	port := p.exposePort
	if p.readyPort >= 0 {
		port = p.readyPort
	}
	if start == "" {
		if p.readyPort > 0 {
			return nil, lineErr(p.readyLine, "# rayito: ready-port", "needs a CMD or ENTRYPOINT")
		}
		if p.cmd != nil || p.entry != nil {
			return nil, lineErr(p.cmdLine, "CMD", "names no command")
		}
		return p.t, nil
	}
	t := p.t.SetStartCmd(start, port)
	if len(t.errs) > len(p.t.errs) {
		return nil, lineErr(p.cmdLine, "CMD", t.errs[len(p.t.errs)].Reason)
	}
	return checkSpec(t)
}

// checkSpec refuses a template whose spec proto/template would refuse
// (its encoded size), so what FromDockerfile accepts compiles.
func checkSpec(t *Template) (*Template, error) {
	if _, err := ptemplate.Encode(t.spec(func(string) bool { return false })); err != nil {
		return nil, lineErr(0, "", "the template's spec is too large")
	}
	return t, nil
}

// errVariable and friends are lexWords' errors (fixed texts).
type lexError string

func (e lexError) Error() string { return string(e) }

const (
	errVariable     lexError = "variable references are not supported"
	errUnterminated lexError = "unterminated quote"
)

// lexWords applies Docker's word processing to s: single quotes keep
// everything, double quotes keep everything but a backslash before '"',
// '$' or '\', an unquoted backslash escapes the next character; with
// split, unquoted whitespace separates words. '$' (a variable reference)
// is refused outside single quotes and escapes. Without split the result
// is one word.
func lexWords(s string, split bool) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '\\':
			if i+1 < len(rs) {
				i++
				cur.WriteRune(rs[i])
				inWord = true
			}
		case c == '\'':
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j >= len(rs) {
				return nil, errUnterminated
			}
			cur.WriteString(string(rs[i+1 : j]))
			inWord, i = true, j
		case c == '"':
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				switch {
				case rs[j] == '$':
					return nil, errVariable
				case rs[j] == '\\' && j+1 < len(rs) && strings.ContainsRune(`"$\`, rs[j+1]):
					j++
				}
				cur.WriteRune(rs[j])
			}
			if j >= len(rs) {
				return nil, errUnterminated
			}
			inWord, i = true, j
		case c == '$':
			return nil, errVariable
		case split && unicode.IsSpace(c):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if inWord || !split {
		words = append(words, cur.String())
	}
	return words, nil
}
