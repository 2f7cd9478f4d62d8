package sudo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// NotAllowed is what sudo says in a sandbox that does not allow root.
const NotAllowed = "sudo: root is not allowed in this sandbox: only a sandbox made from a template that allows root (the local platform's local-root; with the E2B gateway, --template base=local-root) has sudo. Run the command as this user, or create the sandbox from such a template."

const usage = `usage: sudo [-EHins] [-u user] [-D directory] [--preserve-env=list] [VAR=value] [--] command [arg ...]
       sudo -i | -s [-u user] [command [arg ...]]
       sudo -v | -k | -K | -l | -h | -V
Rayito's sudo: in a sandbox that allows root, runs a command as root (or
-u user) without a password, through the sandbox's daemon.
`

// options is sudo's command line as parsed.
type options struct {
	req                            Request
	help, version, validate, list  bool
	invalidate, removeTimestamp    bool
	nonInteractive, setHome, stdin bool
}

// parseArgs parses sudo's options (getopt style: bundled short options,
// long options with = or a separate argument, -- ending them) and the
// VAR=value operands before the command.
func parseArgs(args []string) (*options, error) {
	o := &options{}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		var err error
		if strings.HasPrefix(a, "--") {
			err = o.parseLong(args, &i)
		} else {
			err = o.parseShort(args, &i)
		}
		if err != nil {
			return nil, err
		}
	}
	rest := args[i:]
	for len(rest) > 0 {
		k, _, ok := strings.Cut(rest[0], "=")
		if !ok || !validName(k) {
			break
		}
		o.req.SetEnv = append(o.req.SetEnv, rest[0])
		rest = rest[1:]
	}
	o.req.Args = rest
	if o.req.Login && o.req.Shell {
		return nil, errors.New("you may not specify both the -i and -s options")
	}
	return o, nil
}

// shortOptions are the long names of sudo's short options.
var shortOptions = map[byte]string{
	'u': "user", 'D': "chdir", 'p': "prompt", 'C': "close-from",
	'E': "preserve-env", 'i': "login", 's': "shell", 'H': "set-home",
	'n': "non-interactive", 'S': "stdin", 'k': "reset-timestamp",
	'K': "remove-timestamp", 'v': "validate", 'l': "list", 'h': "help",
	'V': "version", 'A': "askpass", 'B': "bell", 'P': "preserve-groups",
}

// takesArg says whether the option named long takes an argument.
func takesArg(long string) bool {
	switch long {
	case "user", "chdir", "prompt", "close-from":
		return true
	}
	return false
}

// setArg sets the option named long (one that takesArg) to v; a prompt
// and close-from are accepted and ignored.
func (o *options) setArg(long, v string) {
	switch long {
	case "user":
		o.req.User = v
	case "chdir":
		o.req.Chdir = v
	}
}

// setFlag sets the option without an argument named long, false when
// there is none; askpass, bell and preserve-groups are accepted and
// ignored.
func (o *options) setFlag(long string) bool {
	switch long {
	case "preserve-env":
		o.req.PreserveEnv = true
	case "login":
		o.req.Login = true
	case "shell":
		o.req.Shell = true
	case "set-home":
		o.setHome = true
	case "non-interactive":
		o.nonInteractive = true
	case "stdin":
		o.stdin = true
	case "reset-timestamp":
		o.invalidate = true
	case "remove-timestamp":
		o.removeTimestamp = true
	case "validate":
		o.validate = true
	case "list":
		o.list = true
	case "help":
		o.help = true
	case "version":
		o.version = true
	case "askpass", "bell", "preserve-groups":
	default:
		return false
	}
	return true
}

// needArg is the argument after args[*i], which it moves past, for the
// option name.
func needArg(args []string, i *int, name string) (string, error) {
	*i++
	if *i >= len(args) {
		return "", fmt.Errorf("option requires an argument -- '%s'", name)
	}
	return args[*i], nil
}

// parseLong parses the long option args[*i] (--name, --name=value or
// --name value, which moves *i on).
func (o *options) parseLong(args []string, i *int) error {
	name, val, hasVal := strings.Cut(args[*i][2:], "=")
	switch {
	case name == "preserve-env" && hasVal:
		o.req.Preserve = append(o.req.Preserve, splitList(val)...)
	case takesArg(name):
		if !hasVal {
			v, err := needArg(args, i, name)
			if err != nil {
				return err
			}
			val = v
		}
		o.setArg(name, val)
	case !o.setFlag(name):
		return fmt.Errorf("option --%s is not supported by Rayito's sudo", name)
	}
	return nil
}

