// Package agent is `rayito agent`: deploy a user's agent as a service,
// run by the agent host (agenthost), on a Rayito MicroVM (the local
// platform) with the secret gateway, or on Amazon Bedrock AgentCore (its
// stack, image and runtime; docs/agent-host.md).
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/agenthost/project"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// The targets of plan and deploy.
const (
	targetMicroVM   = "microvm"
	targetAgentCore = "agentcore"
)

// hostPort is the agent host's port in the sandbox (8080, AgentCore's, is
// rayd's API port in a Rayito sandbox).
const hostPort = 8088

// Command is `rayito agent`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "agent",
		Usage: "deploy your own agent as a service: on a Rayito MicroVM, or on Amazon Bedrock AgentCore",
		Description: "An agent project is a directory with rayito-agent.toml (its name, its command, its model,\n" +
			"its egress and the secrets it gets as environment variables: names only, never values) and\n" +
			"the agent's code. The agent host (rayito-agent-host) runs the command as a supervised child\n" +
			"that serves HTTP on 127.0.0.1:$PORT (GET /ping, POST /invocations) and serves the same paths\n" +
			"in front of it. docs/agent-host.md.",
		Commands: []*cli.Command{initCommand(f), planCommand(f), deployCommand(f), invokeCommand(f), deleteCommand(f), listCommand(f)},
	}
}

// dirArg is the project directory argument (default ".").
func dirArg(cmd *cli.Command) (string, error) {
	switch cmd.Args().Len() {
	case 0:
		return ".", nil
	case 1:
		return cmd.Args().First(), nil
	}
	return "", cliutil.Usagef("want at most one project directory, got %d arguments", cmd.Args().Len())
}

// load reads the project in dir; a bad project is a usage error.
func load(dir string) (*project.Project, error) {
	p, err := project.Load(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, cliutil.Usagef("no %s in %s (rayito agent init)", project.FileName, dir)
		}
		return nil, cliutil.Usage(err)
	}
	return p, nil
}

// projectOf is the --target, the project directory and its project.
func projectOf(cmd *cli.Command) (string, string, *project.Project, error) {
	target, err := checkTarget(cmd)
	if err != nil {
		return "", "", nil, err
	}
	dir, err := dirArg(cmd)
	if err != nil {
		return "", "", nil, err
	}
	p, err := load(dir)
	return target, dir, p, err
}

func targetFlag() cli.Flag {
	return &cli.StringFlag{Name: "target", Value: targetMicroVM, Usage: "where the agent runs: `microvm` (a Rayito sandbox, with the secret gateway) or agentcore"}
}

func checkTarget(cmd *cli.Command) (string, error) {
	switch t := cmd.String("target"); t {
	case targetMicroVM, targetAgentCore:
		return t, nil
	default:
		return "", cliutil.Usagef("--target must be microvm or agentcore, not %q", t)
	}
}

func initCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:        "init",
		Usage:       "write a new agent project: rayito-agent.toml and a sample agent.py",
		ArgsUsage:   "[DIR]",
		Description: "Writes DIR/rayito-agent.toml and DIR/agent.py (an echo agent on Python's standard library);\nnever overwrites a file.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "name", Usage: "the agent's `NAME` (default: the directory's name)"},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			dir, err := dirArg(cmd)
			if err != nil {
				return err
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			name := cmd.String("name")
			if name == "" {
				name = strings.ToLower(filepath.Base(abs))
			}
			p := &project.Project{Name: name, Command: []string{"python3", "agent.py"}}
			if err := p.Check(); err != nil {
				return cliutil.Usagef("the agent's name %q: must be [a-z][a-z0-9-]{0,31} (--name)", name)
			}
			if err := os.MkdirAll(abs, 0o755); err != nil {
				return err
			}
			files := map[string]string{project.FileName: project.Template(name), "agent.py": project.SampleAgent}
			for _, fn := range []string{project.FileName, "agent.py"} {
				if _, err := os.Lstat(filepath.Join(abs, fn)); err == nil {
					return fmt.Errorf("%s exists: init never overwrites a file", filepath.Join(dir, fn))
				}
			}
			for _, fn := range []string{project.FileName, "agent.py"} {
				fd, err := os.OpenFile(filepath.Join(abs, fn), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if err != nil {
					return err
				}
				_, werr := io.WriteString(fd, files[fn])
				if cerr := fd.Close(); werr == nil {
					werr = cerr
				}
				if werr != nil {
					return werr
				}
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, map[string]any{"name": name, "dir": abs, "files": []string{project.FileName, "agent.py"}})
			}
			fmt.Fprintf(f.IO.Out, "agent %s: wrote %s and agent.py in %s\n", name, project.FileName, dir)
			return nil
		},
	}
}

func agentCoreFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "region", Usage: "AgentCore's `REGION` (agentcore; default AWS_REGION)"},
		&cli.StringFlag{Name: "account", Usage: "the 12-digit AWS `ACCOUNT` (agentcore; default: asked of STS at deploy)"},
		&cli.StringSliceFlag{Name: "bedrock-model", Usage: "a Bedrock model or inference profile `ARN` the agent may invoke (agentcore; default: the project's model)"},
		&cli.StringSliceFlag{Name: "readable-secret", Usage: "a Secrets Manager secret `ARN` the agent's code may read (agentcore)"},
		&cli.BoolFlag{Name: "external-model", Usage: "allow a model provider other than bedrock, called over the public network with a key the agent reads (agentcore)"},
		&cli.StringFlag{Name: "artifact-bucket", Value: "ARTIFACT-BUCKET", Usage: "the `BUCKET` the build context goes to (agentcore)"},
	}
}

func planCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "show what a deploy creates (roles, policies, the sandbox, the secret variables), writing nothing",
		ArgsUsage: "[DIR]",
		Description: "microvm: the template, the sandbox's egress and gateway route, the host and the secret\n" +
			"variables (names and secret references). agentcore: the stack, each role with its exact\n" +
			"policy statements, the repository, the build and the runtime's environment, and the\n" +
			"externalModel line. Refused plans exit 1 with their code (network_policy_unsupported,\n" +
			"provider_unsupported, iam_resource_invalid); a bad project file (an unknown key, a\n" +
			"reserved secret_env name: secret_env_*) exits 2.",
		Flags: append([]cli.Flag{targetFlag(), cliutil.JSONFlag()}, agentCoreFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			target, _, p, err := projectOf(cmd)
			if err != nil {
				return err
			}
			if target == targetAgentCore {
				pl, err := agentCorePlan(f, cmd, p)
				if err != nil {
					return err
				}
				if cmd.Bool("json") {
					return cliutil.PrintJSON(f.IO.Out, pl)
				}
				writeAgentCorePlan(f.IO.Out, pl)
				return nil
			}
			pl, err := microVMPlan(p)
			if err != nil {
				return err
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, pl)
			}
			writeMicroVMPlan(f.IO.Out, pl)
			return nil
		},
	}
}

// agentCorePlan plans for AgentCore from the flags.
func agentCorePlan(f *cliutil.Factory, cmd *cli.Command, p *project.Project) (*agentcore.Plan, error) {
	region := cmd.String("region")
	if region == "" {
		region = f.Getenv("AWS_REGION")
	}
	account := cmd.String("account")
	if account == "" {
		account = accountOf(append(cmd.StringSlice("readable-secret"), secretARNs(p)...))
	}
	pl, err := agentcore.NewPlan(p, agentcore.Options{
		Region: region, Account: account, BedrockModels: cmd.StringSlice("bedrock-model"),
		ReadableSecrets: cmd.StringSlice("readable-secret"), ExternalModel: cmd.Bool("external-model"),
		ArtifactBucket: cmd.String("artifact-bucket"),
	})
	if err != nil {
		return nil, err
	}
	if account == placeholderAccount {
		pl.Note = "the account is not known before deploy: " + placeholderAccount + " stands for it (--account)"
	}
	return pl, nil
}

// placeholderAccount stands for an account the plan does not know.
const placeholderAccount = "123456789012"

// secretARNs are the project's secret references that are ARNs.
func secretARNs(p *project.Project) []string {
	entries, _ := p.Entries()
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Secret, "arn:") {
			out = append(out, e.Secret)
		}
	}
	return out
}

// accountOf is the account of the first ARN, else placeholderAccount.
func accountOf(arns []string) string {
	for _, a := range arns {
		if parts := strings.SplitN(a, ":", 6); len(parts) == 6 && len(parts[4]) == 12 {
			return parts[4]
		}
	}
	return placeholderAccount
}

// record is a deployment, kept 0600 in the state directory: on a MicroVM
// the sandbox and the service token invoke needs; on AgentCore the
// region, the runtime and the stack (no token: AWS signs invocations).
type record struct {
	Name         string    `json:"name"`
	Target       string    `json:"target"`
	SandboxID    string    `json:"sandbox_id,omitempty"`
	Template     string    `json:"template,omitempty"`
	ServiceToken string    `json:"service_token,omitempty"`
	Region       string    `json:"region,omitempty"`
	RuntimeID    string    `json:"runtime_id,omitempty"`
	RuntimeARN   string    `json:"runtime_arn,omitempty"`
	Stack        string    `json:"stack,omitempty"`
	Image        string    `json:"image,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

// valid reports a record with what its target's invoke and delete need.
func (r *record) valid() bool {
	if r.Target == targetAgentCore {
		return r.Region != "" && r.RuntimeID != "" && r.RuntimeARN != ""
	}
	return r.SandboxID != "" && r.ServiceToken != ""
}

// recordsDir is $XDG_STATE_HOME/rayito/agents (beside the token store).
func recordsDir(f *cliutil.Factory) (string, error) {
	tokens, err := rayito.TokenStoreDir(f.Getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(tokens), "agents"), nil
}

func readRecord(f *cliutil.Factory, name string) (*record, error) {
	if !validName(name) {
		return nil, cliutil.Usagef("%q is not an agent name", name)
	}
	dir, err := recordsDir(f)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, &notDeployedError{name: name}
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil || !r.valid() {
		return nil, fmt.Errorf("agent %s: its deployment record is damaged (rayito agent delete %s, then deploy again)", name, name)
	}
	return &r, nil
}

func writeRecord(f *cliutil.Factory, r *record) error {
	dir, err := recordsDir(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+r.Name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, r.Name+".json"))
}

func removeRecord(f *cliutil.Factory, name string) error {
	dir, err := recordsDir(f)
	if err != nil {
		return err
	}
	err = os.Remove(filepath.Join(dir, name+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// notDeployedError is an agent this machine has no deployment of.
type notDeployedError struct{ name string }

func (e *notDeployedError) Error() string {
	return fmt.Sprintf("agent %s is not deployed from this machine (rayito agent deploy)", e.name)
}

// Is matches rayito.ErrNotFound.
func (e *notDeployedError) Is(target error) bool { return target == rayito.ErrNotFound }

func validName(s string) bool {
	p := project.Project{Name: s, Command: []string{"x"}}
	return p.Check() == nil
}

// newToken is a service token: 32 random bytes, hex.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
