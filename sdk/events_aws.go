package rayito

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"

	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/sdk/internal/smjson"
)

// The webhook and event calls on AWS talk to the events stack with the
// caller's credentials: its DynamoDB table (the webhook registry in the
// partition "webhooks", each sandbox's events in "sandbox#<id>"; the
// layout is proto/events') and Secrets Manager (each webhook's signing
// secret, rayito/webhooks/<webhook id>, which the stack's deliverer
// reads). RegisterWebhook, ListWebhooks and DeleteWebhook need the
// stack's EventsWebhookAdminPolicy, GetEvents its EventsReaderPolicy.

// WithEventsTable names the events stack's DynamoDB table (the stack's
// EventsTableName output) for RegisterWebhook, ListWebhooks,
// DeleteWebhook and GetEvents on AWS. The default is RAYITO_EVENTS_TABLE.
// The local platform ignores it.
func WithEventsTable(name string) Option {
	return sandboxOption(func(c *config) { c.eventsTable = name })
}

// eventsAWS is one call's clients.
type eventsAWS struct {
	db    *dynamodb.Client
	sm    *smjson.Client
	table string
}

func newEventsAWS(ctx context.Context, cfg *config) (*eventsAWS, error) {
	table := cfg.eventsTable
	if table == "" {
		return nil, newError(ReasonInvalidArgument, "the webhook and event calls on AWS need the events stack's table: WithEventsTable or RAYITO_EVENTS_TABLE (the stack's EventsTableName output)")
	}
	if !validTableName(table) {
		return nil, newError(ReasonInvalidArgument, "invalid events table name (3 to 255 of A-Z a-z 0-9 _ . -)")
	}
	awsCfg, err := cfg.callerAWSConfig(ctx)
	if err != nil {
		return nil, err
	}
	return &eventsAWS{db: dynamodb.NewFromConfig(awsCfg), sm: smjson.New(awsCfg), table: table}, nil
}

// callerAWSConfig is the AWS configuration of the calls made with the
// caller's own credentials: WithAWSConfig's, else the default chain; the
// AWS SDK's own logging off; a region required.
func (c *config) callerAWSConfig(ctx context.Context) (aws.Config, error) {
	var awsCfg aws.Config
	if c.awsConfig != nil {
		awsCfg = c.awsConfig.Copy()
	} else {
		loaded, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithLogger(logging.Nop{}))
		if err != nil {
			return aws.Config{}, newError(ReasonUnauthenticated, "cannot load the AWS configuration (credentials, profile)", err)
		}
		awsCfg = loaded
	}
	awsCfg.Logger = logging.Nop{}
	awsCfg.ClientLogMode = 0
	if awsCfg.Region == "" {
		return aws.Config{}, newError(ReasonInvalidArgument, "no AWS region is configured: set AWS_REGION or a region in your AWS profile")
	}
	return awsCfg, nil
}

