package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/rayito-dev/rayito/agenthost/project"
)

// TestSynth: the example synthesizes (with a stand-in arm64 host: the
// real one is built by `cdk synth`).
func TestSynth(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "host")
	var b bytes.Buffer
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	for _, v := range []any{uint16(2), uint16(183), uint32(1), uint64(0), uint64(0), uint64(0), uint32(0), uint16(64), uint16(56), uint16(0), uint16(64), uint16(0), uint16(0)} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	if err := os.WriteFile(host, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "cdk.out")
	if err := synth(out, host); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "RayitoHelloAgent.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Resources map[string]struct{ Type string }
	}
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, r := range tmpl.Resources {
		types[r.Type]++
	}
	for _, want := range []string{"AWS::BedrockAgentCore::Runtime", "Custom::RayitoImageBuild", "Custom::RayitoRuntimeMmds", "AWS::IAM::Role"} {
		if types[want] == 0 {
			t.Errorf("no %s in %v", want, types)
		}
	}
}

// TestSampleAgentIsInits: the sample project is what `rayito agent init`
// writes (project.SampleAgent), with its [model] uncommented.
func TestSampleAgentIsInits(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("agent", "agent.py"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != project.SampleAgent {
		t.Error("agent/agent.py differs from project.SampleAgent: copy it again")
	}
	p, err := project.Load("agent")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "hello-agent" || p.Model == nil || p.Model.Provider != "bedrock" {
		t.Errorf("project %+v", p)
	}
}
