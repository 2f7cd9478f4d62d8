// Package template is `rayito template`: build a template from a
// Dockerfile (a strict subset: FROM, RUN, COPY, ENV, WORKDIR, USER, CMD)
// and follow it (status, logs, list, delete). Builds run on the local
// platform (a root platform) or, with RAYITO_BACKEND=aws, as a MicroVM image
// built from the Rayito image with the template's layer (aws.go;
// docs/templates.md).
package template

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/template"
)

// maxDockerfile bounds the Dockerfile read.
const maxDockerfile = template.MaxDockerfileLen

// Command is `rayito template`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "template",
		Usage: "build templates (a root filesystem layer from a Dockerfile) and follow their builds",
		Description: "A template is what sandboxes start from: `rayito sandbox create --template NAME`. The\n" +
			"local platform builds it in a sandbox of its own, over its `local` base (the host's /usr); on\n" +
			"AWS (RAYITO_BACKEND=aws) it is a MicroVM image: the Rayito image (FROM rayito) with the\n" +
			"template's layer. Both from a Dockerfile subset: FROM, RUN, COPY, ENV, WORKDIR, USER, CMD\n" +
			"(docs/templates.md).",
		Commands: []*cli.Command{buildCommand(f), statusCommand(f), logsCommand(f), listCommand(f), deleteCommand(f)},
	}
}

