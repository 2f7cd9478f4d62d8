package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Limits of the tools' arguments.
const (
	// DefaultCommandTimeout ends run_command and run_code calls that set
	// no timeout.
	DefaultCommandTimeout = 2 * time.Minute
	// MaxCommandTimeout is the longest timeout_seconds of a command or a
	// cell.
	MaxCommandTimeout = time.Hour
	// MaxWriteBytes is the largest file write_file writes.
	MaxWriteBytes = 10 << 20
	// MaxListEntries is how many entries list_files returns at most.
	MaxListEntries = 1000
	// maxListDepth bounds list_files' depth.
	maxListDepth = 5
)

// ErrInvalidArgument reports a tool argument the server refuses before any
// SDK call.
var ErrInvalidArgument = errors.New("invalid argument")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// toolError is the tool error of err: the SDK's words as the CLI prints
// them, and the SDK's reason when it has one. It never carries a stack.
func toolError(err error) error {
	msg := cliutil.Describe(err)
	if r := rayito.ReasonOf(err); r != rayito.ReasonUnspecified && !strings.Contains(msg, string(r)) {
		msg += " (reason: " + string(r) + ")"
	}
	return errors.New(msg)
}

// handler adapts a tool's function to the SDK: the function's error
// becomes a tool error (IsError, its text for the model to read).
func handler[In, Out any](f func(context.Context, In) (Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		out, err := f(ctx, in)
		if err != nil {
			var zero Out
			return nil, zero, toolError(err)
		}
		return nil, out, nil
	}
}

func (s *Server) addTools() {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "create", Description: "Create a new isolated Linux sandbox and return its sandbox_id. " +
		"It is killed when this MCP server stops (unless the server runs with --keep), or when its timeout passes."}, handler(s.create))
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "run_command", Description: "Run a shell command (bash -c) in a sandbox and wait for it: returns stdout, stderr and the exit code. " +
		"A non-zero exit code is a result, not an error. Output beyond the limit is cut, with a note."}, handler(s.runCommand))
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "run_code", Description: "Run Python code in the sandbox's stateful code interpreter (a Jupyter kernel: variables persist between calls). " +
		"Returns stdout, stderr, the value of the last expression as text, and the exception if the code raised."}, handler(s.runCode))
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "read_file", Description: "Read a file of a sandbox. Text comes back as is (encoding utf-8); other bytes base64-encoded (encoding base64). Large files are cut, with a note.", Annotations: readOnly}, handler(s.readFile))
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "write_file", Description: fmt.Sprintf("Write a file in a sandbox (replacing it; parent directories are made). At most %d bytes.", MaxWriteBytes)}, handler(s.writeFile))
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "list_files", Description: "List a directory of a sandbox (name, path, type, size).", Annotations: readOnly}, handler(s.listFiles))
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "list_sandboxes", Description: "List the sandboxes the tools may use that have not ended; own says this server created it (and kills it when it stops).", Annotations: readOnly}, handler(s.listSandboxes))
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "kill", Description: "Kill a sandbox: it ends, with its processes and files.", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)}}, handler(s.kill))
}

func ptr[T any](v T) *T { return &v }

// CreateInput are create's arguments.
type CreateInput struct {
	Template       string            `json:"template,omitempty" jsonschema:"the sandbox's template (image); empty for the default"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"kill the sandbox this many seconds after its start (1 to 28800); 0 for the platform's default lifetime"`
	Envs           map[string]string `json:"envs,omitempty" jsonschema:"environment variables of every command of the sandbox; not for secrets (they travel in the creation request)"`
	Metadata       map[string]string `json:"metadata,omitempty" jsonschema:"labels of the sandbox (key to value), shown by list_sandboxes"`
	Internet       *bool             `json:"internet,omitempty" jsonschema:"whether the sandbox may reach the internet (default true)"`
}

// CreateOutput is create's result.
type CreateOutput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the new sandbox's id, for the other tools"`
	Template  string `json:"template,omitempty" jsonschema:"its template"`
	ExpiresAt string `json:"expires_at,omitempty" jsonschema:"when the platform ends it at the latest (RFC 3339)"`
}

