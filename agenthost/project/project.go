// Package project reads an agent project: its rayito-agent.toml, which
// names the agent, the command the host runs, the model, the egress the
// agent needs and the secrets it receives as environment variables (names
// and secret references only: never a value). The CLI's plan and deploy,
// and the constructs, read projects with it.
package project

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"

	"github.com/rayito-dev/rayito/agenthost/secretenv"
)

// FileName is the project file in a project's directory.
const FileName = "rayito-agent.toml"

// MaxFileBytes bounds the project file.
const MaxFileBytes = 256 << 10

// Project is a parsed, checked project file.
type Project struct {
	// Name is the agent's name: [a-z][a-z0-9-]{0,31}.
	Name string `toml:"name"`
	// Command is the agent's command, run by the host in the project's
	// directory; the agent serves HTTP on 127.0.0.1:$PORT (GET /ping,
	// POST /invocations).
	Command []string `toml:"command"`
	// Model is the agent's model (optional).
	Model *Model `toml:"model"`
	// Egress is what the agent may reach (MicroVMs only).
	Egress *Egress `toml:"egress"`
	// SecretEnv maps a variable to a secret's name or ARN.
	SecretEnv map[string]string `toml:"secret_env"`
	// SecretEnvFrom takes variables from the keys of JSON secrets.
	SecretEnvFrom []SecretEnvFrom `toml:"secret_env_from"`
}

// Model is the agent's model.
type Model struct {
	// Provider: bedrock, anthropic, openai or openai-compatible.
	Provider string `toml:"provider"`
	// ID is the model's id ("anthropic.claude-...", "gpt-4.1").
	ID string `toml:"id"`
	// Region is Bedrock's region.
	Region string `toml:"region"`
	// KeySecret names the secret holding the provider's key (MicroVMs:
	// the secret gateway adds it; the agent never sees it).
	KeySecret string `toml:"key_secret"`
	// BaseURL is an openai-compatible provider's https URL.
	BaseURL string `toml:"base_url"`
}

// Egress is the hosts the agent may reach besides its model.
type Egress struct {
	Allow []string `toml:"allow"`
}

// SecretEnvFrom takes the variables Keys from the JSON secret Secret,
// each variable named like its key.
type SecretEnvFrom struct {
	Secret string   `toml:"secret"`
	Keys   []string `toml:"keys"`
}

// ErrInvalid is a project file that cannot be used.
var ErrInvalid = errors.New("invalid agent project")

var (
	namePattern   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	regionPattern = regexp.MustCompile(`^[a-z]{2}(-gov)?-[a-z]+-\d$`)
	// Compiled on first use (sync.OnceValue): a counted repetition such as
	// {1,512} compiles to a program of hundreds of KB, which every start of
	// the CLI would otherwise build.
	hostPattern = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)
	})
)

// Providers are the model providers a project may name.
var Providers = []string{"bedrock", "anthropic", "openai", "openai-compatible"}

