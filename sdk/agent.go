package rayito

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/sdk/agentrunner"
)

// AgentRuntime is the coding agent that runs the task in the sandbox.
type AgentRuntime string

// The runtimes.
const (
	// AgentRuntimeDeepAgents is LangChain's Deep Agents (npm deepagents)
	// driven by Rayito's runner, with shell and file tools in the workdir.
	AgentRuntimeDeepAgents AgentRuntime = "deepagents"
	// AgentRuntimeOpenCode is OpenCode (its linux x86_64 binary, npm
	// opencode-linux-x64) run non-interactively by Rayito's runner, with
	// permissions answered yes and autoupdate, sharing, LSP and model-list
	// downloads, default plugins and .claude/ reading off.
	AgentRuntimeOpenCode AgentRuntime = "opencode"
)

// AgentProvider is the API family of a model.
type AgentProvider string

// The providers. Both runtimes speak to each, through the sandbox's
// gateway route (see agent_providers.go for the preset and the API path
// of each, and docs/agent.md).
const (
	ProviderBedrock          AgentProvider = "bedrock"
	ProviderAnthropic        AgentProvider = "anthropic"
	ProviderOpenAI           AgentProvider = "openai"
	ProviderGoogle           AgentProvider = "google"
	ProviderAzure            AgentProvider = "azure"
	ProviderOpenAICompatible AgentProvider = "openai-compatible"
)

// AgentModel is the model an agent uses. The key never reaches the
// sandbox: Gateway names the sandbox's secret gateway route (secrets.WithGateways,
// e.g. secrets.OpenAICompatibleGateway) that adds it, and the runtime is given
// only that route's loopback URL followed by BasePath.
type AgentModel struct {
	Provider AgentProvider
	// ID is the model's id at the provider ("gpt-4.1", ...); for azure,
	// the deployment's name (Azure OpenAI's v1 API,
	// /openai/v1/chat/completions, takes it as the model).
	ID string
	// Gateway is the name of the sandbox's gateway route to the provider.
	Gateway string
	// BasePath is appended to the route's URL (default "/v1"); openai
	// and openai-compatible only (ErrInvalidArgument for the others).
	BasePath string
	// Region is Bedrock's region (like us-east-1): required for bedrock,
	// refused (ErrInvalidArgument) for the other providers.
	Region string
}

// AgentPermission allows or denies a tool (and, for tools that take
// one, a pattern such as a command glob: Tool "bash", Pattern "git *").
// Permissions are a PREFERENCE given to the runtime, not a security
// boundary: a model, or a prompt injection in the workdir, can reach the
// same effect with another tool. The boundary is the sandbox and its
// closed egress. OpenCode honours them (its permission configuration, a
// later entry winning over an earlier one; by default edit and bash are
// allowed and webfetch denied, and nothing is ever asked); so does Deep
// Agents' runner (a denied call is answered "denied by the agent's
// permissions" instead of run; Pattern is a glob on the command of
// execute, on the path of the file tools; the same later-wins order).
type AgentPermission struct {
	Tool    string
	Pattern string
	Allow   bool
}

// AgentSubAgent is a sub-agent the main agent may delegate to (its
// `task` tool under both runtimes): a Deep Agents subagent, an OpenCode
// agent of mode "subagent". It works in the same sandbox and workdir with
// the same model and tools.
type AgentSubAgent struct {
	// Name is [a-z][a-z0-9_-]{0,31}, unique, not one of the runtime's own
	// agents (general-purpose; build, plan, general, explore, ...).
	Name string
	// Description tells the main agent when to delegate (at most 4 KiB).
	Description string
	// Instructions are the sub-agent's system prompt. Never logged.
	Instructions string
}

// AgentMCPServer is an MCP server the agent may use, its tools added to
// the runtime's: a local process in the sandbox speaking MCP on stdio
// (Command), or a remote server speaking streamable HTTP reached only
// through the sandbox's gateway route named Gateway (its URL followed by
// Path). Exactly one of Command and Gateway.
type AgentMCPServer struct {
	// Name is [a-z][a-z0-9_-]{0,31}, unique. Tools are named
	// NAME__TOOL under Deep Agents, NAME_TOOL under OpenCode.
	Name string
	// Command is the server's argv (at most 64 arguments of 4 KiB), run
	// in the sandbox as the agent's user.
	Command []string
	// Gateway is the name of the sandbox's gateway route to the server.
	Gateway string
	// Path is appended to the route's URL ("/mcp", ...; default none).
	Path string
}

