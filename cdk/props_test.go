package cdk_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/agenthost/project"
	"github.com/rayito-dev/rayito/agenthost/secretenv"
	"github.com/rayito-dev/rayito/cdk"
)

// TestBadAgentProps: props that cannot be deployed are a *PropsError
// with a closed code, nothing is added to the stack, nothing panics.
func TestBadAgentProps(t *testing.T) {
	dir := t.TempDir()
	_, host, _, err := fixture(dir, testProject)
	if err != nil {
		t.Fatal(err)
	}
	proj := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, project.FileName), []byte(body), 0o644)
		return p
	}
	good := proj("good", testProject)
	x86 := filepath.Join(dir, "x86")
	b := armELF()
	b[18] = 62 // EM_X86_64
	os.WriteFile(x86, b, 0o755)
	linkProj := proj("link", testProject)
	os.Symlink("/etc/passwd", filepath.Join(linkProj, "passwd"))

	_, envStack := newStack(t.TempDir())
	agnostic := awscdk.NewStack(awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())}), jsii.String("NoEnv"), nil)
	base := func(mod func(*cdk.RayitoAgentProps)) *cdk.RayitoAgentProps {
		p := &cdk.RayitoAgentProps{ProjectDir: good, HostBinary: host, BaseImage: testBase, ArtifactBucket: testBucket}
		if mod != nil {
			mod(p)
		}
		return p
	}
	cases := []struct {
		name  string
		stack awscdk.Stack
		id    string
		props *cdk.RayitoAgentProps
		code  string
		cause error
	}{
		{"nil props", envStack, "A", nil, cdk.CodePropsInvalid, nil},
		{"bad id", envStack, "a/b", base(nil), cdk.CodePropsInvalid, nil},
		{"no project dir", envStack, "A", base(func(p *cdk.RayitoAgentProps) { p.ProjectDir = "" }), cdk.CodePropsInvalid, nil},
		{"invalid name", envStack, "A", base(func(p *cdk.RayitoAgentProps) {
			p.ProjectDir = proj("badname", strings.Replace(testProject, `name = "demo"`, `name = "Demo_Agent"`, 1))
		}), cdk.CodeProjectInvalid, project.ErrInvalid},
		{"name ECR refuses", envStack, "A", base(func(p *cdk.RayitoAgentProps) {
			p.ProjectDir = proj("dash", strings.Replace(testProject, `name = "demo"`, `name = "demo-"`, 1))
		}), agentcore.CodeResourceInvalid, agentcore.ErrPlan},
		{"egress", envStack, "A", base(func(p *cdk.RayitoAgentProps) {
			p.ProjectDir = proj("egress", testProject+"\n[egress]\nallow = [\"api.github.com\"]\n")
		}), agentcore.CodeNetworkPolicyUnsupported, agentcore.ErrPlan},
		{"openai without ExternalModel", envStack, "A", base(func(p *cdk.RayitoAgentProps) {
			p.ProjectDir = proj("openai", "name = \"demo\"\ncommand = [\"python3\", \"agent.py\"]\n[model]\nprovider = \"openai\"\nid = \"gpt-4.1\"\n")
		}), agentcore.CodeProviderUnsupported, agentcore.ErrPlan},
		{"secret of another account", envStack, "A", base(func(p *cdk.RayitoAgentProps) {
			p.ReadableSecrets = []string{"arn:aws:secretsmanager:us-east-1:210987654321:secret:x-AbCdEf"}
		}), agentcore.CodeResourceInvalid, agentcore.ErrPlan},
		{"reserved secret name", envStack, "A", base(func(p *cdk.RayitoAgentProps) {
			p.ProjectDir = proj("reserved", strings.Replace(testProject, "GITHUB_TOKEN", "PATH", 1))
		}), cdk.CodeProjectInvalid, secretenv.ErrSecretEnv},
		{"no bucket", envStack, "A", base(func(p *cdk.RayitoAgentProps) { p.ArtifactBucket = "" }), cdk.CodePropsInvalid, nil},
		{"bad retention", envStack, "A", base(func(p *cdk.RayitoAgentProps) { p.LogRetentionDays = 2 }), cdk.CodePropsInvalid, nil},
		{"env-agnostic stack", agnostic, "A", base(nil), cdk.CodeStackEnvRequired, nil},
		{"base by tag", envStack, "A", base(func(p *cdk.RayitoAgentProps) { p.BaseImage = "python:3.12" }), cdk.CodeBaseImageUnpinned, nil},
		{"base with a newline", envStack, "A", base(func(p *cdk.RayitoAgentProps) { p.BaseImage = testBase + "\nRUN curl x" }), cdk.CodeBaseImageUnpinned, nil},
		{"x86 host", envStack, "A", base(func(p *cdk.RayitoAgentProps) { p.HostBinary = x86 }), cdk.CodeHostBinary, nil},
		{"missing host", envStack, "A", base(func(p *cdk.RayitoAgentProps) { p.HostBinary = filepath.Join(dir, "nope") }), cdk.CodeHostBinary, nil},
		{"symlink in project", envStack, "A", base(func(p *cdk.RayitoAgentProps) { p.ProjectDir = linkProj }), cdk.CodePropsInvalid, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(*c.stack.Node().Children())
			a, err := cdk.NewRayitoAgent(c.stack, jsii.String(c.id), c.props)
			var pe *cdk.PropsError
			if a != nil || !errors.Is(err, cdk.ErrInvalidProps) || !errors.As(err, &pe) || pe.Code != c.code {
				t.Fatalf("agent %v err %v, want a *PropsError %s", a, err, c.code)
			}
			if c.cause != nil && !errors.Is(err, c.cause) {
				t.Errorf("err %v does not match %v", err, c.cause)
			}
			if after := len(*c.stack.Node().Children()); after != before {
				t.Errorf("the stack grew from %d to %d children", before, after)
			}
		})
	}
	// The same id twice: the second is refused, not a jsii panic.
	if _, err := cdk.NewRayitoAgent(envStack, jsii.String("Twice"), base(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := cdk.NewRayitoAgent(envStack, jsii.String("Twice"), base(nil)); !errors.Is(err, cdk.ErrInvalidProps) {
		t.Errorf("a second Twice: %v", err)
	}
}

// TestBadImageProps: the same for RayitoMicrovmImage.
func TestBadImageProps(t *testing.T) {
	dir := t.TempDir()
	_, _, artifact, err := fixture(dir, testProject)
	if err != nil {
		t.Fatal(err)
	}
	noDockerfile := filepath.Join(dir, "nodf.zip")
	writeZip(noDockerfile, map[string]string{"bin/rayd": "x"})
	climbing := filepath.Join(dir, "climb.zip")
	writeZip(climbing, map[string]string{"Dockerfile": "FROM x", "../x": "x"})
	notZip := filepath.Join(dir, "text.zip")
	os.WriteFile(notZip, []byte("not a zip"), 0o644)
	_, stack := newStack(t.TempDir())
	cases := []struct {
		name  string
		props *cdk.RayitoMicrovmImageProps
		code  string
	}{
		{"nil", nil, cdk.CodePropsInvalid},
		{"bad name", &cdk.RayitoMicrovmImageProps{Name: "a.b", Artifact: artifact}, cdk.CodePropsInvalid},
		{"long name", &cdk.RayitoMicrovmImageProps{Name: strings.Repeat("a", 65), Artifact: artifact}, cdk.CodePropsInvalid},
		{"memory", &cdk.RayitoMicrovmImageProps{Name: "a", Artifact: artifact, MemoryMiB: 3000}, cdk.CodePropsInvalid},
		{"version", &cdk.RayitoMicrovmImageProps{Name: "a", Artifact: artifact, BaseImageVersion: "latest"}, cdk.CodePropsInvalid},
		{"description lines", &cdk.RayitoMicrovmImageProps{Name: "a", Artifact: artifact, Description: "a\nb"}, cdk.CodePropsInvalid},
		{"no artifact", &cdk.RayitoMicrovmImageProps{Name: "a"}, cdk.CodeArtifactInvalid},
		{"missing artifact", &cdk.RayitoMicrovmImageProps{Name: "a", Artifact: filepath.Join(dir, "none.zip")}, cdk.CodeArtifactInvalid},
		{"a directory", &cdk.RayitoMicrovmImageProps{Name: "a", Artifact: dir}, cdk.CodeArtifactInvalid},
		{"not a zip", &cdk.RayitoMicrovmImageProps{Name: "a", Artifact: notZip}, cdk.CodeArtifactInvalid},
		{"no Dockerfile", &cdk.RayitoMicrovmImageProps{Name: "a", Artifact: noDockerfile}, cdk.CodeArtifactInvalid},
		{"climbing entry", &cdk.RayitoMicrovmImageProps{Name: "a", Artifact: climbing}, cdk.CodeArtifactInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(*stack.Node().Children())
			m, err := cdk.NewRayitoMicrovmImage(stack, jsii.String("Img"), c.props)
			var pe *cdk.PropsError
			if m != nil || !errors.As(err, &pe) || pe.Code != c.code || !errors.Is(err, cdk.ErrInvalidProps) {
				t.Fatalf("image %v err %v, want %s", m, err, c.code)
			}
			if after := len(*stack.Node().Children()); after != before {
				t.Errorf("the stack grew")
			}
		})
	}
}

