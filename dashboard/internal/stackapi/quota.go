package stackapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// MetricsNamespace is the only CloudWatch namespace the quota alert
// writes (the template's condition holds its role to it).
const MetricsNamespace = "Rayito/Dashboard"

// PutMetricAPI is the CloudWatch call of the quota alert.
type PutMetricAPI interface {
	PutMetricData(ctx context.Context, in *cloudwatch.PutMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error)
}

// PublishAPI is the SNS call of the quota alert.
type PublishAPI interface {
	Publish(ctx context.Context, in *sns.PublishInput, opts ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// QuotaStateAPI reads and writes the alert's one state row.
type QuotaStateAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// QuotaAlert is the scheduled check: when the microVMs in use reach
// Percent of Limit it publishes one message to the topic (counts, the
// region and the threshold; never an id or a name), then not again for
// Quiet unless the use drops under the threshold first. An SNS failure is
// not recorded as sent.
type QuotaAlert struct {
	Lister   Lister
	State    QuotaStateAPI
	Table    string
	SNS      PublishAPI
	TopicArn string
	Region   string
	Limit    int
	Percent  int
	Quiet    time.Duration // default 6 h
	// Metrics, when set, receives MicrovmsInUse and QuotaUsedPercent in
	// MetricsNamespace each run (counts only); a failure does not stop the
	// alert and is reported in the summary.
	Metrics PutMetricAPI
	Now     func() time.Time
}

// QuotaSummary is the run's result (counts only).
type QuotaSummary struct {
	InUse     int  `json:"inUse"`
	Threshold int  `json:"threshold"`
	Sent      bool `json:"sent"`
	MetricErr bool `json:"metricError,omitempty"`
}

const quotaRow = "quota-alert"

// Run checks once.
func (q *QuotaAlert) Run(ctx context.Context) (QuotaSummary, error) {
	now := time.Now
	if q.Now != nil {
		now = q.Now
	}
	quiet := q.Quiet
	if quiet <= 0 {
		quiet = 6 * time.Hour
	}
	n := 0
	in := microvms.ListInput{MaxResults: microvmsapi.MaxListResults}
	for range 200 {
		page, err := q.Lister.ListMicrovms(ctx, in)
		if err != nil {
			return QuotaSummary{}, errors.New("quota: listing failed")
		}
		for _, m := range page.Items {
			if m.State != microvmsapi.StateTerminated && m.State != microvmsapi.StateTerminating {
				n++
			}
		}
		if page.NextToken == "" {
			break
		}
		in.NextToken = page.NextToken
	}
	threshold := (q.Limit*q.Percent + 99) / 100
	s := QuotaSummary{InUse: n, Threshold: threshold}
	if q.Metrics != nil {
		_, err := q.Metrics.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{
			Namespace: aws.String(MetricsNamespace),
			MetricData: []cwtypes.MetricDatum{
				{MetricName: aws.String("MicrovmsInUse"), Unit: cwtypes.StandardUnitCount, Value: aws.Float64(float64(n)), Timestamp: aws.Time(now())},
				{MetricName: aws.String("QuotaUsedPercent"), Unit: cwtypes.StandardUnitPercent, Value: aws.Float64(float64(n) * 100 / float64(q.Limit)), Timestamp: aws.Time(now())},
			},
		})
		s.MetricErr = err != nil
	}
	key := map[string]types.AttributeValue{StateKey: &types.AttributeValueMemberS{Value: quotaRow}}
	got, err := q.State.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(q.Table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return s, errors.New("quota: state unreadable")
	}
	var last int64
	if v, ok := got.Item["last_sent"].(*types.AttributeValueMemberN); ok {
		last, _ = strconv.ParseInt(v.Value, 10, 64)
	}
	put := func(sent int64) error {
		item := map[string]types.AttributeValue{StateKey: key[StateKey], "last_sent": num(sent)}
		_, err := q.State.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(q.Table), Item: item})
		return err
	}
	if n < threshold {
		if last != 0 {
			if err := put(0); err != nil {
				return s, errors.New("quota: state not written")
			}
		}
		return s, nil
	}
	if last != 0 && now().Sub(time.Unix(last, 0)) < quiet {
		return s, nil
	}
	msg := fmt.Sprintf("Rayito: %d of %d MicroVMs in use in %s (%d%%), at or over the alert threshold of %d%%.", n, q.Limit, q.Region, n*100/q.Limit, q.Percent)
	if _, err := q.SNS.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(q.TopicArn), Subject: aws.String("Rayito MicroVM quota alert"), Message: aws.String(msg)}); err != nil {
		return s, errors.New("quota: publish failed")
	}
	s.Sent = true
	if err := put(now().Unix()); err != nil {
		return s, errors.New("quota: sent, state not written")
	}
	return s, nil
}