// AgentSpec describes the agent. Fields the chosen runtime cannot honour
// yet make Run and Stream answer an *UnimplementedError rather than be
// ignored.
type AgentSpec struct {
	Model AgentModel
	// SmallModel is a cheaper model for side tasks, through its own
	// gateway route if need be: OpenCode's small_model (it then writes
	// the session's title with it); under Deep Agents the model the
	// spec's sub-agents run on (it needs SubAgents there).
	SmallModel *AgentModel
	// Instructions are the agent's system prompt. Never logged.
	Instructions string
	// Permissions: see AgentPermission (at most 64).
	Permissions []AgentPermission
	// SubAgents the agent may delegate to (at most 16; their names,
	// descriptions and instructions count into MaxAgentInputBytes).
	SubAgents []AgentSubAgent
	// MCPServers whose tools the agent may use (at most 8).
	MCPServers []AgentMCPServer
	// RawConfig is a JSON object (at most 64 KiB) of the runtime's own
	// configuration. OpenCode: merged into the generated configuration
	// under Rayito's keys (OpenCodeEnforcedKeys: naming one is
	// ErrInvalidArgument). Deep Agents: model call parameters only
	// (DeepAgentsRawConfigKeys).
	RawConfig json.RawMessage
	// RuntimeVersion, when set, must be the installed runtime's version
	// as the template's manifest records it (AgentRuntimeMismatch
	// otherwise).
	RuntimeVersion string
}

// AgentLimits bound a run; a zero field takes its default. Each ends the
// run with its reason: AgentTimeout, AgentMaxSteps, AgentTokenBudget,
// AgentOutputLimit.
type AgentLimits struct {
	// Timeout is the run's wall time (default 600 s).
	Timeout time.Duration
	// MaxSteps is the number of model steps (default 50).
	MaxSteps int
	// MaxTokens is the input plus output tokens of all steps (default
	// 1 000 000).
	MaxTokens int64
	// MaxOutputBytes is the runtime's event stream (default 16 MiB).
	MaxOutputBytes int64
}

// The default limits.
const (
	DefaultAgentTimeout        = 600 * time.Second
	DefaultAgentMaxSteps       = 50
	DefaultAgentMaxTokens      = 1_000_000
	DefaultAgentMaxOutputBytes = 16 << 20
	// MaxAgentInputBytes bounds the task plus the instructions.
	MaxAgentInputBytes = 1 << 20
)

// AgentOption configures a run (Run, Stream).
type AgentOption interface{ applyAgent(*agentConfig) }

type agentConfig struct {
	spec      AgentSpec
	runtime   AgentRuntime
	limits    AgentLimits
	workdir   string
	sessionID string
}

type agentOption func(*agentConfig)

func (f agentOption) applyAgent(c *agentConfig) { f(c) }

// WithAgentSpec sets the agent's spec.
func WithAgentSpec(spec AgentSpec) AgentOption {
	return agentOption(func(c *agentConfig) { c.spec = spec })
}

// WithAgentModel sets the spec's model.
func WithAgentModel(m AgentModel) AgentOption {
	return agentOption(func(c *agentConfig) { c.spec.Model = m })
}

// WithAgentRuntime chooses the runtime (default AgentRuntimeDeepAgents).
func WithAgentRuntime(rt AgentRuntime) AgentOption {
	return agentOption(func(c *agentConfig) { c.runtime = rt })
}

// WithAgentLimits sets the run's limits.
func WithAgentLimits(l AgentLimits) AgentOption {
	return agentOption(func(c *agentConfig) { c.limits = l })
}

// WithAgentWorkdir sets the directory the agent works in (default
// /home/user).
func WithAgentWorkdir(dir string) AgentOption {
	return agentOption(func(c *agentConfig) { c.workdir = dir })
}

