package agentcore

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultBaseImage is the agent image's base: Python 3.12 on Debian slim
// (the agent runs any command; python3 is what `rayito agent init`
// writes), from the public ECR mirror of Docker's official images,
// pinned by the digest of its multi-architecture index so that a build
// never takes a moved tag. Refresh it on purpose (digest and tag
// together); --base-image overrides it, pinned by digest too.
const DefaultBaseImage = "public.ecr.aws/docker/library/python:3.12.7-slim-bookworm@sha256:032c52613401895aa3d418a4c563d2d05f993bc3ecc065c8f4e2280978acd249"

// HostPath is where the agent host is in the image, and AppDir the
// project's files.
const (
	HostPath = "/opt/agent/bin/rayito-agent-host"
	AppDir   = "/opt/agent/app"
	// AgentUser runs the agent (the host drops to it: the agent cannot
	// read the host's environment).
	AgentUser = "agent"
	// Port is AgentCore's HTTP contract port.
	Port = 8080
)

// ErrBuildContext matches every *ContextError.
var ErrBuildContext = errors.New("agentcore build context")

// ContextError is a build context that cannot be made: a base image not
// pinned by digest, a host binary that is not linux arm64, a file that
// is not regular.
type ContextError struct {
	What, Why string
}

func (e *ContextError) Error() string { return e.What + ": " + e.Why }

// Is matches ErrBuildContext.
func (e *ContextError) Is(target error) bool { return target == ErrBuildContext }

// baseImageRE is an image reference pinned by digest: a registry and
// repository of lower-case letters, digits and . _ - / :, an optional
// tag, then @sha256: and 64 hex digits. Nothing else (no space, no
// newline: it is written into the Dockerfile).
// Compiled on first use (sync.OnceValue): a counted repetition such as
// {1,512} compiles to a program of hundreds of KB, which every start of
// the CLI would otherwise build.
var baseImageRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}$`)
})

// CheckBaseImage accepts only an image reference pinned by digest
// (REGISTRY/REPO[:TAG]@sha256:HEX).
func CheckBaseImage(ref string) error {
	if len(ref) > 512 || !baseImageRE().MatchString(ref) {
		return &ContextError{What: "the base image", Why: "must be pinned by digest: REGISTRY/REPOSITORY[:TAG]@sha256:<64 hex digits>"}
	}
	return nil
}

// CheckHostBinary accepts a linux arm64 ELF executable (AgentCore runs
// arm64): anything else is a *ContextError.
func CheckHostBinary(r io.ReaderAt) error {
	ef, err := elf.NewFile(r)
	if err != nil {
		return &ContextError{What: "the host binary", Why: "not an ELF executable"}
	}
	defer ef.Close()
	if ef.Machine != elf.EM_AARCH64 || ef.Class != elf.ELFCLASS64 || ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return &ContextError{What: "the host binary", Why: fmt.Sprintf("a %s %s, not a linux arm64 executable (AgentCore runs arm64: build it with GOARCH=arm64)", ef.Machine, ef.Type)}
	}
	return nil
}

// Dockerfile is the image's Dockerfile: FROM the base image (pinned by
// digest), the project's files and the host, a user for the agent, and
// the host as ENTRYPOINT on Port with --target agentcore (no token: AWS
// signs invocations).
func Dockerfile(baseImage string, command []string) (string, error) {
	if err := CheckBaseImage(baseImage); err != nil {
		return "", err
	}
	entry := append([]string{HostPath, "--target", "agentcore", "--listen", fmt.Sprintf(":%d", Port), "--dir", AppDir, "--user", AgentUser, "--"}, command...)
	ej, err := json.Marshal(entry)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", baseImage)
	fmt.Fprintf(&b, "RUN useradd --system --uid 10001 --home-dir %s --shell /usr/sbin/nologin %s\n", AppDir, AgentUser)
	fmt.Fprintf(&b, "COPY app/ %s/\n", AppDir)
	fmt.Fprintf(&b, "COPY bin/rayito-agent-host %s\n", HostPath)
	fmt.Fprintf(&b, "RUN chmod 0755 %s && chmod -R a+rX /opt/agent\n", HostPath)
	fmt.Fprintf(&b, "EXPOSE %d\n", Port)
	fmt.Fprintf(&b, "ENTRYPOINT %s\n", ej)
	return b.String(), nil
}

// zipTime is every entry's modification time: the same inputs give the
// same bytes.
var zipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// BuildContext is the deterministic zip CodeBuild builds the image from:
// the Dockerfile, then every regular file under stageDir (app/ and bin/,
// as the MicroVM path stages them) in lexical order, mode 0755 when any
// execute bit is set else 0644, at a fixed time. A symbolic link or
// another non-regular file is refused (the stage holds none), and so is
// a .git directory. Same inputs, same bytes.
func BuildContext(stageDir, dockerfile string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, mode fs.FileMode, r io.Reader) error {
		h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: zipTime}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, r)
		return err
	}
	if err := add("Dockerfile", 0o644, strings.NewReader(dockerfile)); err != nil {
		return nil, err
	}
	err := filepath.WalkDir(stageDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(stageDir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return &ContextError{What: rel, Why: "a .git directory in the build context"}
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return &ContextError{What: rel, Why: "not a regular file"}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if info.Mode().Perm()&0o111 != 0 {
			mode = 0o755
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return add(filepath.ToSlash(rel), mode, f)
	})
	if err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ImageTag is a context's image tag: the first 16 hex digits of its
// sha256 (the full sum names the context object).
func ImageTag(sum string) string { return sum[:16] }

// Sum is data's sha256 in hex.
func Sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// ContextKey is where the context zip of sum goes in the artifact
// bucket: under ArtifactPrefix<agent>/, the only prefix the build role
// reads.
func ContextKey(agent, sum string) string { return ArtifactPrefix + agent + "/" + sum + ".zip" }