func (s *Server) create(ctx context.Context, in CreateInput) (CreateOutput, error) {
	maxLife := time.Duration(microvmsapi.MaxDurationSeconds) * time.Second
	timeout := time.Duration(in.TimeoutSeconds) * time.Second
	if in.TimeoutSeconds < 0 || timeout > maxLife {
		return CreateOutput{}, invalidf("timeout_seconds must be 0 to %d", microvmsapi.MaxDurationSeconds)
	}
	opts := slices.Clone(s.opts.SDK)
	if in.Template != "" {
		opts = append(opts, rayito.WithTemplate(in.Template))
	}
	if timeout > 0 {
		opts = append(opts, rayito.WithTimeout(timeout))
	}
	if len(in.Envs) > 0 {
		opts = append(opts, rayito.WithEnvs(in.Envs))
	}
	if len(in.Metadata) > 0 {
		opts = append(opts, rayito.WithMetadata(in.Metadata))
	}
	if in.Internet != nil && !*in.Internet {
		opts = append(opts, rayito.WithAllowInternetAccess(false))
	}
	err := s.reserve()
	if errors.Is(err, ErrTooMany) && s.pruneEnded(ctx) {
		err = s.reserve()
	}
	if err != nil {
		return CreateOutput{}, err
	}
	sbx, err := rayito.Create(ctx, opts...)
	if err != nil {
		sbx = nil
	}
	if !s.adopt(sbx) {
		if sbx != nil {
			// The server closed during the create: this one goes too.
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			_ = sbx.Kill(kctx)
			cancel()
			return CreateOutput{}, ErrClosed
		}
		return CreateOutput{}, err
	}
	out := CreateOutput{SandboxID: sbx.ID()}
	if info, err := sbx.Info(ctx); err == nil {
		out.Template = info.Template
		if !info.ExpiresAt.IsZero() {
			out.ExpiresAt = info.ExpiresAt.UTC().Format(time.RFC3339)
		}
	}
	return out, nil
}

// timeoutOf checks a tool's timeout_seconds (0: the default).
func timeoutOf(seconds int) (time.Duration, error) {
	d := time.Duration(seconds) * time.Second
	switch {
	case seconds == 0:
		return DefaultCommandTimeout, nil
	case seconds < 0 || d > MaxCommandTimeout:
		return 0, invalidf("timeout_seconds must be 1 to %d", int(MaxCommandTimeout/time.Second))
	}
	return d, nil
}

// RunCommandInput are run_command's arguments.
type RunCommandInput struct {
	SandboxID      string `json:"sandbox_id" jsonschema:"the sandbox, as create returned it"`
	Command        string `json:"command" jsonschema:"the command line, run with bash -c as the sandbox's user"`
	Cwd            string `json:"cwd,omitempty" jsonschema:"the working directory (default: the user's home)"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"end the command after this many seconds (default 120, at most 3600)"`
}