// WithAgentSession continues a previous run's session (not built yet: an
// *UnimplementedError).
func WithAgentSession(id string) AgentOption {
	return agentOption(func(c *agentConfig) { c.sessionID = id })
}

// Agent runs coding agents in the sandbox (Sandbox.Agent).
type Agent struct {
	sbx *Sandbox
}

// Agent is the sandbox's coding agent. The sandbox needs a template built
// with AgentTemplate and a gateway route to the model (secrets.WithGateways);
// create it with Internet access denied so the gateway is the only way
// out. One run at a time per sandbox (AgentBusy), across processes.
func (s *Sandbox) Agent() *Agent { return &Agent{sbx: s} }

// Run runs task to the end and returns the result, or an *AgentError
// (errors.Is(err, ErrAgent)) with its reason. The task, instructions
// and the agent's text are never logged.
func (a *Agent) Run(ctx context.Context, task string, opts ...AgentOption) (*AgentResult, error) {
	for ev, err := range a.Stream(ctx, task, opts...) {
		if err != nil {
			return nil, err
		}
		if ev.Type == AgentEventDone {
			return ev.Result, nil
		}
	}
	return nil, &AgentError{Reason: AgentRuntimeFailed}
}

// agentJob is the runner's stdin.
type agentJob struct {
	Task         string        `json:"task"`
	Workdir      string        `json:"workdir"`
	Model        agentJobModel `json:"model"`
	Instructions string        `json:"instructions,omitempty"`
	MaxSteps     int           `json:"max_steps"`
	// Permissions, in order: a later entry wins.
	Permissions []agentJobPermission `json:"permissions,omitempty"`
	// agentJobSpec: sub-agents, MCP servers, raw configuration.
	agentJobSpec
	// SmallModel is OpenCode's small model (agentSmallModelEntry).
	SmallModel *agentJobModel `json:"small_model,omitempty"`
}

// agentJobPermission is an AgentPermission on the wire.
type agentJobPermission struct {
	Tool    string `json:"tool"`
	Pattern string `json:"pattern,omitempty"`
	Allow   bool   `json:"allow"`
}

// maxAgentPermissions bounds AgentSpec.Permissions.
const maxAgentPermissions = 64

// validToolName is [a-z][a-z0-9_-]{0,63} (an MCP tool's name is its
// server's and its own).
func validToolName(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' && r != '-' {
			return false
		}
	}
	return true
}

// agentJobModel is a model entry of the job (agentModelEntry).
type agentJobModel struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
	BaseURL  string `json:"base_url"`
	Region   string `json:"region,omitempty"`
}

