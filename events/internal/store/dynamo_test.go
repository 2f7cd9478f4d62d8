package store

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

	"github.com/rayito-dev/rayito/proto/events"
)

var (
	npmOnce sync.Once
	npmSkip string
	npmErr  error
)

// dynaliteDir installs the pinned dynalite (npm ci, once per test run)
// and returns its directory; it skips, saying why, without node or npm.
func dynaliteDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "dynalite"))
	if err != nil {
		t.Fatal(err)
	}
	npmOnce.Do(func() {
		for _, tool := range []string{"node", "npm"} {
			if _, err := exec.LookPath(tool); err != nil {
				npmSkip = tool + " is not installed: the DynamoDB store tests run dynalite (npm ci of testdata/dynalite) on Node.js"
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// --ignore-scripts: no install script runs (classic-level loads its
		// bundled prebuilt binding); the lockfile pins versions and hashes.
		// The cache is the repository's .tmp (gitignored).
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

// startDynalite runs dynalite on a free loopback port until the test ends
// and returns a client of it.
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
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
		BaseEndpoint: aws.String("http://127.0.0.1:" + p),
	})
}

// createTable makes the table as events/stack/events-webhooks.yaml does (keys,
// the sparse index; dynalite has no streams or TTL).
func createTable(t *testing.T, c *dynamodb.Client, name string) {
	t.Helper()
	str := types.ScalarAttributeTypeS
	_, err := c.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrPK), AttributeType: str}, {AttributeName: aws.String(AttrSK), AttributeType: str},
			{AttributeName: aws.String(AttrOpen), AttributeType: str}, {AttributeName: aws.String("sandbox_id"), AttributeType: str},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash}, {AttributeName: aws.String(AttrSK), KeyType: types.KeyTypeRange}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName:  aws.String(OpenIndex),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String(AttrOpen), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sandbox_id"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	w := dynamodb.NewTableExistsWaiter(c)
	if err := w.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestDynamo(t *testing.T) {
	c := startDynalite(t)
	createTable(t, c, "rayito-events")
	now := t0
	d := &Dynamo{API: c, Table: "rayito-events", Now: func() time.Time { return now }}
	contract(t, d)

	ctx := context.Background()
	t.Run("item shapes", func(t *testing.T) {
		// The event item the stream carries: kind, keys, TTL 7 days.
		e := mkEvent("sbx-shape", 42, events.Killed, 7)
		e.ExecutionID = "exec-1"
		if err := d.PutEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
		out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("rayito-events"), Key: key("sandbox#sbx-shape", "event#"+e.EventID)})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for k, v := range out.Item {
			switch v := v.(type) {
			case *types.AttributeValueMemberS:
				got[k] = "S:" + v.Value
			case *types.AttributeValueMemberN:
				got[k] = "N:" + v.Value
			default:
				got[k] = fmt.Sprintf("%T", v)
			}
		}
		want := map[string]string{
			"pk": "S:sandbox#sbx-shape", "sk": "S:event#" + e.EventID, "kind": "S:event", "event_id": "S:" + e.EventID,
			"sandbox_id": "S:sbx-shape", "type": "S:killed", "kill_reason": "S:unknown", "generation": "N:7",
			"occurred_at_ms": fmt.Sprintf("N:%d", e.OccurredAtMs), "image_arn": "S:arn:img", "execution_id": "S:exec-1",
			"expires_at": fmt.Sprintf("N:%d", t0.Add(7*24*time.Hour).Unix()),
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("item\n got %v\nwant %v", got, want)
		}
		// The open attribute exists only while the sandbox is open; a
		// killed state item gets the TTL.
		sb, _ := d.GetSandbox(ctx, "sbx-shape")
		next := sb
		next.Created = true
		sb, _ = d.PutSandbox(ctx, sb, next)
		st, _ := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("rayito-events"), Key: key("sandbox#sbx-shape", "state")})
		if _, ok := st.Item[AttrOpen]; !ok {
			t.Fatal("open sandbox without the open attribute")
		}
		if _, ok := st.Item[AttrExpiresAt]; ok {
			t.Fatal("open sandbox with a TTL")
		}
		next = sb
		next.Killed = true
		if _, err := d.PutSandbox(ctx, sb, next); err != nil {
			t.Fatal(err)
		}
		st, _ = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("rayito-events"), Key: key("sandbox#sbx-shape", "state")})
		if _, ok := st.Item[AttrOpen]; ok {
			t.Fatal("killed sandbox keeps the open attribute")
		}
		if _, ok := st.Item[AttrExpiresAt]; !ok {
			t.Fatal("killed sandbox without a TTL")
		}
	})
	t.Run("backend errors name no request", func(t *testing.T) {
		bad := &Dynamo{API: c, Table: "no-such-table"}
		_, err := bad.GetSandbox(ctx, "sbx-secret-name")
		if err == nil || strings.Contains(err.Error(), "sbx-secret-name") || !strings.Contains(err.Error(), "ResourceNotFoundException") {
			t.Fatalf("%v", err)
		}
	})
}
