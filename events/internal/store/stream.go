package store

import (
	"strconv"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/rayito-dev/rayito/proto/events"
)

// EventFromStream reads a DynamoDB stream record's new image as an event
// item. ok is false for any other item (a sandbox state, a delivery
// claim, a webhook) or an image of the wrong shape; it never panics on
// attributes of an unexpected type.
func EventFromStream(img map[string]lambdaevents.DynamoDBAttributeValue) (ev events.Event, ok bool) {
	str := func(k string) (string, bool) {
		v, present := img[k]
		if !present {
			return "", true
		}
		if v.DataType() != lambdaevents.DataTypeString {
			return "", false
		}
		return v.String(), true
	}
	n := func(k string) (string, bool) {
		v, present := img[k]
		if !present || v.DataType() != lambdaevents.DataTypeNumber {
			return "", false
		}
		return v.Number(), true
	}
	kind, ok1 := str(AttrKind)
	if !ok1 || kind != KindEvent {
		return events.Event{}, false
	}
	fields := map[string]*string{"event_id": &ev.EventID, "sandbox_id": &ev.SandboxID, "image_arn": &ev.ImageARN, "execution_id": &ev.ExecutionID}
	for k, dst := range fields {
		v, ok := str(k)
		if !ok {
			return events.Event{}, false
		}
		*dst = v
	}
	t, ok2 := str("type")
	kr, ok3 := str("kill_reason")
	gen, ok4 := n("generation")
	at, ok5 := n("occurred_at_ms")
	if !ok2 || !ok3 || !ok4 || !ok5 {
		return events.Event{}, false
	}
	ev.Type, ev.KillReason = events.Type(t), events.KillReason(kr)
	var err error
	if ev.Generation, err = strconv.ParseUint(gen, 10, 64); err != nil {
		return events.Event{}, false
	}
	if ev.OccurredAtMs, err = strconv.ParseInt(at, 10, 64); err != nil {
		return events.Event{}, false
	}
	if ev.Validate() != nil {
		return events.Event{}, false
	}
	return ev, true
}