// validTableName is DynamoDB's rule for table names.
func validTableName(s string) bool {
	if len(s) < 3 || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// dynamoErr maps a DynamoDB error, naming the policy that grants op.
func dynamoErr(op, policy string, err error) error {
	switch awsErrorCode(err) {
	case "ResourceNotFoundException":
		return newError(ReasonNotFound, "rayito: the events table does not exist in this account and region (deploy the events stack: rayito stack deploy events)", ErrNotFound)
	case "AccessDeniedException":
		return newError(ReasonPermissionDenied, "rayito: dynamodb "+op+" on the events table was denied (the events stack's "+policy+")")
	}
	return awsErr("dynamodb", op, err)
}

const (
	webhookAdminPolicy = "EventsWebhookAdminPolicy"
	eventsReaderPolicy = "EventsReaderPolicy"
)

// Webhook item attributes (the stack's store reads the same).
const (
	attrWebhookID   = "webhook_id"
	attrURL         = "url"
	attrSecretRef   = "secret_ref"
	attrTypes       = "types"
	attrCreatedAtMs = "created_at_ms"
)

func ddbS(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }

// register creates the webhook's secret, then its item; the secret is
// removed again when the item cannot be written.
func (e *eventsAWS) register(ctx context.Context, url string, types []EventType, secret string) (Webhook, error) {
	hooks, err := e.list(ctx)
	if err != nil {
		return Webhook{}, err
	}
	if len(hooks) >= events.MaxWebhooks {
		return Webhook{}, newError(ReasonResourceExhausted, fmt.Sprintf("at most %d webhooks", events.MaxWebhooks))
	}
	id := events.NewWebhookID()
	name := events.WebhookSecretPrefix + id
	if err := e.sm.CreateSecret(ctx, smjson.CreateSecretInput{
		Name:         name,
		SecretString: secret,
		Description:  "Rayito webhook signing secret",
		Tags:         []smjson.Tag{{Key: "rayito:webhook-id", Value: id}},
	}); err != nil {
		if awsErrorCode(err) == "AccessDeniedException" {
			return Webhook{}, newError(ReasonPermissionDenied, "rayito: secrets manager CreateSecret of the webhook's secret was denied (the events stack's "+webhookAdminPolicy+")")
		}
		return Webhook{}, awsErr("secrets manager", "CreateSecret", err)
	}
	now := time.Now().UTC()
	item := map[string]ddbtypes.AttributeValue{
		events.TableAttrPK:   ddbS(events.TableWebhooksPK),
		events.TableAttrSK:   ddbS(events.TableWebhookSK(id)),
		events.TableAttrKind: ddbS(events.TableKindWebhook),
		attrWebhookID:        ddbS(id),
		attrURL:              ddbS(url),
		attrSecretRef:        ddbS(name),
		attrCreatedAtMs:      &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
	}
	if len(types) > 0 {
		ss := make([]string, len(types))
		for i, t := range types {
			ss[i] = string(t)
		}
		item[attrTypes] = &ddbtypes.AttributeValueMemberSS{Value: ss}
	}
	if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &e.table, Item: item,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}); err != nil {
		// Take the secret back, even when ctx has ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = e.sm.DeleteSecret(cctx, name, true)
		return Webhook{}, dynamoErr("PutItem", webhookAdminPolicy, err)
	}
	return Webhook{ID: id, URL: url, Types: types, CreatedAt: now.Truncate(time.Millisecond)}, nil
}

// list returns the registry, oldest first.
func (e *eventsAWS) list(ctx context.Context) ([]Webhook, error) {
	var hooks []Webhook
	err := e.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 &e.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": ddbS(events.TableWebhooksPK)},
		ConsistentRead:            aws.Bool(true),
	}, webhookAdminPolicy, func(it map[string]ddbtypes.AttributeValue) error {
		w, err := webhookFromItem(it)
		hooks = append(hooks, w)
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(hooks, func(i, j int) bool {
		if !hooks[i].CreatedAt.Equal(hooks[j].CreatedAt) {
			return hooks[i].CreatedAt.Before(hooks[j].CreatedAt)
		}
		return hooks[i].ID < hooks[j].ID
	})
	return hooks, nil
}

// queryAll runs a query through all its pages (the AWS SDK's paginator),
// handing each item to each; policy names what grants the query.
func (e *eventsAWS) queryAll(ctx context.Context, in *dynamodb.QueryInput, policy string, each func(map[string]ddbtypes.AttributeValue) error) error {
	pages := dynamodb.NewQueryPaginator(e.db, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return dynamoErr("Query", policy, err)
		}
		for _, it := range out.Items {
			if err := each(it); err != nil {
				return err
			}
		}
	}
	return nil
}

// item reads an item's string and number attributes ("" and false when
// absent or of another type).
type item map[string]ddbtypes.AttributeValue

