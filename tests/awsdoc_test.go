package tests

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/rayito-dev/rayito/sdk/microvms"
)

// docShellLines returns the lines of every ```sh block of a Markdown
// file, in order.
func docShellLines(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```sh"):
			in = true
		case strings.HasPrefix(l, "```"):
			in = false
		case in && strings.TrimSpace(l) != "":
			lines = append(lines, l)
		}
	}
	return lines
}

// templateParameters reads the parameter and output names of one of
// infra's CloudFormation templates (top-level sections, two-space keys).
func templateNames(t *testing.T, path, section string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	in := false
	key := regexp.MustCompile(`^  ([A-Za-z0-9]+):\s*$`)
	for _, l := range strings.Split(string(raw), "\n") {
		if l != "" && l[0] != ' ' && l[0] != '#' {
			in = strings.TrimSuffix(l, ":") == section
			continue
		}
		if m := key.FindStringSubmatch(l); in && m != nil {
			names[m[1]] = true
		}
	}
	return names
}

var (
	deployLine   = regexp.MustCompile(`^aws cloudformation deploy --template-file (\S+) --stack-name \S+( --capabilities CAPABILITY_NAMED_IAM)? --parameter-overrides (.+)$`)
	outputLine   = regexp.MustCompile(`^export (\w+)=\$\(aws cloudformation describe-stacks --stack-name \S+ --query "Stacks\[0\]\.Outputs\[\?OutputKey=='(\w+)'\]\.OutputValue" --output text\)$`)
	distLine     = regexp.MustCompile(`^make dist COMPONENTS=rayd$`)
	lockLine     = regexp.MustCompile(`^uv pip compile (\S+)/requirements\.in --generate-hashes --python-version 3\.9 --python-platform aarch64-manylinux_2_28 -o (\S+)$`)
	digestLine   = regexp.MustCompile(`^docker buildx imagetools inspect public\.ecr\.aws/lambda/microvms:al2023-minimal --format '\{\{\.Manifest\.Digest\}\}' > (\S+)$`)
	distBinaries = regexp.MustCompile(`dist/((?:rayd|rayito-mount-s3)-v[0-9.]+-linux-arm64)`)
)

