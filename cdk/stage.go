package cdk

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/agenthost/project"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// Dockerfile is the agent image's Dockerfile, the CLI's
// (agentcore.Dockerfile): FROM base (pinned by digest, else a *PropsError
// base_image_unpinned), the project at agentcore.AppDir, the host at
// agentcore.HostPath as the entrypoint on AgentCore's contract (:8080,
// --target agentcore, no token), the agent run as its own user.
func Dockerfile(base string, command []string) (string, error) {
	df, err := agentcore.Dockerfile(base, command)
	if err != nil {
		return "", &PropsError{Code: CodeBaseImageUnpinned, Detail: "BaseImage must be pinned by digest: REGISTRY/REPOSITORY[:TAG]@sha256:<64 hex digits>", Err: err}
	}
	return df, nil
}

// stageAgent writes the agent's code asset into a new directory: the
// Dockerfile, the project's regular files and directories under app/
// (.git and cdk.out left out; a symbolic link or special file refused)
// and the host at bin/rayito-agent-host (host, else built).
func stageAgent(ctx context.Context, dir, host, base string, command []string) (string, error) {
	df, err := Dockerfile(base, command)
	if err != nil {
		return "", err
	}
	out, err := os.MkdirTemp("", "rayito-cdk-agent-")
	if err != nil {
		return "", err
	}
	fail := func(e error) (string, error) {
		os.RemoveAll(out)
		return "", e
	}
	st, err := project.Stage(dir, host, out, "cdk.out")
	if err != nil {
		if errors.Is(err, project.ErrStage) {
			return fail(invalid(CodePropsInvalid, "%s", err.Error()))
		}
		if host != "" && errors.Is(err, fs.ErrNotExist) {
			return fail(&PropsError{Code: CodeHostBinary, Detail: "HostBinary cannot be read", Err: err})
		}
		return fail(err)
	}
	if len(st.Skipped) > 0 {
		// The code asset is exactly the project: a link is refused, not
		// skipped (the CLI skips it and says so).
		return fail(invalid(CodePropsInvalid, "the project directory holds a symbolic link or special file: %s", st.Skipped[0]))
	}
	dst := filepath.Join(out, "bin", project.HostBinary)
	if host == "" {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fail(err)
		}
		if err := buildHost(ctx, dst); err != nil {
			return fail(err)
		}
	}
	if err := checkHost(dst); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(out, "Dockerfile"), []byte(df), 0o644); err != nil {
		return fail(err)
	}
	return out, nil
}

// checkHost accepts a linux arm64 ELF executable (AgentCore runs arm64:
// agentcore.CheckHostBinary).
func checkHost(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return &PropsError{Code: CodeHostBinary, Detail: "the host binary cannot be read", Err: err}
	}
	defer f.Close()
	if err := agentcore.CheckHostBinary(f); err != nil {
		return &PropsError{Code: CodeHostBinary, Detail: "HostBinary is not a linux arm64 executable (AgentCore runs arm64: build it with GOARCH=arm64)", Err: err}
	}
	return nil
}

// hostPackage is the agent host's main package.
const hostPackage = "github.com/rayito-dev/rayito/agenthost/cmd/rayito-agent-host"

// buildHost builds the agent host for AgentCore (linux/arm64, static,
// reproducible: the asset's hash changes only when the host does).
func buildHost(ctx context.Context, dst string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", dst, hostPackage)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return &PropsError{Code: CodeHostBinary, Detail: "go build " + hostPackage + " (GOOS=linux GOARCH=arm64) failed: run `go get " + hostPackage + "` in the app's module (its go.sum needs the host's modules), or set HostBinary to a built rayito-agent-host", Err: err}
	}
	return nil
}

// CheckArtifact checks a MicroVMs image's code artifact read from r (size
// bytes): microvmsapi.CheckCodeArtifact (a zip archive with a Dockerfile
// at its root and no entry that climbs out of it), the same rule as
// `rayito image publish --zip`. Anything else is a *PropsError
// artifact_invalid.
func CheckArtifact(r io.ReaderAt, size int64) error {
	if err := microvmsapi.CheckCodeArtifact(r, size); err != nil {
		return &PropsError{Code: CodeArtifactInvalid, Detail: strings.TrimSuffix(err.Error(), "."), Err: err}
	}
	return nil
}