// parseShort parses the bundled short options args[*i]; an option's
// argument is the rest of the word, else the next one (which moves *i
// on).
func (o *options) parseShort(args []string, i *int) error {
	a := args[*i]
	for j := 1; j < len(a); j++ {
		c := a[j]
		long, ok := shortOptions[c]
		switch {
		case !ok:
			return fmt.Errorf("option -%c is not supported by Rayito's sudo", c)
		case takesArg(long):
			v := a[j+1:]
			if v == "" {
				var err error
				if v, err = needArg(args, i, string(c)); err != nil {
					return err
				}
			}
			o.setArg(long, v)
			return nil
		default:
			o.setFlag(long)
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Main is the sudo program: args without the program name. It returns
// the exit code (the command's, or 1 when sudo itself fails); a command
// killed by a signal kills the client with the same signal when it can.
func Main(args []string, stdout, stderr io.Writer) int {
	cwd, _ := os.Getwd()
	code, sig := run(client{socket: SocketPath, fds: [3]int{0, 1, 2}, env: os.Environ(), cwd: cwd}, args, stdout, stderr)
	if sig != 0 && sig != syscall.SIGKILL && sig != syscall.SIGSTOP {
		// As sudo does: die of the same signal, so that the shell sees it.
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
	}
	return code
}

// client is where a sudo client runs: the socket it asks, the
// descriptors it passes as the command's 0, 1 and 2, its environment and
// working directory.
type client struct {
	socket string
	fds    [3]int
	env    []string
	cwd    string
	// signals, when set, replaces the process's own signals (tests).
	signals chan os.Signal
}

// run is Main for c: the exit code, and the signal that killed the
// command (0 if none).
func run(c client, args []string, stdout, stderr io.Writer) (int, syscall.Signal) {
	o, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "sudo: %v\n%s", err, usage)
		return 1, 0
	}
	switch {
	case o.help:
		fmt.Fprint(stdout, usage)
		return 0, 0
	case o.version:
		fmt.Fprintln(stdout, "Sudo version 1.9 (Rayito's sudo: through the sandbox's daemon, no setuid)")
		return 0, 0
	}
	if len(o.req.Args) == 0 && !o.req.Login && !o.req.Shell {
		if o.invalidate || o.removeTimestamp {
			return 0, 0 // there is no timestamp to reset
		}
		if !o.validate && !o.list {
			fmt.Fprint(stderr, usage)
			return 1, 0
		}
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: c.socket, Net: "unix"})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrPermission) {
			fmt.Fprintln(stderr, NotAllowed)
		} else {
			fmt.Fprintf(stderr, "sudo: cannot reach the sandbox's daemon: %v\n", err)
		}
		return 1, 0
	}
	defer conn.Close()
	switch {
	case o.list && len(o.req.Args) > 0:
		fmt.Fprintln(stdout, strings.Join(o.req.Args, " "))
		return 0, 0
	case o.list:
		u := os.Getenv("USER")
		if u == "" {
			u = fmt.Sprint(os.Getuid())
		}
		fmt.Fprintf(stdout, "User %s may run the following commands on this sandbox:\n    (ALL : ALL) NOPASSWD: ALL\n", u)
		return 0, 0
	case o.validate:
		return 0, 0
	}
	o.req.Env, o.req.Cwd = c.env, c.cwd
	body, err := json.Marshal(&o.req)
	if err != nil || len(body) > maxRequest {
		fmt.Fprintln(stderr, "sudo: the command and its environment are too large")
		return 1, 0
	}
	if _, _, err := conn.WriteMsgUnix(header(len(body)), unix.UnixRights(c.fds[:]...), nil); err != nil {
		fmt.Fprintf(stderr, "sudo: cannot reach the sandbox's daemon: %v\n", err)
		return 1, 0
	}
	if _, err := conn.Write(body); err != nil {
		fmt.Fprintf(stderr, "sudo: cannot reach the sandbox's daemon: %v\n", err)
		return 1, 0
	}
	// Signals for the command: it runs in its own process group, outside
	// the terminal's, so a Ctrl-C reaches this client, which passes it on.
	sigs := c.signals
	if sigs == nil {
		sigs = make(chan os.Signal, 8)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGALRM)
		defer signal.Stop(sigs)
	}
	go func() {
		enc := json.NewEncoder(conn)
		for s := range sigs {
			if sig, ok := s.(syscall.Signal); ok {
				_ = enc.Encode(Forward{Signal: int(sig)})
			}
		}
	}()
	code := 1
	var killedBy syscall.Signal
	err = readReplies(conn, func(r Reply) bool {
		switch {
		case r.Error != "":
			msg := r.Error
			if strings.Contains(msg, "running as root needs RAYITO_ALLOW_ROOT") {
				msg = NotAllowed[len("sudo: "):]
			}
			fmt.Fprintf(stderr, "sudo: %s\n", msg)
			return false
		case r.Exit != nil:
			code, killedBy = *r.Exit, syscall.Signal(r.Signal)
			return false
		}
		return true
	})
	if err != nil {
		fmt.Fprintf(stderr, "sudo: the sandbox's daemon went away: %v\n", err)
		return 1, 0
	}
	return code, killedBy
}
