package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/agenthost/project"
	"github.com/rayito-dev/rayito/agenthost/secretenv"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/secrets"
	"github.com/rayito-dev/rayito/sdk/template"
)

// hostBinary is the agent host's file name.
const hostBinary = project.HostBinary

// maxPayloadBytes bounds an invocation's payload (the host's limit,
// AgentCore's).
const maxPayloadBytes = 100 << 20

func deployCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "deploy",
		Usage:     "deploy the agent: a template with its code and the host, a sandbox that runs it",
		ArgsUsage: "[DIR]",
		Description: "--target microvm (the default) builds the template agent-NAME from the project directory\n" +
			"(regular files only; .git and symbolic links are skipped) and the agent host\n" +
			"(--host-binary, default rayito-agent-host beside rayito, else on PATH), creates a sandbox\n" +
			"with Internet access denied but for the project's [egress] and its model's gateway route,\n" +
			"starts the host with a new service token and the project's secret variables (read with\n" +
			"your credentials, passed only in the start request) and waits for the agent's /ping. A\n" +
			"deployed agent is replaced.\n" +
			"\n" +
			"--target agentcore (--region, --artifact-bucket, a linux arm64 --host-binary) runs the plan and a\n" +
			"read-only preflight (name_conflict, cdk_managed: nothing written), creates or updates the stack\n" +
			"rayito-agent-NAME, builds the image with CodeBuild from a deterministic context zip (its base\n" +
			"pinned by digest; skipped when ECR has the zip's tag; the zip deleted after the build), creates\n" +
			"or updates the runtime by image digest, waits for READY and requires MMDSv2. Exit codes: 1\n" +
			"failure, 2 usage, 124 --wait-timeout passed, 130 interrupted.",
		Flags: append([]cli.Flag{
			targetFlag(),
			&cli.StringFlag{Name: "host-binary", Usage: "the agent host's `FILE` (linux, for the sandbox's machine)"},
			&cli.DurationFlag{Name: "max-lifetime", Value: maxLifetime, Usage: "the agent's sandbox lives `DURATION` at most, running and paused (3m to 8h, the platform's cap), then ends: deploy again"},
			&cli.DurationFlag{Name: "idle", Value: 10 * time.Minute, Usage: "pause the agent's sandbox after `DURATION` without requests; the next invocation resumes it (0: never pause)"},
			&cli.DurationFlag{Name: "ready-timeout", Value: 2 * time.Minute, Usage: "wait `DURATION` at most for the agent's /ping"},
			cliutil.JSONFlag(),
		}, append(agentCoreFlags(), agentCoreDeployFlags()...)...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			target, dir, p, err := projectOf(cmd)
			if err != nil {
				return err
			}
			if target == targetAgentCore {
				return deployAgentCore(ctx, f, cmd, dir, p)
			}
			return deployMicroVM(ctx, f, cmd, dir, p)
		},
	}
}

// findHost is the agent host binary: the flag's, else beside the running
// executable, else on PATH.
func findHost(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if exe, err := os.Executable(); err == nil {
		c := filepath.Join(filepath.Dir(exe), hostBinary)
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c, nil
		}
	}
	if c, err := exec.LookPath(hostBinary); err == nil {
		return c, nil
	}
	return "", fmt.Errorf("no %s beside rayito or on PATH: install it (make dist builds it) or pass --host-binary", hostBinary)
}

// stageContext stages the project's regular files and the host into
// ctxDir (project.Stage) and says on w how many links or special files it
// skipped (never followed).
func stageContext(w io.Writer, name, projectDir, host, ctxDir string) (int, error) {
	st, err := project.Stage(projectDir, host, ctxDir)
	if err != nil {
		return 0, err
	}
	if n := len(st.Skipped); n > 0 {
		fmt.Fprintf(w, "agent %s: %d symbolic links or special files of the project skipped (regular files only)\n", name, n)
	}
	return st.Files, nil
}

