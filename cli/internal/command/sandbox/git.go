package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/git"
)

// gitIDKey carries the sandbox id from `git ID` to its verb.
type gitIDKey struct{}

// The environment variables credentials come from (never a flag).
const (
	envGitUsername = "RAYITO_GIT_USERNAME"
	envGitPassword = "RAYITO_GIT_PASSWORD"
)

func gitCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "git",
		Usage: "run git in a sandbox: clone, status, commit, push, pull",
		Description: "rayito sandbox git ID VERB [flags] ...\n\n" +
			"Credentials serve one clone, push or pull of an http(s) remote and are never stored: the username\n" +
			"from " + envGitUsername + " (tokens are sometimes given as the user name), the password or token\n" +
			"from " + envGitPassword + " or, with --password-stdin, the first line of stdin; never from a flag,\n" +
			"which the process list and the shell's history would show. Hooks do not run on those commands,\n" +
			"and a git configuration that rewrites URLs (url.*.insteadOf) is refused before anything is sent.\n" +
			"Exit codes: 0 ok, 1 git failed (auth, conflict, ...), 2 usage, 124 --timeout passed.",
		ArgsUsage:     "ID VERB [ARGS...]",
		ShellComplete: completeIDs(f, firstArg),
		StopOnNthArg:  cliutil.IntPtr(1),
		Flags:         []cli.Flag{tokenFlag()},
		Commands: []*cli.Command{
			gitCloneCommand(f),
			gitStatusCommand(f),
			gitCommitCommand(f),
			gitPushCommand(f),
			gitPullCommand(f),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			args := cmd.Args().Slice()
			if len(args) == 0 {
				return cli.ShowSubcommandHelp(cmd)
			}
			if len(args) < 2 {
				return cliutil.Usagef("give a verb after the sandbox id: clone, status, commit, push or pull")
			}
			sub := cmd.Command(args[1])
			if sub == nil {
				return cliutil.Usagef("unknown git verb %q: clone, status, commit, push or pull%s", args[1], cliutil.DidYouMean(args[1], cliutil.CommandNames(cmd), cliutil.Quoted))
			}
			return sub.Run(context.WithValue(ctx, gitIDKey{}, args[0]), args[1:])
		},
	}
}

// gitVerb wraps a verb's action: it runs only after `git ID`, which puts
// the id in ctx.
func gitVerb(act func(ctx context.Context, cmd *cli.Command, id string) error) cli.ActionFunc {
	return func(ctx context.Context, cmd *cli.Command) error {
		id, _ := ctx.Value(gitIDKey{}).(string)
		if id == "" {
			return cliutil.Usagef("the sandbox id comes first: rayito sandbox git ID %s ...", cmd.Name)
		}
		return act(ctx, cmd, id)
	}
}

func gitCommonFlags(more ...cli.Flag) []cli.Flag {
	return append(more,
		&cli.DurationFlag{Name: "timeout", Usage: "end git after `DURATION` (exit code 124)"},
		&cli.StringFlag{Name: "user", Usage: "the sandbox `USER` git runs as (default: the sandbox's user)"},
		tokenFlag(),
		cliutil.JSONFlag(),
	)
}

func gitCredFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "password-stdin", Usage: "read the password or token from the first line of stdin (default: " + envGitPassword + ")"},
	}
}

