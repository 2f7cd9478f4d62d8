package tests

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/awstest"
)

// The metadata index on the local platform (real sandboxes, as root) with
// dynalite as the table, reached through the AWS configuration's
// BaseEndpoint: a paused sandbox is found by its metadata without waking
// it, a forged row changes nothing, and no token is stored.
func TestIndexLocalPlatform(t *testing.T) {
	if !isRoot() {
		t.Skip("the local platform's isolated sandboxes (and their pause) need root")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	db := awstest.Dynalite(t)
	ctx := t.Context()
	const table = "rayito-index"
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	awsCfg := aws.Config{Region: awstest.Region, BaseEndpoint: db.Options().BaseEndpoint,
		Credentials: credentials.NewStaticCredentialsProvider(awstest.AccessKeyID, awstest.SecretAccessKey, "")}
	opts := func(extra ...rayito.Option) []rayito.Option {
		return p.opts(append([]rayito.Option{rayito.WithAWSConfig(awsCfg), rayito.WithIndex(rayito.DynamoDbIndex{Table: table})}, extra...)...)
	}
	a, err := rayito.Create(ctx, opts(rayito.WithMetadata(map[string]string{"team": "a"}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Kill(context.WithoutCancel(ctx))
	b, err := rayito.Create(ctx, opts(rayito.WithMetadata(map[string]string{"team": "b"}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Kill(context.WithoutCancel(ctx))
	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	listB := func() []rayito.Info {
		t.Helper()
		got, err := rayito.List(ctx, opts(rayito.WithMetadataFilter(map[string]string{"team": "b"}))...)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := listB()
	if len(got) != 1 || got[0].ID != b.ID() || got[0].State != "SUSPENDED" || got[0].Metadata["team"] != "b" {
		t.Fatalf("listed %+v, want b alone, SUSPENDED, with its metadata", got)
	}
	if info, err := rayito.GetInfo(ctx, b.ID(), p.opts()...); err != nil || info.State != "SUSPENDED" {
		t.Errorf("b after the listing: %+v %v, want still SUSPENDED", info, err)
	}
	// Without the index a paused sandbox cannot be asked.
	if plain, err := rayito.List(ctx, p.opts(rayito.WithMetadataFilter(map[string]string{"team": "b"}))...); err != nil || len(plain) != 0 {
		t.Errorf("without the index: %+v %v", plain, err)
	}
	// A forged row for a with b's label and another image: a is still
	// listed by its own metadata (Health), never as team b.
	info, err := a.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
		"pk":         &ddbtypes.AttributeValueMemberS{Value: a.ID()},
		"image_arn":  &ddbtypes.AttributeValueMemberS{Value: "rayito-evil"},
		"started_at": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(info.StartedAt.UnixMilli(), 10)},
		"metadata":   &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{"team": &ddbtypes.AttributeValueMemberS{Value: "b"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if got := listB(); len(got) != 1 || got[0].ID != b.ID() {
		t.Errorf("after the forged row: %+v, want b alone", got)
	}
	// No token or its hash in the table.
	scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range scan.Items {
		for k, v := range item {
			s, ok := v.(*ddbtypes.AttributeValueMemberS)
			if !ok {
				continue
			}
			for _, sbx := range []*rayito.Sandbox{a, b} {
				dg, _ := accesstoken.Digest(sbx.AccessToken())
				if s.Value == sbx.AccessToken() || s.Value == dg {
					t.Errorf("attribute %s holds a token or its hash", k)
				}
			}
		}
	}
}
