package rayito

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rayito-dev/rayito/sdk/agentrunner"
	"github.com/rayito-dev/rayito/sdk/template"
)

// AgentTemplateOption configures AgentTemplate.
type AgentTemplateOption interface{ applyAgentTemplate(*agentTemplateConfig) }

type agentTemplateConfig struct {
	base     string
	runtimes []AgentRuntime
}

type agentTemplateOption func(*agentTemplateConfig)

func (f agentTemplateOption) applyAgentTemplate(c *agentTemplateConfig) { f(c) }

// WithAgentBase sets the template AgentTemplate starts from (default
// "local", the local platform's own, whose /usr has node).
func WithAgentBase(base string) AgentTemplateOption {
	return agentTemplateOption(func(c *agentTemplateConfig) { c.base = base })
}

// WithAgentRuntimes chooses the runtimes AgentTemplate installs (default:
// Deep Agents).
func WithAgentRuntimes(rts ...AgentRuntime) AgentTemplateOption {
	rts = slices.Clone(rts)
	return agentTemplateOption(func(c *agentTemplateConfig) { c.runtimes = rts })
}

// AgentTemplate is a template that carries the agent runtimes: the Deep
// Agents runner and its npm packages under /opt/agents/deepagents, the
// OpenCode binary (linux x86_64) and its runner under /opt/agents/opencode
// (WithAgentRuntimes), and the manifest /opt/agents/rayito-agent.json
// (runtime versions, each runner's sha256). The build downloads the
// pinned tarballs (npm pack), checks them with sha256sum -c against the
// pins of sdk/agentrunner/pins.json, and installs them (Deep Agents with
// npm ci from the embedded package-lock.json, which checks every
// package's integrity); it needs Internet access and node 20 or later in
// the base. Build it like any
// template (template.Compile with any context directory, BuildTemplate).
func AgentTemplate(opts ...AgentTemplateOption) (*template.Template, error) {
	c := agentTemplateConfig{base: "local", runtimes: []AgentRuntime{AgentRuntimeDeepAgents}}
	for _, o := range opts {
		if o != nil {
			o.applyAgentTemplate(&c)
		}
	}
	pins, err := agentrunner.LoadPins()
	if err != nil {
		return nil, err
	}
	if len(c.runtimes) == 0 {
		return nil, fmt.Errorf("%w: AgentTemplate: no runtime", ErrInvalidArgument)
	}
	tpl := template.FromBaseImage(c.base)
	manifest := agentrunner.Manifest{V: 1, Runtimes: map[string]agentrunner.ManifestRuntime{}}
	for _, rt := range c.runtimes {
		var dir, runner, runnerSum string
		var files map[string][]byte
		switch rt {
		case AgentRuntimeDeepAgents:
			dir, runner, runnerSum = agentrunner.DeepAgentsDir, agentrunner.DeepAgentsRunner, agentrunner.DeepAgentsRunnerSHA256()
			files = agentrunner.DeepAgentsFiles()
		case AgentRuntimeOpenCode:
			dir, runner, runnerSum = agentrunner.OpenCodeDir, agentrunner.OpenCodeRunner, agentrunner.OpenCodeRunnerSHA256()
			files = agentrunner.OpenCodeFiles()
		default:
			return nil, fmt.Errorf("%w: AgentTemplate: unknown runtime %q", ErrInvalidArgument, rt)
		}
		if _, ok := manifest.Runtimes[string(rt)]; ok {
			return nil, fmt.Errorf("%w: AgentTemplate: runtime %q twice", ErrInvalidArgument, rt)
		}
		pin, ok := pins.Runtimes[string(rt)]
		if !ok {
			return nil, fmt.Errorf("%w: AgentTemplate: no pins for %q", ErrInvalidArgument, rt)
		}
		files["pins.sha256"] = []byte(pin.SHA256SumLines())
		tpl = tpl.RunCmd("mkdir -p " + dir + " && chmod 0755 /opt/agents " + dir)
		for _, name := range slices.Sorted(maps.Keys(files)) {
			// A run step holds at most 64 KiB: a larger file (the lock)
			// is written in pieces (each a whole number of base64 quanta).
			b64 := base64.StdEncoding.EncodeToString(files[name])
			for first := true; first || b64 != ""; first = false {
				n := min(len(b64), agentFileStepBytes)
				op := ">>"
				if first {
					op = ">"
				}
				tpl = tpl.RunCmd(fmt.Sprintf("echo %s | base64 -d %s %s/%s && chmod 0644 %s/%s", b64[:n], op, dir, name, dir, name))
				b64 = b64[n:]
			}
		}
		tpl = tpl.RunCmd(installScript(rt, dir, pin))
		manifest.Runtimes[string(rt)] = agentrunner.ManifestRuntime{
			Version: pin.Version, Runner: runner, RunnerSHA256: runnerSum, Packages: pin.Packages,
		}
	}
	mb, err := json.MarshalIndent(manifest, "", "  ")
	if err != nil {
		return nil, err
	}
	tpl = tpl.RunCmd(fmt.Sprintf("echo %s | base64 -d > %s && chmod 0644 %s",
		base64.StdEncoding.EncodeToString(append(mb, '\n')), agentrunner.ManifestPath, agentrunner.ManifestPath))
	return tpl, tpl.Err()
}