// gitOptions are the options every verb shares, and the credentials of
// those that take them.
func gitOptions(cmd *cli.Command, f *cliutil.Factory, creds bool) ([]git.Option, error) {
	var opts []git.Option
	if d := cmd.Duration("timeout"); d < 0 {
		return nil, cliutil.Usagef("--timeout must be positive")
	} else if d > 0 {
		opts = append(opts, git.WithTimeout(d))
	}
	if u := cmd.String("user"); u != "" {
		opts = append(opts, git.WithUser(u))
	}
	if !creds {
		return opts, nil
	}
	user := f.Getenv(envGitUsername)
	var pass string
	if cmd.Bool("password-stdin") {
		line, err := bufio.NewReader(io.LimitReader(f.IO.In, 64<<10)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading the password from stdin: %w", err)
		}
		pass = strings.TrimRight(line, "\r\n")
		if pass == "" {
			return nil, cliutil.Usagef("--password-stdin: stdin held no password")
		}
	} else {
		pass = f.Getenv(envGitPassword)
	}
	switch {
	case pass == "" && user == "":
		return opts, nil
	case pass == "":
		return nil, cliutil.Usagef("a username without a password: set %s or use --password-stdin", envGitPassword)
	case user == "":
		return nil, cliutil.Usagef("a password without a username: set %s", envGitUsername)
	}
	return append(opts, git.WithCredentials(user, pass)), nil
}

