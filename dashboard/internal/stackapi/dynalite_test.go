package stackapi

import (
	"bufio"
	"context"
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
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

var (
	npmOnce sync.Once
	npmSkip string
	npmErr  error
)

// dynaliteDir installs the pinned dynalite (npm ci, once per test run);
// it skips, saying why, without node or npm.
func dynaliteDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "dynalite"))
	if err != nil {
		t.Fatal(err)
	}
	npmOnce.Do(func() {
		for _, tool := range []string{"node", "npm"} {
			if _, err := exec.LookPath(tool); err != nil {
				npmSkip = tool + " is not installed: the audit, budget and quota-state tests run dynalite (npm ci of testdata/dynalite) on Node.js"
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// --ignore-scripts: no install script runs; the lockfile pins
		// versions and hashes. The cache is the repository's .tmp.
		cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(dir, "..", "..", "..", "..", "..", ".tmp", "npm-cache"), "npm_config_update_notifier=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			npmErr = fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
		}
	})
	if npmSkip != "" {
		t.Skip(npmSkip)
	}
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	return dir
}

// startDynalite runs dynalite on a loopback port until the test ends.
func startDynalite(t *testing.T) *dynamodb.Client {
	t.Helper()
	dir := dynaliteDir(t)
	cmd := exec.Command("node", "serve.js")
	cmd.Dir = dir
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
	var p string
	select {
	case p = <-port:
	case <-time.After(30 * time.Second):
		t.Fatal("dynalite did not start within 30 s")
	}
	return dynamodb.New(dynamodb.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
		BaseEndpoint:     aws.String("http://127.0.0.1:" + p),
		RetryMaxAttempts: 1,
	})
}

// createTable makes a table keyed by the string "id", as
// infra/dashboard.yaml's audit and state tables are.
func createTable(t *testing.T, c *dynamodb.Client, name string) {
	t.Helper()
	_, err := c.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	w := dynamodb.NewTableExistsWaiter(c)
	if err := w.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}