// prepare checks the options and builds the job.
func (a *Agent) prepare(task string, opts []AgentOption) (*agentConfig, *agentJob, error) {
	c := &agentConfig{runtime: AgentRuntimeDeepAgents, workdir: "/home/user"}
	for _, o := range opts {
		if o != nil {
			o.applyAgent(c)
		}
	}
	l := &c.limits
	if l.Timeout == 0 {
		l.Timeout = DefaultAgentTimeout
	}
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultAgentMaxSteps
	}
	if l.MaxTokens == 0 {
		l.MaxTokens = DefaultAgentMaxTokens
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = DefaultAgentMaxOutputBytes
	}
	if l.Timeout < 0 || l.MaxSteps < 0 || l.MaxTokens < 0 || l.MaxOutputBytes < 0 {
		return nil, nil, fmt.Errorf("%w: agent limits must not be negative", ErrInvalidArgument)
	}
	if strings.TrimSpace(task) == "" {
		return nil, nil, fmt.Errorf("%w: empty agent task", ErrInvalidArgument)
	}
	if len(task)+len(c.spec.Instructions) > MaxAgentInputBytes {
		return nil, nil, fmt.Errorf("%w: the task and instructions are over %d bytes", ErrInvalidArgument, MaxAgentInputBytes)
	}
	if !strings.HasPrefix(c.workdir, "/") || strings.ContainsRune(c.workdir, 0) {
		return nil, nil, fmt.Errorf("%w: agent workdir must be an absolute path", ErrInvalidArgument)
	}
	unimpl := func(feature string) error {
		return &UnimplementedError{Feature: feature, Reason: "not built yet for the " + string(c.runtime) + " runtime", Doc: agentDoc}
	}
	switch c.runtime {
	case AgentRuntimeDeepAgents, AgentRuntimeOpenCode:
	default:
		return nil, nil, fmt.Errorf("%w: unknown agent runtime %q", ErrInvalidArgument, c.runtime)
	}
	sp := c.spec
	if sp.SmallModel != nil {
		if err := agentSmallModelSupported(c.runtime, sp); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case c.sessionID != "":
		return nil, nil, unimpl("agent sessions")
	}
	model, err := agentModelEntry(sp.Model, "AgentSpec.Model", a.gatewayURLOf)
	if err != nil {
		return nil, nil, err
	}
	small, err := agentSmallModelEntry(c.runtime, sp.SmallModel, a.gatewayURLOf)
	if err != nil {
		return nil, nil, err
	}
	if len(sp.Permissions) > maxAgentPermissions {
		return nil, nil, fmt.Errorf("%w: at most %d agent permissions", ErrInvalidArgument, maxAgentPermissions)
	}
	var perms []agentJobPermission
	for _, p := range sp.Permissions {
		if !validToolName(p.Tool) || len(p.Pattern) > 256 || strings.ContainsRune(p.Pattern, 0) {
			return nil, nil, fmt.Errorf("%w: an agent permission needs a tool name ([a-z][a-z0-9_-]{0,63}) and a pattern of at most 256 bytes", ErrInvalidArgument)
		}
		perms = append(perms, agentJobPermission(p))
	}
	js, specBytes, err := prepareAgentSpec(c.runtime, sp, func(n string) string { return a.sbx.Gateway(n).URL() })
	if err != nil {
		return nil, nil, err
	}
	if len(task)+len(sp.Instructions)+specBytes > MaxAgentInputBytes {
		return nil, nil, fmt.Errorf("%w: the task, instructions and sub-agents are over %d bytes", ErrInvalidArgument, MaxAgentInputBytes)
	}
	job := &agentJob{Task: task, Workdir: c.workdir, Instructions: sp.Instructions, MaxSteps: l.MaxSteps, Permissions: perms,
		Model: model, SmallModel: small, agentJobSpec: js}
	return c, job, nil
}

// checkRuntime reads the template's manifest and checks the runtime: its
// version against spec.RuntimeVersion, the runner's bytes against the
// sha256 the manifest records.
func (a *Agent) checkRuntime(ctx context.Context, c *agentConfig) (agentrunner.ManifestRuntime, error) {
	raw, err := a.sbx.Files.Read(ctx, agentrunner.ManifestPath)
	if errors.Is(err, ErrNotFound) {
		return agentrunner.ManifestRuntime{}, &AgentError{Reason: AgentRuntimeMissing}
	}
	if err != nil {
		return agentrunner.ManifestRuntime{}, &AgentError{Reason: AgentRuntimeFailed, Cause: err}
	}
	rt, reason := parseAgentManifest(raw, c.runtime, c.spec.RuntimeVersion)
	if reason != "" {
		return agentrunner.ManifestRuntime{}, &AgentError{Reason: reason}
	}
	runner, err := a.sbx.Files.Read(ctx, rt.Runner)
	if errors.Is(err, ErrNotFound) {
		return agentrunner.ManifestRuntime{}, &AgentError{Reason: AgentRuntimeMissing}
	}
	if err != nil {
		return agentrunner.ManifestRuntime{}, &AgentError{Reason: AgentRuntimeFailed, Cause: err}
	}
	sum := sha256.Sum256(runner)
	if hex.EncodeToString(sum[:]) != rt.RunnerSHA256 {
		return agentrunner.ManifestRuntime{}, &AgentError{Reason: AgentRuntimeMismatch}
	}
	return rt, nil
}

