package image

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoImageDir is the repository's image/ directory.
var repoImageDir = filepath.Join("..", "..", "..", "image")

// instructions joins a Dockerfile's continuation lines and drops comments
// and blank lines: one string per instruction.
func instructions(text string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if cur.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasPrefix(t, "#") {
			continue // a comment inside a continued instruction
		}
		if strings.HasSuffix(t, `\`) {
			cur.WriteString(strings.TrimSuffix(t, `\`) + " ")
			continue
		}
		cur.WriteString(t)
		out = append(out, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

var (
	pinnedFrom  = regexp.MustCompile(`(?i)^FROM\s+(--platform=\S+\s+)?\S+@sha256:([0-9a-f]{64}|` + Placeholder + `)(\s+AS\s+\S+)?$`)
	download    = regexp.MustCompile(`(^|[\s;&|(])(curl|wget)\s`)
	checked     = regexp.MustCompile(`sha256sum\s+(--strict\s+)?(-c|--check)\b`)
	pipInstall  = regexp.MustCompile(`(^|[\s;&|(])(pip3?|python3?\s+-m\s+pip)\s+install\s+([^;&|]*)`)
	pinnedPkg   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9][A-Za-z0-9.+!_-]*$`)
	addURL      = regexp.MustCompile(`(?i)^ADD\s.*\bhttps?://`)
	addChecksum = regexp.MustCompile(`(?i)^ADD\s.*--checksum=sha256:[0-9a-f]{64}\b`)
)

// pipValueFlags are pip install's options that take a value.
var pipValueFlags = map[string]bool{
	"-r": true, "--requirement": true, "-c": true, "--constraint": true,
	"-t": true, "--target": true, "--prefix": true, "--root": true,
	"-i": true, "--index-url": true, "--extra-index-url": true, "-f": true, "--find-links": true,
	"--platform": true, "--python-version": true, "--implementation": true, "--abi": true,
}

// lintDockerfile lists what in a Dockerfile is not pinned: a FROM not
// named by digest, a curl or wget whose instruction does not check a
// sha256 (sha256sum -c), an ADD of a URL without --checksum, a pip
// install of a package by name (even ==version: only a --require-hashes
// lock pins what it pulls in too), or of a requirements file without
// --require-hashes.
func lintDockerfile(text string) []string {
	var problems []string
	for _, ins := range instructions(text) {
		kw := strings.ToUpper(strings.Fields(ins)[0])
		switch kw {
		case "FROM":
			if !pinnedFrom.MatchString(ins) && !regexp.MustCompile(`(?i)^FROM\s+scratch$`).MatchString(ins) {
				problems = append(problems, "unpinned FROM (no @sha256:<digest>): "+ins)
			}
		case "ADD":
			if addURL.MatchString(ins) && !addChecksum.MatchString(ins) {
				problems = append(problems, "ADD of a URL without --checksum=sha256: "+ins)
			}
		case "RUN":
			if download.MatchString(ins) && !checked.MatchString(ins) {
				problems = append(problems, "download without a sha256 check (sha256sum -c): "+ins)
			}
			for _, m := range pipInstall.FindAllStringSubmatch(ins, -1) {
				problems = append(problems, lintPip(m[3], ins)...)
			}
		}
	}
	return problems
}

func lintPip(args, ins string) []string {
	var problems []string
	f := strings.Fields(args)
	hashes := strings.Contains(args, "--require-hashes")
	for i := 0; i < len(f); i++ {
		a := f[i]
		switch {
		case a == "-r" || a == "--requirement" || strings.HasPrefix(a, "--requirement=") || (strings.HasPrefix(a, "-r") && len(a) > 2):
			if !hashes {
				problems = append(problems, "pip install -r without --require-hashes: "+ins)
			}
			if pipValueFlags[a] {
				i++
			}
		case pipValueFlags[a]:
			i++
		case strings.HasPrefix(a, "-"):
		case !pinnedPkg.MatchString(strings.Trim(a, `"'`)):
			problems = append(problems, "pip install of "+a+" without ==version: "+ins)
		default:
			// A version is not enough: the package, and what it pulls in,
			// must come by hash from a lock.
			problems = append(problems, "pip install of "+a+" by version only (no sha256: install a --require-hashes lock): "+ins)
		}
	}
	return problems
}

// TestDockerfileTemplatePinned: the repository's template names its base
// by digest and downloads nothing unpinned.
func TestDockerfileTemplatePinned(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoImageDir, TemplateName))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lintDockerfile(string(b)) {
		t.Errorf("image/%s: %s", TemplateName, p)
	}
	if !strings.Contains(string(b), "FROM "+BaseImage+"@sha256:"+Placeholder+"\n") {
		t.Errorf("image/%s: FROM is not %s@sha256:%s", TemplateName, BaseImage, Placeholder)
	}
}

