package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rayito-dev/rayito/proto/events"
)

// The table's layout (events/stack/events-webhooks.yaml creates it): one table,
// string keys pk and sk, TTL attribute expires_at (epoch seconds), a
// stream of NEW_IMAGE records and the sparse global secondary index
// OpenIndex (partition key open, sort key sandbox_id; only state items
// of open sandboxes carry open). Every item has kind.
//
//	kind      pk                  sk                  other attributes
//	sandbox   sandbox#<id>        state               version, created, killed, last_*, image_arn, execution_id, tokens, bucket_at_ms, open ("1" while open), expires_at (once killed)
//	event     sandbox#<id>        event#<event id>    event_id, sandbox_id, type, kill_reason, generation, occurred_at_ms, image_arn, execution_id, expires_at
//	delivery  delivery#<event id> webhook#<id>        event_id, webhook_id, outcome, attempts, status, reason, updated_at_ms, expires_at
//	webhook   webhooks            webhook#<id>        webhook_id, url, secret_ref, types (string set), created_at_ms
//
// The key names, the webhook and event kinds and their keys are
// proto/events' (the SDK writes webhook items and reads event items too).
const (
	AttrPK        = events.TableAttrPK
	AttrSK        = events.TableAttrSK
	AttrKind      = events.TableAttrKind
	AttrOpen      = "open"
	AttrExpiresAt = "expires_at"
	OpenIndex     = "open-sandboxes"
	KindSandbox   = "sandbox"
	KindEvent     = events.TableKindEvent
	KindDelivery  = "delivery"
	KindWebhook   = events.TableKindWebhook
	openValue     = "1"
	webhooksPK    = events.TableWebhooksPK
)

// DynamoAPI is the part of the DynamoDB client the store uses.
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Dynamo is the Store on one DynamoDB table.
type Dynamo struct {
	API   DynamoAPI
	Table string
	// Now stamps TTLs (time.Now when nil).
	Now func() time.Time
}

func (d *Dynamo) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Dynamo) expires() types.AttributeValue {
	return num(d.now().Add(TTL).Unix())
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num[T int64 | uint64 | int](v T) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(int64(v), 10)}
}
func numU(v uint64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(v, 10)}
}
func numF(v float64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatFloat(v, 'f', -1, 64)}
}
func b(v bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: v} }

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: s(pk), AttrSK: s(sk)}
}

func sandboxPK(id string) string { return events.TableSandboxPK(id) }

// condFailed reports a failed condition.
func condFailed(err error) bool {
	var cf *types.ConditionalCheckFailedException
	return errors.As(err, &cf)
}

// backend wraps an AWS error without its message (it may quote the
// request).
func backend(op string, err error) error {
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) {
		return fmt.Errorf("store: dynamodb %s: %s", op, ae.ErrorCode())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("store: dynamodb %s: %w", op, err)
	}
	return fmt.Errorf("store: dynamodb %s failed", op)
}

// GetSandbox implements Store.
func (d *Dynamo) GetSandbox(ctx context.Context, id string) (Sandbox, error) {
	if id == "" {
		return Sandbox{}, fmt.Errorf("empty sandbox id: %w", ErrInvalid)
	}
	out, err := d.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: &d.Table, Key: key(sandboxPK(id), "state"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Sandbox{}, backend("GetItem", err)
	}
	if len(out.Item) == 0 {
		return Sandbox{SandboxID: id}, nil
	}
	return sandboxFromItem(item(out.Item))
}

// PutSandbox implements Store.
func (d *Dynamo) PutSandbox(ctx context.Context, prev, next Sandbox) (Sandbox, error) {
	if next.SandboxID == "" || next.SandboxID != prev.SandboxID {
		return Sandbox{}, fmt.Errorf("sandbox id: %w", ErrInvalid)
	}
	next.Version = prev.Version + 1
	it := map[string]types.AttributeValue{
		AttrPK: s(sandboxPK(next.SandboxID)), AttrSK: s("state"), AttrKind: s(KindSandbox),
		"sandbox_id": s(next.SandboxID), "version": num(next.Version),
		"created": b(next.Created), "killed": b(next.Killed),
		"last_generation": numU(next.LastGeneration), "last_occurred_at_ms": num(next.LastOccurredAtMs),
		"tokens": numF(next.Tokens), "bucket_at_ms": num(next.BucketAtMs),
	}
	for k, v := range map[string]string{"last_event_id": next.LastEventID, "last_type": string(next.LastType), "image_arn": next.ImageARN, "execution_id": next.ExecutionID} {
		if v != "" {
			it[k] = s(v)
		}
	}
	if next.Open() {
		it[AttrOpen] = s(openValue)
	}
	if next.Killed {
		it[AttrExpiresAt] = d.expires()
	}
	in := &dynamodb.PutItemInput{TableName: &d.Table, Item: it}
	if prev.Version == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	} else {
		in.ConditionExpression = aws.String("version = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(prev.Version)}
	}
	if _, err := d.API.PutItem(ctx, in); err != nil {
		if condFailed(err) {
			return Sandbox{}, ErrConflict
		}
		return Sandbox{}, backend("PutItem", err)
	}
	return next, nil
}

