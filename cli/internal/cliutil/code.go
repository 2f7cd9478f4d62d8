package cliutil

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// CodeSpec says how to run cells and where images go.
type CodeSpec struct {
	Language string
	Timeout  time.Duration
	Envs     map[string]string
	// ImageDir receives the images a cell shows (PNG, JPEG, SVG, PDF),
	// one file each; "" is the current directory.
	ImageDir string
	JSON     bool
}

// CodeResult is what --json prints for a cell.
type CodeResult struct {
	SandboxID      string   `json:"sandbox_id"`
	ExecutionID    string   `json:"execution_id"`
	ExecutionCount int      `json:"execution_count"`
	Text           string   `json:"text,omitempty"`
	Stdout         string   `json:"stdout"`
	Stderr         string   `json:"stderr"`
	Images         []string `json:"images,omitempty"`
	Error          *struct {
		Name      string `json:"name"`
		Value     string `json:"value"`
		Traceback string `json:"traceback"`
	} `json:"error,omitempty"`
	TimedOut bool `json:"timed_out,omitempty"`
}

// RunCell runs one cell in sbx: its output streams to stdout and stderr as
// it comes (unless JSON), the value of its last expression is printed
// after it, the images it shows are saved and their paths printed. A cell
// that raised exits 1 (its traceback on stderr), one past the timeout 124;
// a sandbox that ended under it is a *SandboxEndError (see EndedUnder).
func RunCell(ctx context.Context, sbx *rayito.Sandbox, spec CodeSpec, s IO, code string) error {
	opts := []rayito.CodeOption{}
	if spec.Language != "" {
		opts = append(opts, rayito.WithLanguage(spec.Language))
	}
	if spec.Timeout > 0 {
		opts = append(opts, rayito.WithTimeout(spec.Timeout))
	}
	if len(spec.Envs) > 0 {
		opts = append(opts, rayito.WithEnvs(spec.Envs))
	}
	if !spec.JSON {
		opts = append(opts, rayito.OnStdout(func(b []byte) { _, _ = s.Out.Write(b) }),
			rayito.OnStderr(func(b []byte) { _, _ = s.Err.Write(b) }))
	}
	ex, err := sbx.RunCode(ctx, code, opts...)
	if err != nil {
		// The kernel died, or the stream was lost: the sandbox may have
		// ended under the cell.
		if ended := EndedUnder(ctx, sbx, 0, "", err); ended != nil {
			return ended
		}
	}
	if ex == nil {
		return Interrupted(ctx, err)
	}
	images, ierr := saveImages(spec.ImageDir, ex)
	if spec.JSON {
		out := CodeResult{SandboxID: sbx.ID(), ExecutionID: ex.ID, ExecutionCount: ex.Count, Text: ex.Text(),
			Stdout: strings.Join(ex.Logs.Stdout, ""), Stderr: strings.Join(ex.Logs.Stderr, ""), Images: images, TimedOut: ex.TimedOut}
		if ex.Error != nil {
			out.Error = &struct {
				Name      string `json:"name"`
				Value     string `json:"value"`
				Traceback string `json:"traceback"`
			}{ex.Error.Name, ex.Error.Value, ex.Error.Traceback}
		}
		if jerr := PrintJSON(s.Out, out); jerr != nil {
			return jerr
		}
	} else {
		if t := ex.Text(); t != "" {
			fmt.Fprintln(s.Out, t)
		}
		for _, p := range images {
			fmt.Fprintln(s.Out, "image saved:", p)
		}
		if ex.Error != nil {
			fmt.Fprintln(s.Err, ex.Error.Traceback)
		}
		if ex.TimedOut {
			fmt.Fprintln(s.Err, "rayito: the cell ran past --timeout and was interrupted")
		}
	}
	switch {
	case err != nil:
		return err
	case ierr != nil:
		return ierr
	case ex.TimedOut:
		return &ExitCodeError{Code: ExitTimeout}
	case ex.Error != nil:
		// The traceback is on stderr already.
		return &ExitCodeError{Code: ExitError}
	}
	return nil
}

// saveImages writes the cell's images into dir (made when missing), named
// after the execution, and returns their paths. A file in the way is
// never overwritten.
func saveImages(dir string, ex *rayito.Execution) ([]string, error) {
	var paths []string
	n := 0
	for _, r := range ex.Results {
		for _, img := range []struct {
			ext  string
			data []byte
		}{{"png", r.PNG}, {"jpeg", r.JPEG}, {"svg", []byte(r.SVG)}, {"pdf", r.PDF}} {
			if len(img.data) == 0 {
				continue
			}
			n++
			if n == 1 && dir != "" {
				// As a user expects of an output directory: made when missing.
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return paths, fmt.Errorf("saving an image: %w", err)
				}
			}
			name := fmt.Sprintf("rayito-cell-%d-%d.%s", ex.Count, n, img.ext)
			if ex.ID != "" {
				name = fmt.Sprintf("rayito-%s-%d.%s", shortID(ex.ID), n, img.ext)
			}
			p := filepath.Join(dir, name)
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return paths, fmt.Errorf("saving an image: %w", err)
			}
			_, werr := f.Write(img.data)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				_ = os.Remove(p)
				return paths, fmt.Errorf("saving an image: %w", werr)
			}
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// shortID keeps an execution id usable in a file name.
func shortID(id string) string {
	var b strings.Builder
	for _, r := range id {
		if r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		}
		if b.Len() == 12 {
			break
		}
	}
	return b.String()
}

// ReadCode reads the code of --code: the value itself, or stdin for "-".
func ReadCode(value string, stdin io.Reader) (string, error) {
	if value != "-" {
		return value, nil
	}
	b, err := io.ReadAll(io.LimitReader(stdin, rayito.MaxCodeBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > rayito.MaxCodeBytes {
		return "", Usagef("the code on stdin is over %d bytes", rayito.MaxCodeBytes)
	}
	return string(b), nil
}