// RunCommandOutput is run_command's result.
type RunCommandOutput struct {
	ExitCode int    `json:"exit_code" jsonschema:"the exit code; 124 when timeout_seconds ended it"`
	Status   string `json:"status" jsonschema:"how it ended: exited, signaled, timeout, oom_killed, sandbox_timeout"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Note     string `json:"note,omitempty" jsonschema:"what was cut from the output, if anything"`
}

func (s *Server) runCommand(ctx context.Context, in RunCommandInput) (RunCommandOutput, error) {
	if strings.TrimSpace(in.Command) == "" {
		return RunCommandOutput{}, invalidf("command is empty")
	}
	timeout, err := timeoutOf(in.TimeoutSeconds)
	if err != nil {
		return RunCommandOutput{}, err
	}
	sbx, err := s.sandbox(ctx, in.SandboxID)
	if err != nil {
		return RunCommandOutput{}, err
	}
	opts := []rayito.CommandOption{rayito.WithTimeout(timeout)}
	if in.Cwd != "" {
		opts = append(opts, rayito.WithCwd(in.Cwd))
	}
	res, err := sbx.Commands.Run(ctx, in.Command, opts...)
	var exit *rayito.CommandExitError
	switch {
	case errors.As(err, &exit):
		res = exit.Result
	case err != nil:
		return RunCommandOutput{}, err
	}
	out := RunCommandOutput{ExitCode: res.ExitCode, Status: string(res.Status), Stdout: res.Stdout, Stderr: res.Stderr}
	if out.Status == "" {
		out.Status = string(rayito.StatusExited)
	}
	var notes []string
	if res.StdoutTruncated || res.StderrTruncated {
		notes = append(notes, "the sandbox kept only the end of the output (its own cap)")
	}
	if n := cutAll(&out.Stdout, &out.Stderr); n > 0 {
		notes = append(notes, fmt.Sprintf("%d characters of output were cut (at most %d are returned)", n, MaxOutputChars))
	}
	out.Note = strings.Join(notes, "; ")
	return out, nil
}

// RunCodeInput are run_code's arguments.
type RunCodeInput struct {
	SandboxID      string `json:"sandbox_id" jsonschema:"the sandbox, as create returned it"`
	Code           string `json:"code" jsonschema:"Python code; state persists between calls"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"interrupt the code after this many seconds (default 120, at most 3600)"`
}

// CodeError is the exception a cell raised.
type CodeError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// RunCodeOutput is run_code's result.
type RunCodeOutput struct {
	Result   string     `json:"result,omitempty" jsonschema:"the value of the last expression, as text"`
	Stdout   string     `json:"stdout"`
	Stderr   string     `json:"stderr"`
	Error    *CodeError `json:"error,omitempty" jsonschema:"the exception the code raised"`
	TimedOut bool       `json:"timed_out,omitempty" jsonschema:"timeout_seconds interrupted the code"`
	Note     string     `json:"note,omitempty" jsonschema:"what was cut from the output, if anything"`
}

func (s *Server) runCode(ctx context.Context, in RunCodeInput) (RunCodeOutput, error) {
	if strings.TrimSpace(in.Code) == "" {
		return RunCodeOutput{}, invalidf("code is empty")
	}
	if len(in.Code) > rayito.MaxCodeBytes {
		return RunCodeOutput{}, invalidf("code is %d bytes, at most %d", len(in.Code), rayito.MaxCodeBytes)
	}
	timeout, err := timeoutOf(in.TimeoutSeconds)
	if err != nil {
		return RunCodeOutput{}, err
	}
	sbx, err := s.sandbox(ctx, in.SandboxID)
	if err != nil {
		return RunCodeOutput{}, err
	}
	ex, err := sbx.RunCode(ctx, in.Code, rayito.WithTimeout(timeout))
	if err != nil {
		return RunCodeOutput{}, err
	}
	out := RunCodeOutput{Result: ex.Text(), Stdout: strings.Join(ex.Logs.Stdout, ""), Stderr: strings.Join(ex.Logs.Stderr, ""), TimedOut: ex.TimedOut}
	if ex.Error != nil {
		out.Error = &CodeError{Name: ex.Error.Name, Value: ex.Error.Value, Traceback: ex.Error.Traceback}
	}
	texts := []*string{&out.Result, &out.Stdout, &out.Stderr}
	if out.Error != nil {
		texts = append(texts, &out.Error.Traceback)
	}
	if n := cutAll(texts...); n > 0 {
		out.Note = fmt.Sprintf("%d characters of output were cut (at most %d are returned)", n, MaxOutputChars)
	}
	return out, nil
}

// ReadFileInput are read_file's arguments.
type ReadFileInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox, as create returned it"`
	Path      string `json:"path" jsonschema:"the file's path (absolute, or relative to the user's home)"`
}

// ReadFileOutput is read_file's result.
type ReadFileOutput struct {
	Content  string `json:"content"`
	Encoding string `json:"encoding" jsonschema:"utf-8, or base64 for bytes that are not UTF-8 text"`
	Size     int64  `json:"size" jsonschema:"the file's size in bytes"`
	Note     string `json:"note,omitempty" jsonschema:"what was cut, if anything"`
}

func (s *Server) readFile(ctx context.Context, in ReadFileInput) (ReadFileOutput, error) {
	if in.Path == "" {
		return ReadFileOutput{}, invalidf("path is empty")
	}
	sbx, err := s.sandbox(ctx, in.SandboxID)
	if err != nil {
		return ReadFileOutput{}, err
	}
	rc, err := sbx.Files.ReadStream(ctx, in.Path)
	if err != nil {
		return ReadFileOutput{}, err
	}
	defer rc.Close()
	// Text is cut at MaxOutputChars characters, of at most 4 bytes each:
	// more than that is never read.
	const readCap = 4*MaxOutputChars + 1
	data, err := io.ReadAll(io.LimitReader(rc, readCap))
	if err != nil {
		return ReadFileOutput{}, err
	}
	size := int64(len(data))
	if len(data) == readCap {
		if e, err := sbx.Files.Stat(ctx, in.Path); err == nil {
			size = e.Size
		}
	}
	return fileOutput(data, size), nil
}

