package stackapi

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// PutItemAPI is the only DynamoDB call the audit makes.
type PutItemAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Audit writes the audit table (key "id", a string): one row per request,
// sandbox and action, never overwritten (attribute_not_exists), never
// updated or deleted (the template denies both).
type Audit struct {
	API   PutItemAPI
	Table string
}

// Entry is one audit row.
type Entry struct {
	RequestID, SandboxID, Action, Sub, SourceIP string
	At                                          time.Time
}

// ErrAudit is returned when the row was not written.
var ErrAudit = errors.New("stackapi: audit row not written")

// AuditKey is the row's key.
const AuditKey = "id"

// Record writes e with a conditional PutItem.
func (a *Audit) Record(ctx context.Context, e Entry) error {
	if a == nil || a.API == nil || e.RequestID == "" || e.SandboxID == "" || e.Sub == "" {
		return ErrAudit
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	item := map[string]types.AttributeValue{
		AuditKey:     s(e.RequestID + "#" + e.SandboxID + "#" + e.Action),
		"sub":        s(e.Sub),
		"action":     s(e.Action),
		"sandbox_id": s(e.SandboxID),
		"request_id": s(e.RequestID),
		"at":         s(e.At.UTC().Format(time.RFC3339Nano)),
		"at_unix":    &types.AttributeValueMemberN{Value: strconv.FormatInt(e.At.Unix(), 10)},
	}
	if e.SourceIP != "" {
		item["source_ip"] = s(e.SourceIP)
	}
	_, err := a.API.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(a.Table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#id)"),
		ExpressionAttributeNames: map[string]string{"#id": AuditKey},
	})
	if err != nil {
		return ErrAudit
	}
	return nil
}