type templateJSON struct {
	Name      string    `json:"name"`
	State     string    `json:"state"`
	SHA256    string    `json:"sha256"`
	Reason    string    `json:"reason,omitempty"`
	Step      int       `json:"step"`
	Message   string    `json:"message,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Unchanged bool      `json:"unchanged,omitempty"`
	Warnings  []string  `json:"warnings,omitempty"`
}

func toJSON(t *rayito.TemplateInfo) templateJSON {
	return templateJSON{Name: t.Name, State: t.State, SHA256: t.SHA256, Reason: t.Reason, Step: t.Step, Message: t.Message, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Unchanged: t.Unchanged}
}

func nameArg(cmd *cli.Command) (string, error) {
	if cmd.Args().Len() != 1 {
		return "", cliutil.Usagef("want one template name, got %d arguments", cmd.Args().Len())
	}
	return cmd.Args().First(), nil
}

// onAWSFunc is a command's AWS path: done says it ran (RAYITO_BACKEND is
// aws) and err is its outcome.
type onAWSFunc func(ctx context.Context, f *cliutil.Factory, cmd *cli.Command, name string) (done bool, err error)

// onTemplate is the action of a command on one named template: the name
// argument, then the AWS path when there is one and the backend is AWS,
// else run with the local platform's options.
func onTemplate(f *cliutil.Factory, aws onAWSFunc, run func(ctx context.Context, cmd *cli.Command, name string, opts []rayito.Option) error) cli.ActionFunc {
	return func(ctx context.Context, cmd *cli.Command) error {
		name, err := nameArg(cmd)
		if err != nil {
			return err
		}
		if aws != nil {
			if done, err := aws(ctx, f, cmd, name); done {
				return err
			}
		}
		opts, err := options(ctx, f)
		if err != nil {
			return err
		}
		return run(ctx, cmd, name, opts)
	}
}

// options is the user's local platform, which must answer.
func options(ctx context.Context, f *cliutil.Factory) ([]rayito.Option, error) {
	t, err := platform.Existing(ctx, f.Getenv)
	if err != nil {
		return nil, err
	}
	return t.Options, nil
}

// usageOr makes an argument the SDK refused a usage error (exit 2).
func usageOr(err error) error {
	if errors.Is(err, rayito.ErrInvalidArgument) {
		return cliutil.Usage(err)
	}
	return err
}

func buildCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "build",
		Usage:     "build a template from a Dockerfile and wait for it",
		ArgsUsage: "NAME",
		Description: "Compiles the Dockerfile (--file, default ./Dockerfile) and the files its COPY lines name\n" +
			"from the context directory (--context, default the Dockerfile's; its .dockerignore applies,\n" +
			"symbolic links are never followed, and files that commonly hold secrets are named in a\n" +
			"warning) into a deterministic artifact, sends it to the platform and waits for the build,\n" +
			"showing progress on stderr. The same artifact already built is not built again (--force).\n" +
			"A failed build exits 1 with its reason and step; `rayito template logs NAME` shows its output.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Value: "Dockerfile", Usage: "the Dockerfile's `PATH`"},
			&cli.StringFlag{Name: "context", Usage: "the build context `DIR` (default: the Dockerfile's directory)"},
			&cli.BoolFlag{Name: "force", Usage: "build again an artifact already built"},
			&cli.BoolFlag{Name: "no-wait", Usage: "return once the build has started"},
			&cli.DurationFlag{Name: "wait-timeout", Value: 30 * time.Minute, Usage: "give up waiting after `DURATION` (exit 124; the build goes on)"},
			cliutil.JSONFlag(),
		}, awsBuildFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			name, err := nameArg(cmd)
			if err != nil {
				return err
			}
			if done, err := buildOnAWS(ctx, f, cmd, name); done {
				return err
			}
			text, err := readDockerfile(cmd.String("file"))
			if err != nil {
				return err
			}
			dir := cmd.String("context")
			if dir == "" {
				dir = filepath.Dir(cmd.String("file"))
			}
			t, err := template.FromDockerfile(text)
			if err != nil {
				return cliutil.Usage(err)
			}
			var warnings []string
			art, err := template.Compile(ctx, t, dir, template.WithWarn(func(w string) {
				warnings = append(warnings, w)
				fmt.Fprintf(f.IO.Err, "warning: %s\n", w)
			}))
			if err != nil {
				return cliutil.Usage(err)
			}
			defer art.Close()
			body, err := artifactReader(art)
			if err != nil {
				return err
			}
			defer body.Close()
			opts, err := options(ctx, f)
			if err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Err, "template %s: sending %d bytes (%d files, sha256 %.12s)\n", name, art.Size, art.Files, art.SHA256)
			info, err := rayito.BuildTemplate(ctx, rayito.BuildTemplateInput{Name: name, Artifact: body, SHA256: art.SHA256, Force: cmd.Bool("force")}, opts...)
			if err != nil {
				return usageOr(cliutil.Interrupted(ctx, err))
			}
			if info.Unchanged {
				fmt.Fprintf(f.IO.Err, "template %s: this artifact is already built\n", name)
			} else if !cmd.Bool("no-wait") {
				info, err = wait(ctx, f, name, cmd.Duration("wait-timeout"), opts)
				if info == nil {
					return err
				}
				if err != nil {
					if cmd.Bool("json") {
						j := toJSON(info)
						j.Warnings = warnings
						_ = cliutil.PrintJSON(f.IO.Out, j)
					}
					return err
				}
			}
			if cmd.Bool("json") {
				j := toJSON(info)
				j.Warnings = warnings
				return cliutil.PrintJSON(f.IO.Out, j)
			}
			fmt.Fprintf(f.IO.Out, "%s\t%s\n", info.Name, info.State)
			return nil
		},
	}
}

// wait follows a build, one progress line on stderr every few seconds.
func wait(ctx context.Context, f *cliutil.Factory, name string, limit time.Duration, opts []rayito.Option) (*rayito.TemplateInfo, error) {
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(3 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(f.IO.Err, "template %s: building (%s)\n", name, time.Since(start).Round(time.Second))
			}
		}
	}()
	info, err := rayito.WaitTemplate(wctx, name, opts...)
	var be *rayito.TemplateBuildError
	switch {
	case errors.As(err, &be):
		return info, cli.Exit(fmt.Sprintf("template %s: the build failed at step %d (%s): %s; see `rayito template logs %s`", name, be.Step, be.Reason, be.Message, name), cliutil.ExitError)
	case err != nil && ctx.Err() == nil && wctx.Err() != nil:
		return nil, cli.Exit(fmt.Sprintf("template %s: still building after %s (it goes on: rayito template status %s)", name, limit, name), cliutil.ExitTimeout)
	case err != nil:
		return nil, cliutil.Interrupted(ctx, err)
	}
	fmt.Fprintf(f.IO.Err, "template %s: ready in %s\n", name, time.Since(start).Round(100*time.Millisecond))
	return info, nil
}

func readDockerfile(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", cliutil.Usagef("cannot read the Dockerfile %s: %v", path, errors.Unwrap(err))
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxDockerfile+1))
	if err != nil {
		return "", cliutil.Usagef("cannot read the Dockerfile %s", path)
	}
	if len(b) > maxDockerfile {
		return "", cliutil.Usagef("the Dockerfile %s is larger than %d bytes", path, maxDockerfile)
	}
	return string(b), nil
}

func artifactReader(a *template.Artifact) (io.ReadCloser, error) {
	if a.Zip != nil {
		return io.NopCloser(bytes.NewReader(a.Zip)), nil
	}
	return os.Open(a.Path)
}

func statusCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a template's state (BUILDING, READY, FAILED with its reason)",
		ArgsUsage: "NAME",
		Flags:     []cli.Flag{cliutil.JSONFlag()},
		Action: onTemplate(f, statusOnAWS, func(ctx context.Context, cmd *cli.Command, name string, opts []rayito.Option) error {
			t, err := rayito.GetTemplate(ctx, name, opts...)
			if err != nil {
				return usageOr(err)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, toJSON(t))
			}
			printTemplates(f.IO.Out, []rayito.TemplateInfo{*t})
			return nil
		}),
	}
}

func logsCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "print the output of a template's last build",
		ArgsUsage: "NAME",
		Flags:     []cli.Flag{cliutil.JSONFlag()},
		Action: onTemplate(f, logsOnAWS, func(ctx context.Context, cmd *cli.Command, name string, opts []rayito.Option) error {
			if !cmd.Bool("json") {
				return usageOr(rayito.TemplateLogs(ctx, name, f.IO.Out, opts...))
			}
			jl := cliutil.NewJSONLines(f.IO.Out) // a line: {"text": ...}
			err := rayito.TemplateLogs(ctx, name, jl, opts...)
			if cerr := jl.Close(); err == nil {
				err = cerr
			}
			return usageOr(err)
		}),
	}
}

func listCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the templates built on the platform",
		Flags: []cli.Flag{cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 0 {
				return cliutil.Usagef("list takes no arguments")
			}
			opts, err := options(ctx, f)
			if err != nil {
				return err
			}
			list, err := rayito.ListTemplates(ctx, opts...)
			if err != nil {
				return err
			}
			if cmd.Bool("json") {
				out := make([]templateJSON, 0, len(list))
				for i := range list {
					out = append(out, toJSON(&list[i]))
				}
				return cliutil.PrintJSON(f.IO.Out, out)
			}
			printTemplates(f.IO.Out, list)
			return nil
		},
	}
}

func deleteCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a template (sandboxes running it go on)",
		ArgsUsage: "NAME",
		Flags:     []cli.Flag{cliutil.JSONFlag()},
		Action: onTemplate(f, nil, func(ctx context.Context, cmd *cli.Command, name string, opts []rayito.Option) error {
			if err := rayito.DeleteTemplate(ctx, name, opts...); err != nil {
				return usageOr(err)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, map[string]any{"name": name, "deleted": true})
			}
			fmt.Fprintf(f.IO.Out, "deleted %s\n", name)
			return nil
		}),
	}
}

func printTemplates(w io.Writer, list []rayito.TemplateInfo) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tSHA256\tUPDATED\tREASON")
	for _, t := range list {
		reason := t.Reason
		if reason != "" && t.Step >= 0 {
			reason += fmt.Sprintf(" (step %d)", t.Step)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.12s\t%s\t%s\n", t.Name, t.State, t.SHA256, t.UpdatedAt.Local().Format(time.RFC3339), reason)
	}
	tw.Flush()
}