// EventItem is an event's item (without expires_at).
func EventItem(ev events.Event) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{
		AttrPK: s(sandboxPK(ev.SandboxID)), AttrSK: s(events.TableEventSK(ev.EventID)), AttrKind: s(KindEvent),
		"event_id": s(ev.EventID), "sandbox_id": s(ev.SandboxID), "type": s(string(ev.Type)),
		"generation": numU(ev.Generation), "occurred_at_ms": num(ev.OccurredAtMs),
	}
	for k, v := range map[string]string{"kill_reason": string(ev.KillReason), "image_arn": ev.ImageARN, "execution_id": ev.ExecutionID} {
		if v != "" {
			it[k] = s(v)
		}
	}
	return it
}

// PutEvent implements Store.
func (d *Dynamo) PutEvent(ctx context.Context, ev events.Event) error {
	if ev.SandboxID == "" || ev.EventID == "" {
		return fmt.Errorf("event ids: %w", ErrInvalid)
	}
	it := EventItem(ev)
	it[AttrExpiresAt] = d.expires()
	_, err := d.API.PutItem(ctx, &dynamodb.PutItemInput{TableName: &d.Table, Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)")})
	if err != nil {
		if condFailed(err) {
			return ErrDuplicate
		}
		return backend("PutItem", err)
	}
	return nil
}

// HasEvent implements Store.
func (d *Dynamo) HasEvent(ctx context.Context, sandboxID, eventID string) (bool, error) {
	out, err := d.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: &d.Table, Key: key(sandboxPK(sandboxID), events.TableEventSK(eventID)), ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pk")})
	if err != nil {
		return false, backend("GetItem", err)
	}
	return len(out.Item) > 0, nil
}

// ListEvents implements Store: a query of the sandbox's partition, sorted
// by generation.
func (d *Dynamo) ListEvents(ctx context.Context, sandboxID string, limit int) ([]events.Event, error) {
	var out []events.Event
	var start map[string]types.AttributeValue
	for {
		q, err := d.API.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &d.Table,
			KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :ev)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(sandboxPK(sandboxID)), ":ev": s(events.TableEventSKPrefix)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, backend("Query", err)
		}
		for _, it := range q.Items {
			ev, err := EventFromItem(item(it))
			if err != nil {
				return nil, err
			}
			out = append(out, ev)
		}
		if len(q.LastEvaluatedKey) == 0 {
			break
		}
		start = q.LastEvaluatedKey
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Generation < out[j].Generation })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// OpenSandboxes implements Store: a Query of OpenIndex (never a scan);
// the page token is the last sandbox id of the previous page.
func (d *Dynamo) OpenSandboxes(ctx context.Context, pageToken string, limit int) ([]Sandbox, string, error) {
	if limit <= 0 {
		limit = 100
	}
	in := &dynamodb.QueryInput{
		TableName:                 &d.Table,
		IndexName:                 aws.String(OpenIndex),
		KeyConditionExpression:    aws.String("#o = :o"),
		ExpressionAttributeNames:  map[string]string{"#o": AttrOpen},
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": s(openValue)},
		Limit:                     aws.Int32(int32(limit)),
	}
	if pageToken != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{AttrOpen: s(openValue), "sandbox_id": s(pageToken), AttrPK: s(sandboxPK(pageToken)), AttrSK: s("state")}
	}
	q, err := d.API.Query(ctx, in)
	if err != nil {
		return nil, "", backend("Query", err)
	}
	out := make([]Sandbox, 0, len(q.Items))
	for _, it := range q.Items {
		sb, err := sandboxFromItem(item(it))
		if err != nil {
			return nil, "", err
		}
		out = append(out, sb)
	}
	next := ""
	if len(q.LastEvaluatedKey) > 0 && len(out) > 0 {
		next = out[len(out)-1].SandboxID
	}
	return out, next, nil
}