// parseAgentManifest reads the template's manifest (written by
// AgentTemplate, but read from the sandbox: untrusted) and returns the
// runtime's entry, or the reason it cannot be used: runtime_mismatch for
// an unreadable manifest, another version than want (when set) or a
// runner path that is not absolute and clean; runtime_missing when the
// runtime is not in it.
func parseAgentManifest(raw []byte, runtime AgentRuntime, want string) (agentrunner.ManifestRuntime, AgentReason) {
	var m agentrunner.Manifest
	if len(raw) > 1<<20 || json.Unmarshal(raw, &m) != nil || m.V != 1 {
		return agentrunner.ManifestRuntime{}, AgentRuntimeMismatch
	}
	rt, ok := m.Runtimes[string(runtime)]
	if !ok || rt.Runner == "" {
		return agentrunner.ManifestRuntime{}, AgentRuntimeMissing
	}
	if !strings.HasPrefix(rt.Runner, "/opt/agents/") || path.Clean(rt.Runner) != rt.Runner || strings.ContainsRune(rt.Runner, 0) || len(rt.RunnerSHA256) != 64 {
		return agentrunner.ManifestRuntime{}, AgentRuntimeMismatch
	}
	if want != "" && want != rt.Version {
		return agentrunner.ManifestRuntime{}, AgentRuntimeMismatch
	}
	return rt, ""
}

// Stream runs task and yields its events as they happen. A run that ends
// without finishing yields, as its last element, an agent_failed event
// together with its *AgentError; a done event (with Result) ends a run
// that finished. Options that are wrong or not built yet are the only
// element's error (ErrInvalidArgument, *UnimplementedError). Stopping the
// iteration, or cancelling ctx, kills the runtime's process group
// (AgentAborted).
func (a *Agent) Stream(ctx context.Context, task string, opts ...AgentOption) iter.Seq2[AgentEvent, error] {
	return func(yield func(AgentEvent, error) bool) {
		c, job, err := a.prepare(task, opts)
		if err != nil {
			yield(AgentEvent{}, err)
			return
		}
		// The span ends with the run: its tokens, and its reason unless it
		// finished (a run the caller stopped early is aborted).
		ctx, sp := startAgentSpan(ctx, a.sbx.cfg, a.sbx.spanID(), c)
		var spanUsage AgentUsage
		spanReason := AgentAborted
		defer func() { sp.endAgent(spanUsage, spanReason) }()
		failed := func(reason AgentReason, cause error) {
			spanReason = reason
			yield(AgentEvent{Type: AgentEventFailed, Reason: reason}, &AgentError{Reason: reason, Cause: cause})
		}
		runCtx, cancel := context.WithTimeoutCause(ctx, c.limits.Timeout, errAgentTimeout)
		defer cancel()
		rt, err := a.checkRuntime(runCtx, c)
		if err != nil {
			var ae *AgentError
			if errors.As(err, &ae) {
				if r := a.ctxReason(ctx, runCtx); r != "" {
					failed(r, nil)
					return
				}
				spanReason = ae.Reason
				yield(AgentEvent{Type: AgentEventFailed, Reason: ae.Reason}, err)
				return
			}
			spanReason = AgentRuntimeFailed
			yield(AgentEvent{}, err)
			return
		}
		in, err := json.Marshal(job)
		if err != nil {
			failed(AgentRuntimeFailed, err)
			return
		}
		pr, pw := io.Pipe()
		h, err := a.sbx.Commands.StartExec(runCtx, []string{"node", rt.Runner}, WithStdin(), WithCwd(c.workdir),
			WithMaxOutputBytes(4096), OnStdout(func(b []byte) { _, _ = pw.Write(b) }), OnStderr(func([]byte) {}),
			WithTag("rayito-agent"))
		if err != nil {
			pr.Close()
			if r := a.ctxReason(ctx, runCtx); r != "" {
				failed(r, nil)
				return
			}
			failed(AgentRuntimeFailed, err)
			return
		}
		// kill ends the runner's process group and waits (10 s at most)
		// for it to be gone, so that its lock is free when Stream returns.
		exited := make(chan struct{})
		killed := false
		kill := func() {
			if !killed {
				killed = true
				kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer kcancel()
				_ = h.Kill(kctx)
				_ = pr.Close()
				select {
				case <-exited:
				case <-kctx.Done():
				}
			}
		}
		defer kill()
		defer pr.Close()
		go func() {
			_, werr := h.Wait(context.WithoutCancel(ctx))
			_ = pw.CloseWithError(werr)
			close(exited)
		}()
		if err := h.SendStdin(runCtx, in); err != nil {
			kill()
			if r := a.ctxReason(ctx, runCtx); r != "" {
				failed(r, nil)
				return
			}
			failed(AgentRuntimeFailed, err)
			return
		}
		if err := h.CloseStdin(runCtx); err != nil {
			kill()
			failed(AgentRuntimeFailed, err)
			return
		}
		// Reading stops when the context ends: the pipe is closed under
		// the reader.
		stop := context.AfterFunc(runCtx, func() { _ = pr.CloseWithError(context.Cause(runCtx)) })
		defer stop()
		st := &agentStream{yield: yield, kill: kill, failedFn: failed, usage: &spanUsage, reason: &spanReason}
		a.readEvents(ctx, runCtx, st, bufio.NewReaderSize(pr, 64<<10), c, rt.Version)
	}
}