func (it item) str(k string) string {
	if v, ok := it[k].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func (it item) num(k string) (int64, bool) {
	v, ok := it[k].(*ddbtypes.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}

// errItemShape reports an item of the events table the SDK cannot read.
func errItemShape() error {
	return newError(ReasonInternal, "rayito: an item of the events table has an unexpected shape")
}

func webhookFromItem(raw map[string]ddbtypes.AttributeValue) (Webhook, error) {
	it := item(raw)
	ms, ok := it.num(attrCreatedAtMs)
	if !ok || it.str(events.TableAttrKind) != events.TableKindWebhook || it.str(attrWebhookID) == "" || it.str(attrURL) == "" {
		return Webhook{}, errItemShape()
	}
	w := Webhook{ID: it.str(attrWebhookID), URL: it.str(attrURL), CreatedAt: time.UnixMilli(ms).UTC()}
	if ss, ok := raw[attrTypes].(*ddbtypes.AttributeValueMemberSS); ok {
		ts := append([]string(nil), ss.Value...)
		sort.Strings(ts)
		for _, t := range ts {
			w.Types = append(w.Types, EventType(t))
		}
	}
	return w, nil
}

// remove deletes the webhook's item (the deliverer stops using it), then
// its secret, at once and without a recovery window.
func (e *eventsAWS) remove(ctx context.Context, id string) error {
	_, err := e.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &e.table,
		Key: map[string]ddbtypes.AttributeValue{
			events.TableAttrPK: ddbS(events.TableWebhooksPK),
			events.TableAttrSK: ddbS(events.TableWebhookSK(id)),
		},
		ConditionExpression: aws.String("attribute_exists(pk)"),
	})
	if err != nil {
		if awsErrorCode(err) == "ConditionalCheckFailedException" {
			return newError(ReasonNotFound, "rayito: no such webhook", ErrNotFound)
		}
		return dynamoErr("DeleteItem", webhookAdminPolicy, err)
	}
	err = e.sm.DeleteSecret(ctx, events.WebhookSecretPrefix+id, true)
	if err != nil && awsErrorCode(err) != "ResourceNotFoundException" {
		return newError(ReasonInternal, "rayito: the webhook is removed but its secret "+events.WebhookSecretPrefix+id+" is not: "+awsErr("secrets manager", "DeleteSecret", err).Error())
	}
	return nil
}

// getEvents reads one sandbox's events (the reader policy grants the
// sandboxes' partitions only; no index holds every sandbox's events).
func (e *eventsAWS) getEvents(ctx context.Context, q EventsQuery) ([]LifecycleEvent, error) {
	var evs []LifecycleEvent
	err := e.queryAll(ctx, &dynamodb.QueryInput{
		TableName:              &e.table,
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :ev)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":pk": ddbS(events.TableSandboxPK(q.SandboxID)), ":ev": ddbS(events.TableEventSKPrefix),
		},
		ConsistentRead: aws.Bool(true),
	}, eventsReaderPolicy, func(it map[string]ddbtypes.AttributeValue) error {
		ev, err := eventFromItem(it, q.SandboxID)
		evs = append(evs, ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Generation < evs[j].Generation })
	return orderAndLimit(evs, q), nil
}

// orderAndLimit applies a query's order and limit to events oldest first.
func orderAndLimit(evs []LifecycleEvent, q EventsQuery) []LifecycleEvent {
	if q.Order != "asc" {
		for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
			evs[i], evs[j] = evs[j], evs[i]
		}
	}
	limit := q.Limit
	if limit == 0 {
		limit = 100
	}
	if len(evs) > limit {
		evs = evs[:limit]
	}
	return evs
}

func eventFromItem(raw map[string]ddbtypes.AttributeValue, sandboxID string) (LifecycleEvent, error) {
	it := item(raw)
	gen, ok1 := it.num("generation")
	at, ok2 := it.num("occurred_at_ms")
	ev := LifecycleEvent{
		EventID: it.str("event_id"), SandboxID: it.str("sandbox_id"), Type: EventType(it.str("type")),
		KillReason: it.str("kill_reason"), OccurredAt: time.UnixMilli(at).UTC(), ImageARN: it.str("image_arn"),
	}
	if !ok1 || !ok2 || gen < 1 || it.str(events.TableAttrKind) != events.TableKindEvent || ev.SandboxID != sandboxID ||
		ev.EventID == "" || !strings.HasPrefix(it.str(events.TableAttrSK), events.TableEventSKPrefix) || !events.Type(ev.Type).Valid() {
		return LifecycleEvent{}, errItemShape()
	}
	ev.Generation = uint64(gen)
	return ev, nil
}