func deliveryKey(eventID, webhookID string) map[string]types.AttributeValue {
	return key("delivery#"+eventID, events.TableWebhookSK(webhookID))
}

// Claim implements Store.
func (d *Dynamo) Claim(ctx context.Context, eventID, webhookID string, now, staleBefore time.Time) error {
	if eventID == "" || webhookID == "" {
		return fmt.Errorf("delivery ids: %w", ErrInvalid)
	}
	it := deliveryKey(eventID, webhookID)
	it[AttrKind] = s(KindDelivery)
	it["event_id"] = s(eventID)
	it["webhook_id"] = s(webhookID)
	it["outcome"] = s(string(Claimed))
	it["updated_at_ms"] = num(now.UnixMilli())
	it[AttrExpiresAt] = d.expires()
	_, err := d.API.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &d.Table, Item: it,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR (outcome = :claimed AND updated_at_ms < :stale)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":claimed": s(string(Claimed)), ":stale": num(staleBefore.UnixMilli())},
	})
	if err != nil {
		if condFailed(err) {
			return ErrDuplicate
		}
		return backend("PutItem", err)
	}
	return nil
}

// Finish implements Store.
func (d *Dynamo) Finish(ctx context.Context, dl Delivery) error {
	_, err := d.API.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &d.Table,
		Key:                      deliveryKey(dl.EventID, dl.WebhookID),
		ConditionExpression:      aws.String("attribute_exists(pk)"),
		UpdateExpression:         aws.String("SET outcome = :o, attempts = :a, #st = :s, reason = :r, updated_at_ms = :u"),
		ExpressionAttributeNames: map[string]string{"#st": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": s(string(dl.Outcome)), ":a": num(dl.Attempts), ":s": num(dl.Status), ":r": s(dl.Reason), ":u": num(dl.UpdatedAt.UnixMilli()),
		},
	})
	if err != nil {
		if condFailed(err) {
			return ErrNotFound
		}
		return backend("UpdateItem", err)
	}
	return nil
}

// GetDelivery implements Store.
func (d *Dynamo) GetDelivery(ctx context.Context, eventID, webhookID string) (Delivery, error) {
	out, err := d.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: &d.Table, Key: deliveryKey(eventID, webhookID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Delivery{}, backend("GetItem", err)
	}
	if len(out.Item) == 0 {
		return Delivery{}, ErrNotFound
	}
	it := item(out.Item)
	dl := Delivery{EventID: it.str("event_id"), WebhookID: it.str("webhook_id"), Outcome: Outcome(it.str("outcome")), Reason: it.str("reason")}
	dl.Attempts = int(it.int("attempts"))
	dl.Status = int(it.int("status"))
	dl.UpdatedAt = time.UnixMilli(it.int("updated_at_ms")).UTC()
	return dl, it.err
}

// PutWebhook implements Store.
func (d *Dynamo) PutWebhook(ctx context.Context, w Webhook) error {
	if err := checkWebhook(w); err != nil {
		return err
	}
	it := key(webhooksPK, events.TableWebhookSK(w.WebhookID))
	it[AttrKind] = s(KindWebhook)
	it["webhook_id"] = s(w.WebhookID)
	it["url"] = s(w.URL)
	it["secret_ref"] = s(w.SecretRef)
	it["created_at_ms"] = num(w.CreatedAt.UnixMilli())
	if len(w.Types) > 0 {
		ss := make([]string, len(w.Types))
		for i, t := range w.Types {
			ss[i] = string(t)
		}
		it["types"] = &types.AttributeValueMemberSS{Value: ss}
	}
	if _, err := d.API.PutItem(ctx, &dynamodb.PutItemInput{TableName: &d.Table, Item: it}); err != nil {
		return backend("PutItem", err)
	}
	return nil
}