// TestNoCommittedDockerfile: image/ holds the template, never a
// Dockerfile (which could carry an unpinned or stale FROM).
func TestNoCommittedDockerfile(t *testing.T) {
	if _, err := os.Lstat(filepath.Join(repoImageDir, DockerfileName)); err == nil {
		t.Errorf("image/%s exists: the artifact's Dockerfile is generated from %s", DockerfileName, TemplateName)
	}
}

// TestRaydVersionMatches: the template's RAYD_VERSION is rayd's version in
// versions.yaml, so the COPY names the binary `make dist` builds.
func TestRaydVersionMatches(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join(repoImageDir, TemplateName))
	if err != nil {
		t.Fatal(err)
	}
	vy, err := os.ReadFile(filepath.Join(repoImageDir, "..", "versions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^  rayd:\n    version: (\S+)$`).FindSubmatch(vy)
	if m == nil {
		t.Fatal("versions.yaml: no rayd version")
	}
	want := "ARG RAYD_VERSION=" + string(m[1]) + "\n"
	if !strings.Contains(string(tmpl), want) {
		t.Errorf("image/%s lacks %q", TemplateName, strings.TrimSpace(want))
	}
}

func TestLintDockerfile(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	good := []string{
		"FROM x/y:tag@sha256:" + digest,
		"FROM --platform=linux/arm64 x/y@sha256:" + digest + " AS build",
		"FROM x/y:tag@sha256:" + Placeholder,
		"FROM scratch",
		"RUN curl -fsSLo z.tgz https://example.com/z-1.2.tgz \\\n && echo \"" + digest + "  z.tgz\" | sha256sum -c -",
		"RUN pip install --require-hashes -r requirements.txt",
		"RUN python3 -m pip install --no-cache-dir --only-binary=:all: \\\n --require-hashes -r /tmp/k/requirements.lock",
		"RUN dnf install -y python3",
		"ADD --checksum=sha256:" + digest + " https://example.com/f /f",
		"# RUN curl https://example.com | sh",
	}
	for _, d := range good {
		if p := lintDockerfile(d); len(p) != 0 {
			t.Errorf("%q: %v, want no problem", d, p)
		}
	}
	bad := []string{
		"FROM public.ecr.aws/lambda/microvms:al2023-minimal",
		"FROM x/y@sha256:abc",
		"FROM x/y:latest AS base",
		"RUN curl -fsSL https://example.com/install.sh | sh",
		"RUN wget https://example.com/z.tgz && tar xf z.tgz",
		"RUN curl -o z https://e.com/z \\\n && sha256sum z",
		"RUN pip install ipykernel",
		"RUN pip3 install ipykernel>=6",
		"RUN python3 -m pip install --upgrade pip",
		"RUN pip install ipykernel==6.*",
		"RUN pip install -r requirements.txt",
		"RUN python3 -m pip install --no-cache-dir ipykernel==6.29.5 'rich[jupyter]==13.7.1'",
		"RUN pip install --require-hashes ipykernel==6.29.5",
		"ADD https://example.com/f /f",
	}
	for _, d := range bad {
		if p := lintDockerfile(d); len(p) == 0 {
			t.Errorf("%q: no problem found, want one", d)
		}
	}
}
