package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/sdk/awstest"
)

// startDynalite runs dynalite on a free loopback port until the test ends
// and returns a client of it (awstest.Dynalite: skipped, saying why,
// without Node.js).
func startDynalite(t *testing.T) *dynamodb.Client { return awstest.Dynalite(t) }

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