// fileOutput renders the first bytes of a file of size bytes: text as
// is, else base64, cut to MaxOutputChars characters with a note.
func fileOutput(data []byte, size int64) ReadFileOutput {
	out := ReadFileOutput{Size: size, Encoding: "utf-8"}
	text := data
	// A file read only in part may end inside a character.
	if int64(len(data)) < size {
		for i := 0; i < utf8.UTFMax && len(text) > 0 && !utf8.Valid(text); i++ {
			text = text[:len(text)-1]
		}
	}
	if utf8.Valid(text) && !bytes.ContainsRune(text, 0) {
		n := utf8.RuneCount(text)
		if n > MaxOutputChars {
			text = text[:byteOffset(string(text), MaxOutputChars)]
		}
		out.Content = string(text)
		if shown := int64(len(text)); shown < size {
			out.Note = fmt.Sprintf("only the first %d characters (%d bytes) are shown: %d bytes of the file were cut", utf8.RuneCount(text), shown, size-shown)
		}
		return out
	}
	out.Encoding = "base64"
	raw := data
	if max := MaxOutputChars / 4 * 3; len(raw) > max {
		raw = raw[:max]
	}
	out.Content = base64.StdEncoding.EncodeToString(raw)
	if shown := int64(len(raw)); shown < size {
		out.Note = fmt.Sprintf("only the first %d bytes are shown: %d bytes of the file were cut", shown, size-shown)
	}
	return out
}

// WriteFileInput are write_file's arguments.
type WriteFileInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox, as create returned it"`
	Path      string `json:"path" jsonschema:"the file's path (absolute, or relative to the user's home)"`
	Content   string `json:"content" jsonschema:"the file's content"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"utf-8 (the default) or base64"`
}

// WriteFileOutput is write_file's result.
type WriteFileOutput struct {
	Path string `json:"path" jsonschema:"the file's absolute path"`
	Size int64  `json:"size" jsonschema:"bytes written"`
}

func (s *Server) writeFile(ctx context.Context, in WriteFileInput) (WriteFileOutput, error) {
	data, err := decodeContent(in.Content, in.Encoding)
	if err != nil {
		return WriteFileOutput{}, err
	}
	if in.Path == "" {
		return WriteFileOutput{}, invalidf("path is empty")
	}
	sbx, err := s.sandbox(ctx, in.SandboxID)
	if err != nil {
		return WriteFileOutput{}, err
	}
	e, err := sbx.Files.Write(ctx, in.Path, data)
	if err != nil {
		return WriteFileOutput{}, err
	}
	out := WriteFileOutput{Path: in.Path, Size: int64(len(data))}
	if e != nil && e.Path != "" {
		out.Path = e.Path
	}
	return out, nil
}

// decodeContent reads write_file's content in its encoding, at most
// MaxWriteBytes.
func decodeContent(content, encoding string) ([]byte, error) {
	var data []byte
	switch strings.ToLower(encoding) {
	case "", "utf-8", "utf8", "text":
		data = []byte(content)
	case "base64":
		if base64.StdEncoding.DecodedLen(len(content)) > MaxWriteBytes+3 {
			return nil, invalidf("the file is larger than %d bytes", MaxWriteBytes)
		}
		var err error
		if data, err = base64.StdEncoding.DecodeString(content); err != nil {
			return nil, invalidf("content is not valid base64")
		}
	default:
		return nil, invalidf("encoding must be utf-8 or base64")
	}
	if len(data) > MaxWriteBytes {
		return nil, invalidf("the file is larger than %d bytes", MaxWriteBytes)
	}
	return data, nil
}

// ListFilesInput are list_files' arguments.
type ListFilesInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox, as create returned it"`
	Path      string `json:"path,omitempty" jsonschema:"the directory (default: the user's home)"`
	Depth     int    `json:"depth,omitempty" jsonschema:"how deep to list: 1 (the default) for the directory's own entries, at most 5"`
}