func deployMicroVM(ctx context.Context, f *cliutil.Factory, cmd *cli.Command, dir string, p *project.Project) error {
	pl, err := microVMPlan(p)
	if err != nil {
		return err
	}
	life, err := lifetime(cmd.Duration("max-lifetime"), cmd.Duration("idle"))
	if err != nil {
		return err
	}
	gw, err := gatewayOf(p)
	if err != nil {
		return err
	}
	host, err := findHost(cmd.String("host-binary"))
	if err != nil {
		return err
	}
	t, err := platform.Existing(ctx, f.Getenv)
	if err != nil {
		return err
	}
	opts := t.Options
	if err := buildAgentTemplate(ctx, f, p, pl, dir, host, opts); err != nil {
		return err
	}
	// A deployed agent is replaced.
	if old, err := readRecord(f, p.Name); err == nil {
		if sbx, err := rayito.Connect(ctx, old.SandboxID, opts...); err == nil {
			_ = sbx.Kill(ctx)
		}
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	create := append(slices.Clone(opts), rayito.WithTemplate(pl.Template),
		rayito.WithNetwork(rayito.NetworkPolicy{AllowOut: pl.AllowOut}), rayito.WithAllowInternetAccess(false))
	create = append(create, life...)
	if gw != nil {
		create = append(create, secrets.WithGateways(*gw))
	}
	fmt.Fprintf(f.IO.Err, "agent %s: starting its sandbox\n", p.Name)
	sbx, err := rayito.Create(ctx, create...)
	if err != nil {
		return cliutil.Interrupted(ctx, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = sbx.Kill(context.WithoutCancel(ctx))
		}
	}()
	envs, secretEnvs, err := hostEnv(ctx, f, pl)
	if err != nil {
		return err
	}
	runOpts := []rayito.CommandOption{rayito.WithEnvs(envs), rayito.WithCwd("/opt/agent/app"), rayito.WithTag("rayito-agent-host"), rayito.WithStdin()}
	if len(secretEnvs) > 0 {
		runOpts = append(runOpts, secrets.WithSecrets(secretEnvs))
	}
	h, err := sbx.Commands.StartExec(ctx, pl.Host, runOpts...)
	if err != nil {
		return fmt.Errorf("agent %s: starting the host: %w", p.Name, err)
	}
	// The token goes on the host's stdin: no environment in the sandbox
	// shows it.
	if err := h.SendStdin(ctx, []byte(token+"\n")); err != nil {
		return fmt.Errorf("agent %s: the host's token: %w", p.Name, err)
	}
	if err := h.CloseStdin(ctx); err != nil {
		return fmt.Errorf("agent %s: the host's token: %w", p.Name, err)
	}
	if err := waitPing(ctx, sbx, cmd.Duration("ready-timeout")); err != nil {
		return fmt.Errorf("agent %s: %w (rayito sandbox logs %s)", p.Name, err, sbx.ID())
	}
	r := &record{Name: p.Name, Target: targetMicroVM, SandboxID: sbx.ID(), Template: pl.Template, ServiceToken: token, CreatedAt: time.Now().UTC()}
	if err := writeRecord(f, r); err != nil {
		return err
	}
	ok = true
	if cmd.Bool("json") {
		return cliutil.PrintJSON(f.IO.Out, map[string]any{"name": p.Name, "target": targetMicroVM, "sandbox_id": sbx.ID(), "template": pl.Template})
	}
	fmt.Fprintf(f.IO.Out, "agent %s: deployed in sandbox %s (rayito agent invoke %s)\n", p.Name, sbx.ID(), p.Name)
	return nil
}

// buildAgentTemplate stages the project in dir with the host binary,
// builds the plan's template from it and waits for the template to be
// ready.
func buildAgentTemplate(ctx context.Context, f *cliutil.Factory, p *project.Project, pl *mvPlan, dir, host string, opts []rayito.Option) error {
	stage, err := os.MkdirTemp("", "rayito-agent-deploy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	files, err := stageContext(f.IO.Err, p.Name, dir, host, stage)
	if err != nil {
		return err
	}
	tpl := template.FromBaseImage("local").
		Copy("app", "/opt/agent/app").
		Copy("bin/"+hostBinary, "/opt/agent/bin/"+hostBinary).
		RunCmd("chmod 0755 /opt/agent/bin/" + hostBinary + " && chmod -R a+rX /opt/agent")
	art, err := template.Compile(ctx, tpl, stage)
	if err != nil {
		return err
	}
	defer art.Close()
	fmt.Fprintf(f.IO.Err, "agent %s: building template %s (%d files)\n", p.Name, pl.Template, files)
	if _, err := rayito.BuildTemplate(ctx, rayito.BuildTemplateInput{Name: pl.Template, Artifact: bytes.NewReader(art.Zip), SHA256: art.SHA256}, opts...); err != nil {
		return cliutil.Interrupted(ctx, err)
	}
	info, err := rayito.WaitTemplate(ctx, pl.Template, opts...)
	if err != nil {
		return cliutil.Interrupted(ctx, err)
	}
	if info.State != rayito.TemplateReady {
		return fmt.Errorf("agent %s: the template build ended %s: %s (rayito template logs %s)", p.Name, info.State, info.Reason, pl.Template)
	}
	return nil
}

// hostEnv is the agent host's environment and secrets: each secret_env
// entry by reference, but a JSON key ([[secret_env_from]]) read here with
// the caller's credentials, and the list of their names.
func hostEnv(ctx context.Context, f *cliutil.Factory, pl *mvPlan) (map[string]string, map[string]secrets.Ref, error) {
	refs := map[string]secrets.Ref{}
	var names []string
	envs := map[string]string{}
	var store secrets.Store
	var err error
	for _, e := range pl.SecretEnv {
		names = append(names, e.Name)
		if e.Key == "" {
			refs[e.Name] = secrets.Ref{Name: e.Secret}
			continue
		}
		// A JSON key ([[secret_env_from]]): the value is read here, with the
		// caller's credentials, and travels like the others, only in the
		// host's start request.
		if store == nil {
			if store, err = platform.SecretStore(ctx, f.Getenv, "", ""); err != nil {
				return nil, nil, err
			}
		}
		v, err := secretKeyValue(ctx, store, e)
		if err != nil {
			return nil, nil, err
		}
		envs[e.Name] = v
	}
	if len(names) > 0 {
		envs[secretenv.NamesVariable] = strings.Join(names, ",")
	}
	return envs, refs, nil
}

// maxLifetime is --max-lifetime's default: the platform's cap on a
// sandbox's life (Lambda MicroVMs' maximum duration).
const maxLifetime = 8 * time.Hour

// lifetime is how a deployed agent's sandbox lives: a service, not a
// task, so its deadline is its maximum lifetime (the sandbox ends then),
// and, with idle, it is paused after idle without requests and resumed by
// the next one (the platform holds the request until the sandbox runs
// again; a paused sandbox uses no CPU). Out of bounds is a usage error.
func lifetime(max, idle time.Duration) ([]rayito.Option, error) {
	if max < 3*time.Minute || max > maxLifetime {
		return nil, cliutil.Usagef("--max-lifetime must be between 3m and %s", maxLifetime)
	}
	if idle != 0 && (idle < time.Minute || idle > max) {
		return nil, cliutil.Usagef("--idle must be 0 (never pause) or between 1m and --max-lifetime")
	}
	opts := []rayito.Option{rayito.WithMaxLifetime(max), rayito.WithTimeout(max - time.Minute)}
	if idle > 0 {
		opts = append(opts, rayito.WithIdlePolicy(idle, max, true))
	}
	return opts, nil
}

// secretKeyValue is e's value: e.Key of the JSON secret e.Secret. The
// error names the variable, never the secret or a value.
func secretKeyValue(ctx context.Context, store secrets.Store, e secretenv.Entry) (string, error) {
	sec, err := store.GetSecret(ctx, secrets.Ref{Name: e.Secret})
	if err != nil {
		if errors.Is(err, rayito.ErrSecretNotFound) {
			return "", &secretenv.Error{Code: secretenv.CodeNotFound, Name: e.Name}
		}
		return "", &secretenv.Error{Code: secretenv.CodeFetchFailed, Name: e.Name}
	}
	return e.Value(string(sec.Value()))
}

// waitPing waits for the host's /ping to answer Healthy.
func waitPing(ctx context.Context, sbx *rayito.Sandbox, d time.Duration) error {
	port, err := sbx.Port(hostPort)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, port.URL()+"/ping", nil)
		if err != nil {
			return err
		}
		resp, err := port.Client().Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`"Healthy`)) {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return errors.New("the agent did not answer /ping in time")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func invokeCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "invoke",
		Usage:     "send the agent a payload (POST /invocations) and print its answer",
		ArgsUsage: "NAME",
		Description: "The payload is --payload, or stdin with --payload - (at most 100 MiB); the answer is printed\n" +
			"as it comes (a streamed answer too; --json: an object with the status and the answer, once it\n" +
			"has ended). A refused invocation exits 1 with its status.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "payload", Value: "{}", Usage: "the request body (`JSON`; - reads stdin)"},
			&cli.StringFlag{Name: "session", Usage: "AgentCore's runtime session `ID` (33 to 256 characters; default: a new one)"},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return cliutil.Usagef("want one agent name, got %d arguments", cmd.Args().Len())
			}
			r, err := readRecord(f, cmd.Args().First())
			if err != nil {
				return err
			}
			var body io.Reader = strings.NewReader(cmd.String("payload"))
			if cmd.String("payload") == "-" {
				// Read whole, so that the request has a Content-Length (an
				// agent on http.server reads that many bytes of a chunked
				// body: none) and a payload over the limit is refused, not
				// sent cut.
				b, err := io.ReadAll(io.LimitReader(f.IO.In, maxPayloadBytes+1))
				if err != nil {
					return err
				}
				if len(b) > maxPayloadBytes {
					return cliutil.Usagef("the payload on stdin is over %d MiB", maxPayloadBytes>>20)
				}
				body = bytes.NewReader(b)
			}
			if r.Target == targetAgentCore {
				b, err := io.ReadAll(body)
				if err != nil {
					return err
				}
				return invokeAgentCore(ctx, f, cmd, r, b)
			}
			t, err := platform.Existing(ctx, f.Getenv)
			if err != nil {
				return err
			}
			sbx, err := rayito.Connect(ctx, r.SandboxID, t.Options...)
			if err != nil {
				return cliutil.OnSandbox(r.SandboxID, err)
			}
			port, err := sbx.Port(hostPort)
			if err != nil {
				return err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, port.URL()+"/invocations", body)
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+r.ServiceToken)
			resp, err := port.Client().Do(req)
			if err != nil {
				return cliutil.Interrupted(ctx, fmt.Errorf("agent %s: %w", r.Name, err))
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				return fmt.Errorf("agent %s: invocation refused: %s %s", r.Name, resp.Status, strings.TrimSpace(string(b)))
			}
			if cmd.Bool("json") {
				b, err := io.ReadAll(io.LimitReader(resp.Body, 100<<20))
				if err != nil {
					return err
				}
				out := map[string]any{"agent": r.Name, "status": resp.StatusCode, "content_type": resp.Header.Get("Content-Type")}
				if json.Valid(b) {
					out["answer"] = json.RawMessage(b)
				} else {
					out["answer_text"] = string(b)
				}
				return cliutil.PrintJSON(f.IO.Out, out)
			}
			_, err = io.Copy(f.IO.Out, resp.Body)
			return err
		},
	}
}

func deleteCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a deployed agent: its sandbox, its template and its record (AgentCore: its runtime and stack)",
		ArgsUsage: "NAME",
		Description: "Only what deploy created for NAME from this machine. An AgentCore agent: the preflight again\n" +
			"(a runtime without Rayito's marker, or one a CDK stack declares, is never touched), the runtime\n" +
			"(waited until gone), the stack rayito-agent-NAME (its repository and images with it) and the\n" +
			"record; --target agentcore --region R deletes one this machine has no record of.",
		Flags: append([]cli.Flag{cliutil.JSONFlag()}, deleteFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return cliutil.Usagef("want one agent name, got %d arguments", cmd.Args().Len())
			}
			if t := cmd.String("target"); t != "" && t != targetAgentCore {
				return cliutil.Usagef("delete --target is agentcore or unset, not %q", t)
			}
			r, err := readRecord(f, cmd.Args().First())
			if errors.Is(err, rayito.ErrNotFound) && cmd.String("target") == targetAgentCore {
				region, err := regionOf(f, cmd)
				if err != nil {
					return err
				}
				return deleteAgentCore(ctx, f, cmd, cmd.Args().First(), region)
			}
			if err != nil {
				return err
			}
			if r.Target == targetAgentCore {
				return deleteAgentCore(ctx, f, cmd, r.Name, r.Region)
			}
			t, err := platform.Existing(ctx, f.Getenv)
			if err != nil {
				return err
			}
			if sbx, err := rayito.Connect(ctx, r.SandboxID, t.Options...); err == nil {
				if err := sbx.Kill(ctx); err != nil && !errors.Is(err, rayito.ErrNotFound) {
					return cliutil.OnSandbox(r.SandboxID, err)
				}
			}
			if err := rayito.DeleteTemplate(ctx, r.Template, t.Options...); err != nil && !errors.Is(err, rayito.ErrNotFound) {
				return err
			}
			if err := removeRecord(f, r.Name); err != nil {
				return err
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, map[string]any{"name": r.Name, "deleted": true})
			}
			fmt.Fprintf(f.IO.Out, "agent %s: deleted\n", r.Name)
			return nil
		},
	}
}

func listCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the agents deployed from this machine",
		Flags: []cli.Flag{cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			dir, err := recordsDir(f)
			if err != nil {
				return err
			}
			ents, err := os.ReadDir(dir)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			type item struct {
				Name      string    `json:"name"`
				Target    string    `json:"target"`
				SandboxID string    `json:"sandbox_id"`
				CreatedAt time.Time `json:"created_at"`
				// AgentCore: the region and the runtime.
				Region    string `json:"region,omitempty"`
				RuntimeID string `json:"runtime_id,omitempty"`
			}
			items := []item{}
			for _, e := range ents {
				name, ok := strings.CutSuffix(e.Name(), ".json")
				if !ok || strings.HasPrefix(name, ".") {
					continue
				}
				if r, err := readRecord(f, name); err == nil {
					items = append(items, item{r.Name, r.Target, r.SandboxID, r.CreatedAt, r.Region, r.RuntimeID})
				}
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, items)
			}
			for _, it := range items {
				where := it.SandboxID
				if it.Target == targetAgentCore {
					where = it.Region + " " + it.RuntimeID
				}
				fmt.Fprintf(f.IO.Out, "%s\t%s\t%s\n", it.Name, it.Target, where)
			}
			return nil
		},
	}
}
