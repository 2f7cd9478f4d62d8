package cdk

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
)

// maxProjectBytes bounds the project's files in the code asset.
const maxProjectBytes = 256 << 20

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
	for _, d := range []string{"app", "bin"} {
		if err := os.Mkdir(filepath.Join(out, d), 0o755); err != nil {
			return fail(err)
		}
	}
	var total int64
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return invalid(CodePropsInvalid, "the project directory cannot be read")
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		switch {
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "cdk.out"):
			return filepath.SkipDir
		case d.IsDir():
			return os.Mkdir(filepath.Join(out, "app", rel), 0o755)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			if total += info.Size(); total > maxProjectBytes {
				return invalid(CodePropsInvalid, "the project's files are over %d MiB", maxProjectBytes>>20)
			}
			mode := os.FileMode(0o644)
			if info.Mode().Perm()&0o111 != 0 {
				mode = 0o755
			}
			return copyFile(p, filepath.Join(out, "app", rel), mode)
		default:
			return invalid(CodePropsInvalid, "the project directory holds a symbolic link or special file: %s", filepath.ToSlash(rel))
		}
	})
	if err != nil {
		return fail(err)
	}
	dst := filepath.Join(out, "bin", "rayito-agent-host")
	if host != "" {
		if err := copyFile(host, dst, 0o755); err != nil {
			return fail(&PropsError{Code: CodeHostBinary, Detail: "HostBinary cannot be read", Err: err})
		}
	} else if err := buildHost(ctx, dst); err != nil {
		return fail(err)
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

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return invalid(CodePropsInvalid, "not a regular file")
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// maxArtifactBytes bounds a MicroVMs image zip (the service's code
// artifact).
const maxArtifactBytes = 10 << 30

// CheckArtifact checks a MicroVMs image's code artifact read from r (size
// bytes): a zip archive with a Dockerfile at its root and no entry that
// climbs out of it. Anything else is a *PropsError artifact_invalid.
func CheckArtifact(r io.ReaderAt, size int64) error {
	if size <= 0 || size > maxArtifactBytes {
		return invalid(CodeArtifactInvalid, "the image artifact must be a zip of at most %d bytes", int64(maxArtifactBytes))
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return &PropsError{Code: CodeArtifactInvalid, Detail: "the image artifact is not a zip archive", Err: err}
	}
	dockerfile := false
	for _, f := range zr.File {
		name := f.Name
		if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || strings.IndexByte(name, 0) >= 0 {
			return invalid(CodeArtifactInvalid, "the image artifact has an entry with an absolute or malformed name")
		}
		for _, el := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
			if el == ".." || el == "." || el == "" {
				return invalid(CodeArtifactInvalid, "the image artifact has an entry that climbs out of it")
			}
		}
		if name == "Dockerfile" && f.Mode().IsRegular() {
			dockerfile = true
		}
	}
	if !dockerfile {
		return invalid(CodeArtifactInvalid, "the image artifact has no Dockerfile at its root")
	}
	return nil
}