// agentStream is what reading one Stream run's events needs of the run:
// its caller's yield, how it is killed and failed, and what its span ends
// with.
type agentStream struct {
	yield    func(AgentEvent, error) bool
	kill     func()
	failedFn func(AgentReason, error)
	usage    *AgentUsage
	reason   *AgentReason
}

func (st *agentStream) failed(reason AgentReason, cause error) { st.failedFn(reason, cause) }

// readEvents yields the runner's events from lines until the run is done,
// fails, passes a limit or the caller stops; every way out but done kills
// the runner.
func (a *Agent) readEvents(ctx, runCtx context.Context, st *agentStream, lines *bufio.Reader, c *agentConfig, rtVersion string) {
	var outBytes int64
	var total int64
	for {
		line, rerr := readAgentLine(lines)
		outBytes += int64(len(line))
		if outBytes > c.limits.MaxOutputBytes {
			st.kill()
			st.failed(AgentOutputLimit, nil)
			return
		}
		if len(line) > 0 {
			ev, perr := parseAgentEvent(line)
			if perr != nil {
				st.kill()
				st.failed(AgentRuntimeFailed, nil)
				return
			}
			switch ev.Type {
			case AgentEventStepStarted:
				if ev.Step > c.limits.MaxSteps {
					st.kill()
					st.failed(AgentMaxSteps, nil)
					return
				}
			case AgentEventStepFinished:
				total += ev.Usage.Total()
				st.usage.InputTokens += ev.Usage.InputTokens
				st.usage.OutputTokens += ev.Usage.OutputTokens
			case AgentEventFailed:
				st.kill()
				st.failed(ev.Reason, nil)
				return
			case AgentEventDone:
				ev.Result.Runtime, ev.Result.RuntimeVersion = c.runtime, rtVersion
				*st.reason = ""
			}
			if !st.yield(ev, nil) {
				st.kill()
				return
			}
			if ev.Type == AgentEventDone {
				return
			}
			if total > c.limits.MaxTokens {
				st.kill()
				st.failed(AgentTokenBudget, nil)
				return
			}
		}
		if rerr != nil {
			st.kill()
			if errors.Is(rerr, errAgentLineTooLong) {
				st.failed(AgentOutputLimit, nil)
				return
			}
			if r := a.ctxReason(ctx, runCtx); r != "" {
				st.failed(r, nil)
				return
			}
			// The runner ended without done or agent_failed.
			st.failed(AgentRuntimeFailed, nil)
			return
		}
	}
}

// errAgentTimeout is the run context's cause when the run's timeout
// passes.
var errAgentTimeout = errors.New("agent timeout")

// ctxReason is the reason the run's context ended, if it did: the run's
// timeout, or the caller's context (aborted).
func (a *Agent) ctxReason(ctx, runCtx context.Context) AgentReason {
	switch {
	case ctx.Err() != nil:
		return AgentAborted
	case errors.Is(context.Cause(runCtx), errAgentTimeout):
		return AgentTimeout
	case runCtx.Err() != nil:
		return AgentAborted
	}
	return ""
}

// errAgentLineTooLong is an event line longer than maxAgentLine.
var errAgentLineTooLong = errors.New("agent event line too long")

// readAgentLine reads one line (without its newline) of at most
// maxAgentLine bytes.
func readAgentLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxAgentLine {
			return nil, errAgentLineTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = slices.Clip(line)
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		return line, err
	}
}