// ListWebhooks implements Store.
func (d *Dynamo) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var out []Webhook
	var start map[string]types.AttributeValue
	for {
		q, err := d.API.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &d.Table,
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(webhooksPK)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, backend("Query", err)
		}
		for _, raw := range q.Items {
			it := item(raw)
			w := Webhook{WebhookID: it.str("webhook_id"), URL: it.str("url"), SecretRef: it.str("secret_ref"), CreatedAt: time.UnixMilli(it.int("created_at_ms")).UTC()}
			if ss, ok := raw["types"].(*types.AttributeValueMemberSS); ok {
				sorted := append([]string(nil), ss.Value...)
				sort.Strings(sorted)
				for _, t := range sorted {
					w.Types = append(w.Types, events.Type(t))
				}
			}
			if it.err != nil {
				return nil, it.err
			}
			out = append(out, w)
		}
		if len(q.LastEvaluatedKey) == 0 {
			break
		}
		start = q.LastEvaluatedKey
	}
	sort.Slice(out, func(i, j int) bool { return out[i].WebhookID < out[j].WebhookID })
	return out, nil
}

// DeleteWebhook implements Store.
func (d *Dynamo) DeleteWebhook(ctx context.Context, id string) error {
	_, err := d.API.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &d.Table, Key: key(webhooksPK, events.TableWebhookSK(id)), ConditionExpression: aws.String("attribute_exists(pk)")})
	if err != nil {
		if condFailed(err) {
			return ErrNotFound
		}
		return backend("DeleteItem", err)
	}
	return nil
}

// item reads attributes, remembering the first shape error.
type itemReader struct {
	m   map[string]types.AttributeValue
	err error
}

func item(m map[string]types.AttributeValue) *itemReader { return &itemReader{m: m} }

var errShape = fmt.Errorf("store: item of an unexpected shape: %w", ErrInvalid)

func (r *itemReader) str(k string) string {
	v, ok := r.m[k]
	if !ok {
		return ""
	}
	sv, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		r.err = errShape
		return ""
	}
	return sv.Value
}

func (r *itemReader) numStr(k string) string {
	v, ok := r.m[k]
	if !ok {
		return "0"
	}
	nv, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		r.err = errShape
		return "0"
	}
	return nv.Value
}

func (r *itemReader) int(k string) int64 {
	n, err := strconv.ParseInt(r.numStr(k), 10, 64)
	if err != nil {
		r.err = errShape
	}
	return n
}

func (r *itemReader) uint(k string) uint64 {
	n, err := strconv.ParseUint(r.numStr(k), 10, 64)
	if err != nil {
		r.err = errShape
	}
	return n
}

func (r *itemReader) float(k string) float64 {
	n, err := strconv.ParseFloat(r.numStr(k), 64)
	if err != nil {
		r.err = errShape
	}
	return n
}

func (r *itemReader) bool(k string) bool {
	v, ok := r.m[k]
	if !ok {
		return false
	}
	bv, ok := v.(*types.AttributeValueMemberBOOL)
	if !ok {
		r.err = errShape
		return false
	}
	return bv.Value
}

func sandboxFromItem(r *itemReader) (Sandbox, error) {
	sb := Sandbox{
		SandboxID: r.str("sandbox_id"), Version: r.int("version"), Created: r.bool("created"), Killed: r.bool("killed"),
		LastEventID: r.str("last_event_id"), LastType: events.Type(r.str("last_type")), LastGeneration: r.uint("last_generation"),
		LastOccurredAtMs: r.int("last_occurred_at_ms"), ImageARN: r.str("image_arn"), ExecutionID: r.str("execution_id"),
		Tokens: r.float("tokens"), BucketAtMs: r.int("bucket_at_ms"),
	}
	return sb, r.err
}

// EventFromItem reads an event item.
func EventFromItem(r *itemReader) (events.Event, error) {
	if k := r.str(AttrKind); k != KindEvent {
		return events.Event{}, errShape
	}
	ev := events.Event{
		EventID: r.str("event_id"), SandboxID: r.str("sandbox_id"), Type: events.Type(r.str("type")),
		KillReason: events.KillReason(r.str("kill_reason")), Generation: r.uint("generation"),
		OccurredAtMs: r.int("occurred_at_ms"), ImageARN: r.str("image_arn"), ExecutionID: r.str("execution_id"),
	}
	if r.err == nil && (ev.EventID == "" || ev.SandboxID == "" || !strings.HasPrefix(r.str(AttrSK), events.TableEventSKPrefix)) {
		return events.Event{}, errShape
	}
	return ev, r.err
}