// agentFileStepBytes is the base64 text of a file one template step
// writes (a multiple of 4, well under a step's 64 KiB).
const agentFileStepBytes = 48 << 10

// installScript checks node (and the machine), fetches the pinned
// tarballs, checks their sha256 and installs them: Deep Agents with npm ci
// from the lock file, OpenCode by unpacking its binary's package.
func installScript(rt AgentRuntime, dir string, pin agentrunner.Runtime) string {
	lines := []string{
		"set -eu",
		"export npm_config_cache=/tmp/rayito-npm-cache npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false",
		fmt.Sprintf(`v=$(node -p 'process.versions.node.split(".")[0]'); [ "$v" -ge %d ] || { echo "node $v is older than %d" >&2; exit 1; }`, pin.NodeMinMajor, pin.NodeMinMajor),
	}
	lines = append(lines, "t=$(mktemp -d /tmp/rayito-pins.XXXXXX)")
	// fetch packs and checks the packages of one machine (or of all).
	fetch := func(pk agentrunner.Runtime, indent string) {
		lines = append(lines, indent+"cd \"$t\" && npm pack --silent "+strings.Join(pk.Specs(), " ")+" >/dev/null")
		if arches := pin.Arches(); len(arches) == 0 {
			lines = append(lines, indent+"sha256sum -c "+dir+"/pins.sha256")
		} else {
			// Only this machine's lines of the pins (the others' tarballs
			// are not fetched).
			sums := strings.Split(strings.TrimSuffix(pk.SHA256SumLines(), "\n"), "\n")
			lines = append(lines, indent+"printf '%s\\n' '"+strings.Join(sums, "' '")+"' | sha256sum -c -")
		}
		if rt == AgentRuntimeOpenCode {
			for _, p := range pk.Packages {
				lines = append(lines, indent+"tar -xzf \"$t\"/"+p.Tarball+" -C "+dir+" --no-same-owner --no-same-permissions")
			}
		}
	}
	if arches := pin.Arches(); len(arches) > 0 {
		// Per-machine packages: this machine's, or a stop.
		lines = append(lines, "arch=$(uname -m)",
			fmt.Sprintf(`case "$arch" in %s) ;; *) echo "the pinned %s runs on %s only" >&2; exit 1;; esac`,
				strings.Join(arches, "|"), rt, strings.Join(arches, ", ")))
		for _, a := range arches {
			lines = append(lines, fmt.Sprintf(`if [ "$arch" = %s ]; then`, a))
			fetch(pin.For(a), "  ")
			lines = append(lines, "fi")
		}
	} else {
		fetch(pin, "")
	}
	switch rt {
	case AgentRuntimeOpenCode:
		lines = append(lines, "chmod -R a+rX "+dir, "chmod 0755 "+dir+"/package/bin/opencode", dir+"/package/bin/opencode --version")
	default:
		lines = append(lines, "cd "+dir+" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund")
	}
	lines = append(lines, "rm -rf \"$t\" /tmp/rayito-npm-cache", "sha256sum "+dir+"/runner.mjs")
	return strings.Join(lines, "\n")
}
