package stackapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	ce "github.com/aws/aws-sdk-go-v2/service/costexplorer"
	cetypes "github.com/aws/aws-sdk-go-v2/service/costexplorer/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Cost limits.
const (
	CostMonths      = 13 // whole months, the current one included
	DailyCostBudget = 20 // paid queries per UTC day, stack-wide
	CostCacheTTL    = 24 * time.Hour
	StateKey        = "id" // the state table's key (a string)
)

// KnownRegions are the regions a cost query may name.
var KnownRegions = map[string]bool{
	"us-east-1": true, "us-east-2": true, "us-west-1": true, "us-west-2": true,
	"ca-central-1": true, "sa-east-1": true, "eu-west-1": true, "eu-west-2": true, "eu-west-3": true,
	"eu-central-1": true, "eu-central-2": true, "eu-north-1": true, "eu-south-1": true, "eu-south-2": true,
	"ap-northeast-1": true, "ap-northeast-2": true, "ap-northeast-3": true, "ap-southeast-1": true,
	"ap-southeast-2": true, "ap-south-1": true, "me-central-1": true, "af-south-1": true,
}

// StateAPI is what the cost route does on the state table.
type StateAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// CostAPI is the Cost Explorer call.
type CostAPI interface {
	GetCostAndUsage(ctx context.Context, in *ce.GetCostAndUsageInput, opts ...func(*ce.Options)) (*ce.GetCostAndUsageOutput, error)
}

// Cost serves billed cost: cache, budget, Cost Explorer.
type Cost struct {
	State CostStateTable
	CE    CostAPI
}

// CostStateTable names the state table and its client.
type CostStateTable struct {
	API   StateAPI
	Table string
}

// ErrWindow, ErrRegion and ErrBudget are the cost refusals.
var (
	ErrWindow = errors.New("stackapi: the window must be whole months within the last 13")
	ErrRegion = errors.New("stackapi: unknown region")
	ErrBudget = errors.New("stackapi: the daily budget of cost queries is spent or unreadable")
)

// Window is a validated cost window: [Start, End) in whole months.
type Window struct {
	From, To   string // YYYY-MM, inclusive
	Start, End time.Time
}

// ParseWindow checks from and to (YYYY-MM, from <= to) against now: the
// first month at most 12 before the current one, the last not after it.
// End is the first day after To, or tomorrow for the current month.
func ParseWindow(from, to string, now time.Time) (Window, error) {
	now = now.UTC()
	parse := func(s string) (time.Time, bool) {
		if len(s) != 7 {
			return time.Time{}, false
		}
		t, err := time.Parse("2006-01", s)
		return t, err == nil && t.Format("2006-01") == s
	}
	f, ok1 := parse(from)
	t, ok2 := parse(to)
	if !ok1 || !ok2 || t.Before(f) {
		return Window{}, ErrWindow
	}
	cur := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if f.Before(cur.AddDate(0, -(CostMonths-1), 0)) || t.After(cur) {
		return Window{}, ErrWindow
	}
	end := t.AddDate(0, 1, 0)
	if tomorrow := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC); end.After(tomorrow) {
		end = tomorrow
	}
	return Window{From: from, To: to, Start: f, End: end}, nil
}

// Spend takes one query from today's budget with a conditional counter;
// any failure (spent, throttled, unreadable) is ErrBudget.
func (s CostStateTable) Spend(ctx context.Context, now time.Time) error {
	day := now.UTC().Format("2006-01-02")
	_, err := s.API.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.Table),
		Key:                       map[string]types.AttributeValue{StateKey: &types.AttributeValueMemberS{Value: "cost-budget#" + day}},
		UpdateExpression:          aws.String("ADD #n :one SET #exp = :exp"),
		ConditionExpression:       aws.String("attribute_not_exists(#n) OR #n < :max"),
		ExpressionAttributeNames:  map[string]string{"#n": "n", "#exp": "expires_at"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1), ":max": num(DailyCostBudget), ":exp": num(now.Add(48 * time.Hour).Unix())},
	})
	if err != nil {
		return ErrBudget
	}
	return nil
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

type costMonth struct {
	Month  string `json:"month"`
	Amount string `json:"amount"`
	Unit   string `json:"unit"`
}

func (h *Handler) cost(ctx context.Context, q map[string]string) events.LambdaFunctionURLResponse {
	if !h.Config.EnableCostExplorer || h.Cost == nil {
		return h.fail(http.StatusForbidden, "cost_disabled")
	}
	for k := range q {
		if k != "from" && k != "to" && k != "region" {
			return h.fail(http.StatusBadRequest, "invalid_request")
		}
	}
	now := h.now()
	w, err := ParseWindow(q["from"], q["to"], now)
	if err != nil {
		return h.fail(http.StatusBadRequest, "invalid_window")
	}
	region := q["region"]
	if !KnownRegions[region] {
		return h.fail(http.StatusBadRequest, "invalid_region")
	}
	st := h.Cost.State
	cacheKey := map[string]types.AttributeValue{StateKey: &types.AttributeValueMemberS{Value: "cost-cache#" + w.From + "#" + w.To + "#" + region}}
	if got, err := st.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(st.Table), Key: cacheKey, ConsistentRead: aws.Bool(true)}); err == nil && got.Item != nil {
		body, _ := got.Item["body"].(*types.AttributeValueMemberS)
		exp, _ := got.Item["expires_at"].(*types.AttributeValueMemberN)
		if body != nil && exp != nil {
			if e, err := strconv.ParseInt(exp.Value, 10, 64); err == nil && now.Unix() < e && json.Valid([]byte(body.Value)) {
				return answer(http.StatusOK, "application/json", body.Value)
			}
		}
	}
	if err := st.Spend(ctx, now); err != nil {
		return h.fail(http.StatusTooManyRequests, "budget_exhausted")
	}
	out, err := h.Cost.CE.GetCostAndUsage(ctx, &ce.GetCostAndUsageInput{
		TimePeriod:  &cetypes.DateInterval{Start: aws.String(w.Start.Format(time.DateOnly)), End: aws.String(w.End.Format(time.DateOnly))},
		Granularity: cetypes.GranularityMonthly,
		Metrics:     []string{"UnblendedCost"},
		Filter:      &cetypes.Expression{Dimensions: &cetypes.DimensionValues{Key: cetypes.DimensionRegion, Values: []string{region}}},
	})
	if err != nil {
		return h.upstream(err)
	}
	months := []costMonth{}
	for _, r := range out.ResultsByTime {
		m := costMonth{}
		if r.TimePeriod != nil && len(aws.ToString(r.TimePeriod.Start)) >= 7 {
			m.Month = aws.ToString(r.TimePeriod.Start)[:7]
		}
		if v, ok := r.Total["UnblendedCost"]; ok {
			m.Amount, m.Unit = aws.ToString(v.Amount), aws.ToString(v.Unit)
		}
		months = append(months, m)
	}
	b, err := json.Marshal(map[string]any{"from": w.From, "to": w.To, "region": region, "metric": "UnblendedCost", "months": months, "asOf": now.UTC().Format(time.RFC3339)})
	if err != nil {
		return h.fail(http.StatusInternalServerError, "upstream_error")
	}
	item := map[string]types.AttributeValue{"body": &types.AttributeValueMemberS{Value: string(b)}, "expires_at": num(now.Add(CostCacheTTL).Unix())}
	for k, v := range cacheKey {
		item[k] = v
	}
	st.API.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(st.Table), Item: item}) // a failed cache write only costs a query later
	return answer(http.StatusOK, "application/json", string(b))
}