// TestTwoAgentsInOneStack: the included templates do not collide (their
// logical ids and conditions are renamed per construct) and each agent
// keeps its own names.
func TestTwoAgentsInOneStack(t *testing.T) {
	dir := t.TempDir()
	_, host, _, err := fixture(dir, testProject)
	if err != nil {
		t.Fatal(err)
	}
	app, stack := newStack(filepath.Join(dir, "out"))
	for _, name := range []string{"alpha", "beta"} {
		p := filepath.Join(dir, name)
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, project.FileName), []byte(strings.Replace(testProject, `name = "demo"`, `name = "`+name+`"`, 1)), 0o644)
		a, err := cdk.NewRayitoAgent(stack, jsii.String(name), &cdk.RayitoAgentProps{ProjectDir: p, HostBinary: host, ArtifactBucket: testBucket})
		if err != nil {
			t.Fatal(err)
		}
		if a.Plan.Runtime != "rayito_"+name || a.Plan.Repository != "rayito-agent-"+name {
			t.Errorf("plan names %s %s", a.Plan.Runtime, a.Plan.Repository)
		}
	}
	asm := app.Synth(nil)
	b, err := os.ReadFile(*asm.GetStackArtifact(jsii.String("Agents")).TemplateFullPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"AgentRuntimeName": "rayito_alpha"`, `"AgentRuntimeName": "rayito_beta"`, `"FunctionName": "rayito-cdk-alpha"`, `"FunctionName": "rayito-cdk-beta"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the template has no %s", want)
		}
	}
}
