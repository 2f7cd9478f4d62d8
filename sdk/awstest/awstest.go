// Package awstest runs local stand-ins of AWS services for the tests of
// Rayito's modules (and of programs built on the SDK): Dynalite starts
// dynalite, an implementation of DynamoDB's API on Node.js, on a loopback
// port. The npm package is pinned by the lockfile embedded here and
// installed once (npm ci --ignore-scripts) into a cache directory shared
// by every test binary; without node or npm the test is skipped, saying
// why.
package awstest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

//go:embed dynalite/package.json dynalite/package-lock.json dynalite/serve.js
var dynaliteFiles embed.FS

// Region and the static credentials Dynalite's client is made with.
const (
	Region          = "us-east-1"
	AccessKeyID     = "AKIDLOCAL"
	SecretAccessKey = "local-secret"
)

var (
	installOnce sync.Once
	installDir  string
	installSkip string
	installErr  error
)

// cacheDir is the user's cache directory's rayito-test ($XDG_CACHE_HOME
// moves it).
func cacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "rayito-test"), nil
}

// install puts the pinned dynalite in <cache>/dynalite-<lock hash>: into
// a fresh directory first, renamed into place when complete, so test
// binaries running at once never see half an install (the loser of a
// rename race uses the winner's).
func install() (string, error) {
	lock, err := dynaliteFiles.ReadFile("dynalite/package-lock.json")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(lock)
	base, err := cacheDir()
	if err != nil {
		return "", err
	}
	final := filepath.Join(base, "dynalite-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(final, "node_modules", "dynalite")); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(base, ".dynalite-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, f := range []string{"package.json", "package-lock.json", "serve.js"} {
		b, err := dynaliteFiles.ReadFile("dynalite/" + f)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o600); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// --ignore-scripts: no install script runs (classic-level loads its
	// bundled prebuilt binding); the lockfile pins versions and hashes.
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(base, "npm-cache"), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci of the pinned dynalite: %w\n%s", err, out)
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(filepath.Join(final, "node_modules", "dynalite")); serr == nil {
			return final, nil // another test binary installed it first
		}
		return "", err
	}
	return final, nil
}

// Dynalite starts dynalite (in memory, tables created at once) on a free
// loopback port until t ends and returns a DynamoDB client of it.
func Dynalite(t testing.TB) *dynamodb.Client {
	t.Helper()
	installOnce.Do(func() {
		for _, tool := range []string{"node", "npm"} {
			if _, err := exec.LookPath(tool); err != nil {
				installSkip = tool + " is not installed: this test runs dynalite (a local DynamoDB) on Node.js"
				return
			}
		}
		installDir, installErr = install()
	})
	if installSkip != "" {
		t.Skip(installSkip)
	}
	if installErr != nil {
		t.Fatal(installErr)
	}
	cmd := exec.Command("node", "serve.js")
	cmd.Dir = installDir
	stdin, err := cmd.StdinPipe() // closing it stops dynalite
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				port <- p
			}
		}
	}()
	select {
	case p := <-port:
		return dynamodb.New(dynamodb.Options{
			Region:       Region,
			Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
			BaseEndpoint: aws.String("http://127.0.0.1:" + p),
		})
	case <-time.After(30 * time.Second):
		t.Fatal(errors.New("dynalite did not start within 30 s"))
	}
	return nil
}
