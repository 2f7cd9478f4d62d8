package project

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/agenthost/secretenv"
)

const full = `
name = "support-bot"
command = ["python3", "agent.py", "--verbose"]
[model]
provider = "bedrock"
id = "anthropic.claude-3-5-haiku-20241022-v1:0"
region = "us-east-1"
[egress]
allow = ["api.github.com", "*.example.com"]
[secret_env]
GITHUB_TOKEN = "github-token"
[[secret_env_from]]
secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf"
keys = ["DB_USER", "DB_PASSWORD"]
`

func TestParse(t *testing.T) {
	p, err := Parse([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := p.Entries()
	if err != nil || len(entries) != 3 || entries[0].Name != "DB_PASSWORD" || entries[0].Key != "DB_PASSWORD" || entries[2].Secret != "github-token" {
		t.Fatalf("%+v %v", entries, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(Template("hello")), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := Load(dir); err != nil || p.Name != "hello" || p.Command[0] != "python3" {
		t.Fatalf("the init template: %+v %v", p, err)
	}
}

func TestRefusals(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(string) string
		want error
	}{
		"unknown key":      {func(s string) string { return s + "\nvalue = \"x\"\n" }, ErrInvalid},
		"unknown in model": {func(s string) string { return strings.Replace(s, "[model]\n", "[model]\nkey = \"sk-1\"\n", 1) }, ErrInvalid},
		"bad name":         {func(s string) string { return strings.Replace(s, "support-bot", "Support_Bot", 1) }, ErrInvalid},
		"no command":       {func(s string) string { return strings.Replace(s, `["python3", "agent.py", "--verbose"]`, "[]", 1) }, ErrInvalid},
		"provider":         {func(s string) string { return strings.Replace(s, `"bedrock"`, `"cohere"`, 1) }, ErrInvalid},
		"region":           {func(s string) string { return strings.Replace(s, `"us-east-1"`, `"mars"`, 1) }, ErrInvalid},
		"egress":           {func(s string) string { return strings.Replace(s, `"api.github.com"`, `"http://x"`, 1) }, ErrInvalid},
		"egress ip":        {func(s string) string { return strings.Replace(s, `"api.github.com"`, `"10.0.0.1"`, 1) }, ErrInvalid},
		"reserved":         {func(s string) string { return strings.Replace(s, "GITHUB_TOKEN =", "LD_PRELOAD =", 1) }, secretenv.ErrSecretEnv},
		"reserved path":    {func(s string) string { return strings.Replace(s, "GITHUB_TOKEN =", "PATH =", 1) }, secretenv.ErrSecretEnv},
		"reserved key":     {func(s string) string { return strings.Replace(s, `"DB_USER"`, `"AWS_SECRET_ACCESS_KEY"`, 1) }, secretenv.ErrSecretEnv},
		"twice":            {func(s string) string { return strings.Replace(s, "GITHUB_TOKEN =", "DB_USER =", 1) }, secretenv.ErrSecretEnv},
		"no keys":          {func(s string) string { return strings.Replace(s, `keys = ["DB_USER", "DB_PASSWORD"]`, "keys = []", 1) }, secretenv.ErrSecretEnv},
		"not toml":         {func(string) string { return "name = " }, ErrInvalid},
		"base_url": {func(s string) string {
			return strings.Replace(s, "[model]\n", "[model]\nbase_url = \"https://x\"\n", 1)
		}, ErrInvalid},
	} {
		if _, err := Parse([]byte(c.edit(full))); !errors.Is(err, c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Load(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no file: %v", err)
	}
}

// FuzzParse: a project file is the user's input (and a repository's):
// Parse returns a checked project or a typed error.
func FuzzParse(f *testing.F) {
	f.Add(full)
	f.Add(Template("x"))
	f.Add("name = \"a\"\ncommand = [\"x\"]\n[secret_env]\nPATH = \"p\"\n")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse([]byte(s))
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, secretenv.ErrSecretEnv) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if p.Check() != nil {
			t.Fatal("Parse returned a project Check refuses")
		}
		entries, err := p.Entries()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if secretenv.Reserved(e.Name) {
				t.Fatalf("reserved %s", e.Name)
			}
		}
	})
}