// Load reads dir's project file.
func Load(dir string) (*Project, error) {
	f, err := os.Open(filepath.Join(dir, FileName))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s must be a regular file of at most %d bytes", ErrInvalid, FileName, MaxFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Parse parses and checks a project file. Unknown keys are errors.
func Parse(b []byte) (*Project, error) {
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%w: over %d bytes", ErrInvalid, MaxFileBytes)
	}
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Project
	if err := dec.Decode(&p); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) && len(sm.Errors) > 0 {
			return nil, fmt.Errorf("%w: unknown key %s", ErrInvalid, strings.Join(sm.Errors[0].Key(), "."))
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%w: line %d column %d: %s", ErrInvalid, row, col, de.Error())
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Check checks the project.
func (p *Project) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
	}
	if !namePattern.MatchString(p.Name) {
		return bad("name must be [a-z][a-z0-9-]{0,31}")
	}
	if len(p.Command) == 0 || len(p.Command) > 64 || p.Command[0] == "" {
		return bad("command must be 1 to 64 strings, the first the program")
	}
	for _, a := range p.Command {
		if len(a) > 4096 || strings.IndexByte(a, 0) >= 0 {
			return bad("a command argument is over 4096 bytes or has a NUL byte")
		}
	}
	if m := p.Model; m != nil {
		if !slices.Contains(Providers, m.Provider) {
			return bad("model.provider must be one of %s", strings.Join(Providers, ", "))
		}
		if len(m.ID) > 256 || !printable(m.ID) || strings.ContainsAny(m.ID, "?#") {
			return bad("model.id must be 1 to 256 printable characters without spaces, ? or #")
		}
		if m.Provider == "bedrock" && !regionPattern.MatchString(m.Region) {
			return bad("model.region must be a Bedrock region (us-east-1)")
		}
		if m.Provider != "bedrock" && m.Region != "" {
			return bad("model.region is for bedrock only")
		}
		if m.Provider == "openai-compatible" && !strings.HasPrefix(m.BaseURL, "https://") {
			return bad("model.base_url must be an https URL for openai-compatible")
		}
		if m.Provider != "openai-compatible" && m.BaseURL != "" {
			return bad("model.base_url is for openai-compatible only")
		}
		if m.KeySecret != "" && !printable(m.KeySecret) {
			return bad("model.key_secret is not a secret name")
		}
	}
	if e := p.Egress; e != nil {
		if len(e.Allow) > 64 {
			return bad("egress.allow has over 64 hosts")
		}
		for _, h := range e.Allow {
			if !hostPattern().MatchString(h) {
				return bad("egress.allow entries must be host names (api.example.com, *.example.com)")
			}
		}
	}
	if _, err := p.Entries(); err != nil {
		return err
	}
	return nil
}

func printable(s string) bool {
	if s == "" || len(s) > 2048 {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r > 0x7e {
			return false
		}
	}
	return true
}

// Entries are the project's secret variables, checked (secretenv.Check:
// reserved names refused, no name twice), sorted by name.
func (p *Project) Entries() ([]secretenv.Entry, error) {
	var out []secretenv.Entry
	for name, secret := range p.SecretEnv {
		out = append(out, secretenv.Entry{Name: name, Secret: secret})
	}
	for _, f := range p.SecretEnvFrom {
		if len(f.Keys) == 0 {
			return nil, &secretenv.Error{Code: secretenv.CodeInvalid}
		}
		for _, k := range f.Keys {
			out = append(out, secretenv.Entry{Name: k, Secret: f.Secret, Key: k})
		}
	}
	slices.SortFunc(out, func(a, b secretenv.Entry) int { return strings.Compare(a.Name, b.Name) })
	if err := secretenv.Check(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Template is a new project's rayito-agent.toml (rayito agent init).
func Template(name string) string {
	return `# Rayito agent project (docs/agent-host.md).
name = "` + name + `"
# The agent: run by the agent host in this directory; it serves HTTP on
# 127.0.0.1:$PORT (GET /ping, POST /invocations).
command = ["python3", "agent.py"]

# [model]
# provider = "bedrock"          # bedrock, anthropic, openai, openai-compatible
# id = "anthropic.claude-3-5-haiku-20241022-v1:0"
# region = "us-east-1"
# key_secret = "anthropic-key"  # MicroVMs: the secret gateway adds it; the agent never sees it

# [egress]                      # MicroVMs only: the hosts the agent may reach
# allow = ["api.github.com"]

# [secret_env]                  # VARIABLE = secret name or ARN (never a value)
# GITHUB_TOKEN = "github-token"

# [[secret_env_from]]           # variables from the keys of a JSON secret
# secret = "prod/db"
# keys = ["DB_USER", "DB_PASSWORD"]
`
}

// SampleAgent is a new project's agent.py: an echo agent on the standard
// library.
const SampleAgent = `"""A sample Rayito agent: serves GET /ping and POST /invocations on $PORT."""
import json
import logging
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

log = logging.getLogger("agent")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/ping":
            self.send_error(404)
            return
        self._json({"status": "Healthy"})

    def do_POST(self):
        if self.path != "/invocations":
            self.send_error(404)
            return
        n = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(n) or b"{}")
        log.info("invocation")
        self._json({"answer": "echo: " + str(payload.get("prompt", ""))})

    def _json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
`
