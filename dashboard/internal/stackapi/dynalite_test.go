package stackapi

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rayito-dev/rayito/sdk/awstest"
)

// startDynalite runs dynalite on a loopback port until the test ends
// (awstest.Dynalite: skipped, saying why, without Node.js) and returns a
// client of it that does not retry (a failing write fails at once).
func startDynalite(t *testing.T) *dynamodb.Client {
	o := awstest.Dynalite(t).Options()
	o.RetryMaxAttempts = 1
	return dynamodb.New(o)
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
