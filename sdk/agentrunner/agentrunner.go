// Package agentrunner holds what Rayito installs into a sandbox to run a
// coding agent: the runner scripts of each runtime, their npm lock files,
// and the pins (versions and sha256 of the npm tarballs) the template
// build checks before installing. The SDK's AgentTemplate and Agent use
// it; programs rarely need it directly.
package agentrunner

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
)

// ManifestPath is the manifest a template with agent runtimes carries.
const ManifestPath = "/opt/agents/rayito-agent.json"

// DeepAgentsDir is where the Deep Agents runtime is installed.
const DeepAgentsDir = "/opt/agents/deepagents"

// DeepAgentsRunner is the path of the Deep Agents runner in a sandbox.
const DeepAgentsRunner = DeepAgentsDir + "/runner.mjs"

//go:embed pins.json
var pinsJSON []byte

//go:embed common.mjs
var commonRunner []byte

//go:embed deepagents/main.mjs
var deepAgentsMain []byte

// deepAgentsRunner and openCodeRunner are the runners as installed: the
// common part followed by the runtime's own.
var (
	deepAgentsRunner = runnerOf(deepAgentsMain)
	openCodeRunner   = runnerOf(openCodeMain)
)

// runnerOf is the common part, then main.
func runnerOf(main []byte) []byte {
	out := append([]byte(nil), commonRunner...)
	out = append(out, '\n')
	return append(out, main...)
}

//go:embed deepagents/package.json
var deepAgentsPackage []byte

//go:embed deepagents/package-lock.json
var deepAgentsLock []byte

//go:embed opencode/main.mjs
var openCodeMain []byte

// OpenCodeDir is where the OpenCode runtime is installed (the binary in
// package/bin/opencode, the runner beside it).
const OpenCodeDir = "/opt/agents/opencode"

// OpenCodeRunner is the path of the OpenCode runner in a sandbox.
const OpenCodeRunner = OpenCodeDir + "/runner.mjs"

// OpenCodeFiles are the files of the OpenCode runtime's directory: the
// runner (the binary comes from the pinned npm tarball).
func OpenCodeFiles() map[string][]byte {
	return map[string][]byte{"runner.mjs": append([]byte(nil), openCodeRunner...)}
}

// OpenCodeRunnerSHA256 is the hex sha256 of the embedded OpenCode runner.
func OpenCodeRunnerSHA256() string {
	s := sha256.Sum256(openCodeRunner)
	return hex.EncodeToString(s[:])
}

// Package is one pinned npm package.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Tarball is the file name `npm pack` gives it.
	Tarball string `json:"tarball"`
	// SHA256 is the hex sha256 of the tarball.
	SHA256 string `json:"sha256"`
	// Arch, when set, is the machine (uname -m: x86_64, aarch64) the
	// package is installed on; the others skip it.
	Arch string `json:"arch,omitempty"`
}

// Runtime is the pins of one runtime.
type Runtime struct {
	Version      string `json:"version"`
	NodeMinMajor int    `json:"node_min_major"`
	// Packages are installed on every machine, but those with an Arch
	// only on theirs. A runtime with per-machine packages runs only on
	// the machines they name (Arches).
	Packages []Package `json:"packages"`
}

// Arches are the machines the runtime's per-machine packages name,
// sorted (none: the runtime runs anywhere node does).
func (rt Runtime) Arches() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range rt.Packages {
		if p.Arch != "" && !seen[p.Arch] {
			seen[p.Arch] = true
			out = append(out, p.Arch)
		}
	}
	sort.Strings(out)
	return out
}

// For is the runtime with only the packages installed on machine arch
// (uname -m).
func (rt Runtime) For(arch string) Runtime {
	out := rt
	out.Packages = nil
	for _, p := range rt.Packages {
		if p.Arch == "" || p.Arch == arch {
			out.Packages = append(out.Packages, p)
		}
	}
	return out
}

// Pins is pins.json.
type Pins struct {
	V        int                `json:"v"`
	Runtimes map[string]Runtime `json:"runtimes"`
}

// LoadPins parses the embedded pins.json and checks it: every package has
// a name, a version, a tarball name, a 64-hex sha256 and a plain machine
// name if any.
func LoadPins() (*Pins, error) {
	return parsePins(pinsJSON)
}

// parsePins is LoadPins of raw.
func parsePins(raw []byte) (*Pins, error) {
	var p Pins
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("agentrunner: pins.json: %w", err)
	}
	if p.V != 1 {
		return nil, fmt.Errorf("agentrunner: pins.json: version %d", p.V)
	}
	for name, rt := range p.Runtimes {
		if rt.Version == "" || len(rt.Packages) == 0 {
			return nil, fmt.Errorf("agentrunner: pins.json: runtime %q has no version or packages", name)
		}
		for _, pk := range rt.Packages {
			if b, err := hex.DecodeString(pk.SHA256); err != nil || len(b) != sha256.Size || pk.Name == "" || pk.Version == "" || !plainName(pk.Tarball) ||
				pk.Arch != "" && !plainName(pk.Arch) {
				return nil, fmt.Errorf("agentrunner: pins.json: package %q of %q is incomplete", pk.Name, name)
			}
		}
	}
	return &p, nil
}

// plainName is a file name without a path or shell metacharacters.
func plainName(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// SHA256SumLines is the input of `sha256sum -c` for the runtime's
// tarballs, in a stable order.
func (rt Runtime) SHA256SumLines() string {
	pk := append([]Package(nil), rt.Packages...)
	sort.Slice(pk, func(i, j int) bool { return pk[i].Tarball < pk[j].Tarball })
	var s string
	for _, p := range pk {
		s += p.SHA256 + "  " + p.Tarball + "\n"
	}
	return s
}

// Specs are the `npm pack` arguments of the runtime's packages.
func (rt Runtime) Specs() []string {
	var out []string
	for _, p := range rt.Packages {
		out = append(out, p.Name+"@"+p.Version)
	}
	return out
}

// DeepAgentsFiles are the files of the Deep Agents runtime's directory:
// the runner, package.json and package-lock.json (npm ci checks every
// package's integrity against it).
func DeepAgentsFiles() map[string][]byte {
	return map[string][]byte{
		"runner.mjs":        append([]byte(nil), deepAgentsRunner...),
		"package.json":      append([]byte(nil), deepAgentsPackage...),
		"package-lock.json": append([]byte(nil), deepAgentsLock...),
	}
}

// DeepAgentsRunnerSHA256 is the hex sha256 of the embedded runner.
func DeepAgentsRunnerSHA256() string {
	s := sha256.Sum256(deepAgentsRunner)
	return hex.EncodeToString(s[:])
}

// Manifest is ManifestPath's content.
type Manifest struct {
	V        int                        `json:"v"`
	Runtimes map[string]ManifestRuntime `json:"runtimes"`
}

// ManifestRuntime is one installed runtime.
type ManifestRuntime struct {
	Version      string    `json:"version"`
	Runner       string    `json:"runner"`
	RunnerSHA256 string    `json:"runner_sha256"`
	Packages     []Package `json:"packages"`
}
