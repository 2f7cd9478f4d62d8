package cdk_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/rayito-dev/rayito/cdk"
)

// Test values: one account and region, one project with a Bedrock model
// and a secret variable.
const (
	testAccount = "123456789012"
	testRegion  = "us-east-1"
	testBucket  = "rayito-artifacts-test"
	testBase    = "public.ecr.aws/docker/library/python:3.12.7-slim-bookworm@sha256:032c52613401895aa3d418a4c563d2d05f993bc3ecc065c8f4e2280978acd249"
	testSecret  = "arn:aws:secretsmanager:us-east-1:123456789012:secret:demo/github-AbCdEf"
	testModel   = "anthropic.claude-3-5-haiku-20241022-v1:0"
	testProject = `name = "demo"
command = ["python3", "agent.py"]

[model]
provider = "bedrock"
id = "` + testModel + `"
region = "us-east-1"

[secret_env]
GITHUB_TOKEN = "` + testSecret + `"
`
)

// synthesized is the template of the stack TestMain synthesizes once,
// and testAgent its agent.
var (
	synthesized map[string]any
	testAgent   *cdk.RayitoAgent
	testOutdir  string
)

// armELF is the smallest file debug/elf reads as a linux arm64
// executable: the 64-byte header and nothing else.
func armELF() []byte {
	var b bytes.Buffer
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0})
	b.Write(make([]byte, 8))
	le := binary.LittleEndian
	binary.Write(&b, le, uint16(2))   // ET_EXEC
	binary.Write(&b, le, uint16(183)) // EM_AARCH64
	binary.Write(&b, le, uint32(1))   // version
	binary.Write(&b, le, uint64(0))   // entry
	binary.Write(&b, le, uint64(0))   // phoff
	binary.Write(&b, le, uint64(0))   // shoff
	binary.Write(&b, le, uint32(0))   // flags
	binary.Write(&b, le, uint16(64))  // ehsize
	binary.Write(&b, le, uint16(56))  // phentsize
	binary.Write(&b, le, uint16(0))   // phnum
	binary.Write(&b, le, uint16(64))  // shentsize
	binary.Write(&b, le, uint16(0))   // shnum
	binary.Write(&b, le, uint16(0))   // shstrndx
	return b.Bytes()
}

func writeZip(path string, files map[string]string) error {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			return err
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// fixture writes a project, a host binary and an image artifact under dir.
func fixture(dir, projectFile string) (project, host, artifact string, err error) {
	project = filepath.Join(dir, "project")
	host = filepath.Join(dir, "rayito-agent-host")
	artifact = filepath.Join(dir, "image.zip")
	if err = os.MkdirAll(project, 0o755); err != nil {
		return
	}
	if err = os.WriteFile(filepath.Join(project, "rayito-agent.toml"), []byte(projectFile), 0o644); err != nil {
		return
	}
	if err = os.WriteFile(filepath.Join(project, "agent.py"), []byte("print('hi')\n"), 0o644); err != nil {
		return
	}
	if err = os.WriteFile(host, armELF(), 0o755); err != nil {
		return
	}
	err = writeZip(artifact, map[string]string{"Dockerfile": "FROM x\n", "bin/rayd": "x"})
	return
}

func newStack(outdir string) (awscdk.App, awscdk.Stack) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir)})
	stack := awscdk.NewStack(app, jsii.String("Agents"), &awscdk.StackProps{Env: &awscdk.Environment{Account: jsii.String(testAccount), Region: jsii.String(testRegion)}})
	return app, stack
}

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "rayito-cdk-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		project, host, artifact, err := fixture(dir, testProject)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		testOutdir = filepath.Join(dir, "cdk.out")
		app, stack := newStack(testOutdir)
		if testAgent, err = cdk.NewRayitoAgent(stack, jsii.String("Demo"), &cdk.RayitoAgentProps{
			ProjectDir: project, HostBinary: host, BaseImage: testBase, ArtifactBucket: testBucket,
		}); err != nil {
			fmt.Fprintln(os.Stderr, "NewRayitoAgent:", err)
			return 1
		}
		if _, err := cdk.NewRayitoMicrovmImage(stack, jsii.String("Sandbox"), &cdk.RayitoMicrovmImageProps{Name: "sandbox-base", Artifact: artifact}); err != nil {
			fmt.Fprintln(os.Stderr, "NewRayitoMicrovmImage:", err)
			return 1
		}
		asm := app.Synth(nil)
		b, err := os.ReadFile(*asm.GetStackArtifact(jsii.String("Agents")).TemplateFullPath())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := json.Unmarshal(b, &synthesized); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if os.Getenv("RAYITO_CDK_DUMP") != "" {
			os.WriteFile(os.Getenv("RAYITO_CDK_DUMP"), b, 0o644)
		}
		return m.Run()
	}())
}

func TestSynthesized(t *testing.T) {
	if len(synthesized) == 0 {
		t.Fatal("no template")
	}
}