// TestAWSDocWalk runs docs/aws.md, every command of it in order, in one
// shell, against the scripted AWS fake (a real local sandbox behind it)
// and an in-process S3 (gofakes3). The commands that need the outside
// world are stood in for, each checked first:
//
//   - `aws cloudformation deploy`: the template exists, and every
//     parameter it overrides is one of the template's;
//   - `export X=$(aws cloudformation describe-stacks ...)`: the output it
//     reads exists in iam.yaml; X gets a role ARN of the fake's account;
//   - `make dist COMPONENTS=rayd`: dist/ gets a stand-in rayd binary and
//     its SHA256SUMS (the fake builds no image; make dist itself is run
//     by make check-reproducible);
//   - `docker buildx imagetools inspect ... > F`: F gets a fixed digest;
//   - `uv pip compile DIR/requirements.in ... -o F`: F gets a lock of the
//     right form pinning what requirements.in names (made-up hashes).
//
// Everything else (rayito, cp, rm, export) runs as written.
func TestAWSDocWalk(t *testing.T) {
	f := startAWSFake(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	s3 := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	defer s3.Close()

	work := t.TempDir()
	if out, err := exec.Command("cp", "-R", filepath.Join(root, "image"), filepath.Join(root, "infra"), work).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	var bucket string
	for _, l := range docShellLines(t, filepath.Join(root, "docs", "aws.md")) {
		switch {
		case strings.HasPrefix(l, "export BUCKET="):
			bucket = strings.TrimPrefix(l, "export BUCKET=")
			fmt.Fprintln(&script, l)
		case deployLine.MatchString(l):
			m := deployLine.FindStringSubmatch(l)
			params := templateNames(t, filepath.Join(root, m[1]), "Parameters")
			if len(params) == 0 {
				t.Fatalf("%s: no parameters read", m[1])
			}
			for _, kv := range strings.Fields(m[3]) {
				k, _, _ := strings.Cut(kv, "=")
				if !params[k] {
					t.Errorf("docs/aws.md: %s has no parameter %s", m[1], k)
				}
			}
			if m[1] == "infra/iam.yaml" && m[2] == "" {
				t.Error("docs/aws.md: iam.yaml needs --capabilities CAPABILITY_NAMED_IAM")
			}
			fmt.Fprintf(&script, ": %q\n", l)
		case outputLine.MatchString(l):
			m := outputLine.FindStringSubmatch(l)
			if !templateNames(t, filepath.Join(root, "infra", "iam.yaml"), "Outputs")[m[2]] {
				t.Errorf("docs/aws.md: iam.yaml has no output %s", m[2])
			}
			fmt.Fprintf(&script, "export %s=arn:aws:iam::123456789012:role/rayito-microvm-build-us-east-1\n", m[1])
		case distLine.MatchString(l):
			// The binaries the next lines copy, with their SHA256SUMS lines.
			var sums strings.Builder
			for _, b := range distBinaries.FindAllStringSubmatch(strings.Join(docShellLines(t, filepath.Join(root, "docs", "aws.md")), "\n"), -1) {
				body := []byte("stand-in for " + b[1] + "\n")
				sum := sha256.Sum256(body)
				if err := os.MkdirAll(filepath.Join(work, "dist"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(work, "dist", b[1]), body, 0o755); err != nil {
					t.Fatal(err)
				}
				sums.WriteString(hex.EncodeToString(sum[:]) + "  " + b[1] + "\n")
				if err := os.WriteFile(filepath.Join(work, "dist", "SHA256SUMS"), []byte(sums.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			fmt.Fprintf(&script, ": %q\n", l)
		case digestLine.MatchString(l):
			fmt.Fprintf(&script, "printf 'sha256:%%s\\n' %s > %s\n", strings.Repeat("ab", 32), digestLine.FindStringSubmatch(l)[1])
		case lockLine.MatchString(l):
			// A lock of the right form pinning what requirements.in names
			// (its hashes are made up: the fake builds nothing).
			m := lockLine.FindStringSubmatch(l)
			fmt.Fprintf(&script, "sed -n 's/^\\([A-Za-z0-9._-]*==[^ ]*\\)$/\\1 --hash=sha256:%s/p' %s/requirements.in > %s\n", strings.Repeat("cd", 32), m[1], m[2])
		case strings.HasPrefix(l, "aws ") || strings.HasPrefix(l, "docker ") || strings.HasPrefix(l, "make ") || strings.HasPrefix(l, "uv "):
			t.Fatalf("docs/aws.md: a command this test does not stand in for: %s", l)
		default:
			fmt.Fprintln(&script, l)
		}
	}
	if bucket == "" {
		t.Fatal("docs/aws.md sets no BUCKET")
	}
	caFile := filepath.Join(work, "ca.pem")
	if err := os.WriteFile(caFile, f.CACertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	// The bucket the setup stack would have made (gofakes3 checks no
	// signature).
	req, err := http.NewRequest(http.MethodPut, s3.URL+"/"+bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create bucket: %s", resp.Status)
	}

	bin := filepath.Dir(rayitoBin(t))
	home := t.TempDir()
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = work
	cmd.Env = []string{
		"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, "state"),
		"AWS_ACCESS_KEY_ID=" + awsTestCredentials.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + awsTestCredentials.SecretAccessKey,
		"AWS_ENDPOINT_URL=" + f.URL(), "AWS_ENDPOINT_URL_S3=" + s3.URL,
		"AWS_CONFIG_FILE=" + filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none"),
		"SSL_CERT_FILE=" + caFile,
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docs/aws.md failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	arn := f.ImageARN("rayito-python")
	for _, want := range []string{arn, "hello from a microVM"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{awsTestCredentials.SecretAccessKey} {
		if strings.Contains(out, secret) || strings.Contains(stderr.String(), secret) {
			t.Error("a credential was printed")
		}
	}
	var runs, creates int
	for _, r := range f.Requests() {
		if !r.Signed {
			t.Errorf("%s was not signed", r.Op)
		}
		switch r.Op {
		case microvms.OpRunMicrovm:
			runs++
			if !strings.Contains(string(r.Body), `"imageIdentifier":"`+arn+`"`) || !strings.Contains(string(r.Body), `"disabled":{}`) {
				t.Errorf("RunMicrovm body: %s", r.Body)
			}
		case microvms.OpCreateMicrovmImage:
			creates++
		}
	}
	if runs != 2 || creates != 1 {
		t.Errorf("%d RunMicrovm (want 2: run and sandbox create), %d CreateMicrovmImage (want 1)", runs, creates)
	}
	// Nothing is left running.
	for vm, err := range f.backend.ListAll(t.Context(), microvms.ListInput{}) {
		if err != nil {
			t.Fatal(err)
		}
		if vm.State != "TERMINATED" && vm.State != "TERMINATING" {
			t.Errorf("sandbox %s left %s", vm.MicrovmID, vm.State)
		}
	}
}