// FileEntry is one entry of list_files.
type FileEntry struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type" jsonschema:"file, dir or symlink"`
	Size int64  `json:"size"`
}

// ListFilesOutput is list_files' result.
type ListFilesOutput struct {
	Entries []FileEntry `json:"entries"`
	Note    string      `json:"note,omitempty" jsonschema:"what was cut, if anything"`
}

func (s *Server) listFiles(ctx context.Context, in ListFilesInput) (ListFilesOutput, error) {
	depth := in.Depth
	switch {
	case depth == 0:
		depth = 1
	case depth < 0 || depth > maxListDepth:
		return ListFilesOutput{}, invalidf("depth must be 1 to %d", maxListDepth)
	}
	path := in.Path
	if path == "" {
		path = "."
	}
	sbx, err := s.sandbox(ctx, in.SandboxID)
	if err != nil {
		return ListFilesOutput{}, err
	}
	entries, err := sbx.Files.List(ctx, path, depth)
	if err != nil {
		return ListFilesOutput{}, err
	}
	out := ListFilesOutput{Entries: []FileEntry{}}
	chars := 0
	for i, e := range entries {
		chars += len(e.Name) + len(e.Path) + 48
		if i == MaxListEntries || chars > MaxOutputChars {
			out.Note = fmt.Sprintf("%d more entries were cut (at most %d entries or %d characters are returned)", len(entries)-i, MaxListEntries, MaxOutputChars)
			break
		}
		out.Entries = append(out.Entries, FileEntry{Name: e.Name, Path: e.Path, Type: e.Type, Size: e.Size})
	}
	return out, nil
}

// ListSandboxesInput are list_sandboxes' arguments (none).
type ListSandboxesInput struct{}

// SandboxEntry is one sandbox of list_sandboxes.
type SandboxEntry struct {
	SandboxID string            `json:"sandbox_id"`
	State     string            `json:"state"`
	Template  string            `json:"template,omitempty"`
	StartedAt string            `json:"started_at,omitempty"`
	ExpiresAt string            `json:"expires_at,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Own       bool              `json:"own" jsonschema:"this server created it and kills it when it stops"`
}

// ListSandboxesOutput is list_sandboxes' result.
type ListSandboxesOutput struct {
	Sandboxes []SandboxEntry `json:"sandboxes"`
}

func (s *Server) listSandboxes(ctx context.Context, _ ListSandboxesInput) (ListSandboxesOutput, error) {
	infos, err := rayito.List(ctx, s.opts.SDK...)
	if err != nil {
		return ListSandboxesOutput{}, err
	}
	out := ListSandboxesOutput{Sandboxes: []SandboxEntry{}}
	for _, in := range infos {
		if in.State == string(microvmsapi.StateTerminated) || in.State == string(microvmsapi.StateTerminating) {
			continue
		}
		own := s.isOwn(in.ID)
		if s.opts.OnlyOwn && !own {
			continue
		}
		e := SandboxEntry{SandboxID: in.ID, State: in.State, Template: in.Template, Metadata: in.Metadata, Own: own}
		if !in.StartedAt.IsZero() {
			e.StartedAt = in.StartedAt.UTC().Format(time.RFC3339)
		}
		if !in.ExpiresAt.IsZero() {
			e.ExpiresAt = in.ExpiresAt.UTC().Format(time.RFC3339)
		}
		out.Sandboxes = append(out.Sandboxes, e)
	}
	return out, nil
}

// KillInput are kill's arguments.
type KillInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox to kill"`
}

// KillOutput is kill's result.
type KillOutput struct {
	Killed string `json:"killed" jsonschema:"the id of the sandbox killed"`
}

func (s *Server) kill(ctx context.Context, in KillInput) (KillOutput, error) {
	sbx, err := s.sandbox(ctx, in.SandboxID)
	if err != nil {
		return KillOutput{}, err
	}
	if err := sbx.Kill(ctx); err != nil {
		if errors.Is(err, rayito.ErrSandboxEnded) || errors.Is(err, rayito.ErrNotFound) {
			// Gone already: no longer the server's to count or kill.
			s.forget(in.SandboxID)
		}
		return KillOutput{}, err
	}
	s.forget(in.SandboxID)
	return KillOutput{Killed: in.SandboxID}, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