// gitResultJSON is a mutating verb's --json output.
type gitResultJSON struct {
	ID     string `json:"id"`
	Verb   string `json:"verb"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// gitDone prints a verb's outcome: git's own output (credentials already
// removed by the SDK), or JSON. A sandbox that ended under git is said so
// with the exit rule of run and exec (cliutil.EndedUnder: 124 when its
// time ran out, 137 otherwise).
func gitDone(ctx context.Context, cmd *cli.Command, f *cliutil.Factory, sbx *rayito.Sandbox, res *rayito.CommandResult, err error) error {
	id := sbx.ID()
	if err != nil {
		// git's own explanation goes to stderr, with --json too: stdout
		// stays machine-readable, and the cause is not lost.
		var ge *git.Error
		code, status, waitErr := 0, rayito.CommandStatus(""), err
		if errors.As(err, &ge) {
			fmt.Fprint(f.IO.Err, ge.Stderr)
			code, status, waitErr = ge.ExitCode, ge.Status, nil
		}
		if ended := cliutil.EndedUnder(ctx, sbx, code, status, waitErr); ended != nil {
			return ended
		}
		if errors.Is(err, rayito.ErrTimeout) && cmd.Duration("timeout") > 0 {
			return &cliutil.TimeoutError{Program: "git " + cmd.Name, After: cmd.Duration("timeout").String()}
		}
		return cliutil.OnSandbox(id, err)
	}
	if cmd.Bool("json") {
		return cliutil.PrintJSON(f.IO.Out, gitResultJSON{ID: id, Verb: cmd.Name, Stdout: res.Stdout, Stderr: res.Stderr})
	}
	fmt.Fprint(f.IO.Out, res.Stdout)
	fmt.Fprint(f.IO.Err, res.Stderr)
	return nil
}

func gitCloneCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "clone",
		Usage:     "clone URL into DIR (relative to the user's home)",
		ArgsUsage: "URL [DIR]",
		Flags: gitCommonFlags(append(gitCredFlags(),
			&cli.StringFlag{Name: "branch", Usage: "check out `BRANCH`"},
			&cli.IntFlag{Name: "depth", Usage: "a shallow clone of `N` commits"})...),
		Action: gitVerb(func(ctx context.Context, cmd *cli.Command, id string) error {
			if err := cliutil.CheckArgs(cmd, 1, "the URL to clone"); err != nil {
				return err
			}
			if n := cmd.Args().Len(); n > 2 {
				return cliutil.Usagef("clone takes a URL and a directory, got %d arguments", n)
			}
			opts, err := gitOptions(cmd, f, true)
			if err != nil {
				return err
			}
			if b := cmd.String("branch"); b != "" {
				opts = append(opts, git.WithBranch(b))
			}
			if d := cmd.Int("depth"); d < 0 {
				return cliutil.Usagef("--depth must be positive")
			} else if d > 0 {
				opts = append(opts, git.WithDepth(int(d)))
			}
			sbx, err := connectID(ctx, cmd, f, id)
			if err != nil {
				return err
			}
			res, err := git.New(sbx).Clone(ctx, cmd.Args().Get(0), cmd.Args().Get(1), opts...)
			return gitDone(ctx, cmd, f, sbx, res, err)
		}),
	}
}

// gitStatusJSON is status --json.
type gitStatusJSON struct {
	ID         string          `json:"id"`
	Branch     string          `json:"branch"`
	Detached   bool            `json:"detached"`
	Upstream   string          `json:"upstream,omitempty"`
	Ahead      int             `json:"ahead"`
	Behind     int             `json:"behind"`
	Staged     []gitChangeJSON `json:"staged"`
	Unstaged   []gitChangeJSON `json:"unstaged"`
	Untracked  []string        `json:"untracked"`
	Conflicted []string        `json:"conflicted"`
	Clean      bool            `json:"clean"`
}

type gitChangeJSON struct {
	Path   string `json:"path"`
	Change string `json:"change"`
	From   string `json:"from,omitempty"`
}

func gitChanges(in []git.FileChange) []gitChangeJSON {
	out := make([]gitChangeJSON, 0, len(in))
	for _, c := range in {
		out = append(out, gitChangeJSON{Path: c.Path, Change: string(c.Change), From: c.From})
	}
	return out
}

func gitStatusCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a repository's branch, upstream and changed files",
		ArgsUsage: "REPO",
		Flags:     gitCommonFlags(),
		Action: gitVerb(func(ctx context.Context, cmd *cli.Command, id string) error {
			sbx, repo, opts, err := gitRepo(ctx, cmd, f, id, false)
			if err != nil {
				return err
			}
			st, err := git.New(sbx).Status(ctx, repo, opts...)
			if err != nil {
				return gitDone(ctx, cmd, f, sbx, nil, err)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, gitStatusJSON{ID: sbx.ID(), Branch: st.Branch, Detached: st.Detached, Upstream: st.Upstream,
					Ahead: st.Ahead, Behind: st.Behind, Staged: gitChanges(st.Staged), Unstaged: gitChanges(st.Unstaged),
					Untracked: append([]string{}, st.Untracked...), Conflicted: append([]string{}, st.Conflicted...), Clean: st.Clean()})
			}
			w := f.IO.Out
			switch {
			case st.Detached:
				fmt.Fprintln(w, "HEAD detached")
			case st.Upstream != "":
				fmt.Fprintf(w, "on %s, tracking %s (ahead %d, behind %d)\n", st.Branch, st.Upstream, st.Ahead, st.Behind)
			default:
				fmt.Fprintf(w, "on %s, no upstream\n", st.Branch)
			}
			for _, c := range st.Staged {
				fmt.Fprintf(w, "staged     %-12s %s\n", c.Change, c.Path)
			}
			for _, c := range st.Unstaged {
				fmt.Fprintf(w, "unstaged   %-12s %s\n", c.Change, c.Path)
			}
			for _, p := range st.Untracked {
				fmt.Fprintf(w, "untracked  %-12s %s\n", "", p)
			}
			for _, p := range st.Conflicted {
				fmt.Fprintf(w, "conflicted %-12s %s\n", "", p)
			}
			if st.Clean() {
				fmt.Fprintln(w, "clean")
			}
			return nil
		}),
	}
}

func gitCommitCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "commit",
		Usage:     "commit the staged changes (--all: every change first)",
		ArgsUsage: "REPO",
		Flags: gitCommonFlags(
			&cli.StringFlag{Name: "message", Aliases: []string{"m"}, Usage: "the commit `MESSAGE`", Required: true},
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "stage every change (git add -A) first"},
			&cli.StringFlag{Name: "author-name", Usage: "the author's `NAME` (with --author-email)"},
			&cli.StringFlag{Name: "author-email", Usage: "the author's `EMAIL` (with --author-name)"},
			&cli.BoolFlag{Name: "allow-empty", Usage: "commit even without changes"}),
		Action: gitVerb(func(ctx context.Context, cmd *cli.Command, id string) error {
			name, email := cmd.String("author-name"), cmd.String("author-email")
			if (name == "") != (email == "") {
				return cliutil.Usagef("--author-name and --author-email go together")
			}
			sbx, repo, opts, err := gitRepo(ctx, cmd, f, id, false)
			if err != nil {
				return err
			}
			commitOpts := opts
			if name != "" {
				commitOpts = append(commitOpts, git.WithAuthor(name, email))
			}
			if cmd.Bool("allow-empty") {
				commitOpts = append(commitOpts, git.WithAllowEmpty())
			}
			if cmd.Bool("all") {
				if _, err := git.New(sbx).Add(ctx, repo, opts...); err != nil {
					return gitDone(ctx, cmd, f, sbx, nil, err)
				}
			}
			res, err := git.New(sbx).Commit(ctx, repo, cmd.String("message"), commitOpts...)
			return gitDone(ctx, cmd, f, sbx, res, err)
		}),
	}
}

func gitRemoteFlags() []cli.Flag {
	return append(gitCredFlags(),
		&cli.StringFlag{Name: "remote", Usage: "the `REMOTE` (default origin)"},
		&cli.StringFlag{Name: "branch", Usage: "the `BRANCH` (default: the current one, or its upstream)"})
}

func gitRemoteOptions(cmd *cli.Command, opts []git.Option) []git.Option {
	if r := cmd.String("remote"); r != "" {
		opts = append(opts, git.WithRemote(r))
	}
	if b := cmd.String("branch"); b != "" {
		opts = append(opts, git.WithBranch(b))
	}
	return opts
}

func gitPushCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "push a branch",
		ArgsUsage: "REPO",
		Flags: gitCommonFlags(append(gitRemoteFlags(),
			&cli.BoolFlag{Name: "set-upstream", Aliases: []string{"u"}, Usage: "record the remote branch as the upstream"})...),
		Action: gitVerb(func(ctx context.Context, cmd *cli.Command, id string) error {
			return gitSync(ctx, cmd, f, id, func(sbx *rayito.Sandbox, repo string, opts []git.Option) (*rayito.CommandResult, error) {
				if cmd.Bool("set-upstream") {
					opts = append(opts, git.WithSetUpstream())
				}
				return git.New(sbx).Push(ctx, repo, opts...)
			})
		}),
	}
}

func gitPullCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "pull",
		Usage:     "pull (merge) from the upstream or a remote branch",
		ArgsUsage: "REPO",
		Flags:     gitCommonFlags(gitRemoteFlags()...),
		Action: gitVerb(func(ctx context.Context, cmd *cli.Command, id string) error {
			return gitSync(ctx, cmd, f, id, func(sbx *rayito.Sandbox, repo string, opts []git.Option) (*rayito.CommandResult, error) {
				return git.New(sbx).Pull(ctx, repo, opts...)
			})
		}),
	}
}

// gitSync is push and pull: the same arguments, credentials and output.
func gitSync(ctx context.Context, cmd *cli.Command, f *cliutil.Factory, id string,
	call func(*rayito.Sandbox, string, []git.Option) (*rayito.CommandResult, error)) error {
	sbx, repo, opts, err := gitRepo(ctx, cmd, f, id, true)
	if err != nil {
		return err
	}
	res, err := call(sbx, repo, gitRemoteOptions(cmd, opts))
	return gitDone(ctx, cmd, f, sbx, res, err)
}

// gitRepo is the start of every verb that acts on a repository: REPO
// given, the verb's options read (the credentials when creds), nothing
// sent until then; then the sandbox reached.
func gitRepo(ctx context.Context, cmd *cli.Command, f *cliutil.Factory, id string, creds bool) (*rayito.Sandbox, string, []git.Option, error) {
	if err := cliutil.CheckArgs(cmd, 1, "the repository's directory"); err != nil {
		return nil, "", nil, err
	}
	opts, err := gitOptions(cmd, f, creds)
	if err != nil {
		return nil, "", nil, err
	}
	sbx, err := connectID(ctx, cmd, f, id)
	if err != nil {
		return nil, "", nil, err
	}
	return sbx, cmd.Args().First(), opts, nil
}
