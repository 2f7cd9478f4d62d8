package store

import (
	"encoding/json"
	"testing"

	lambdaevents "github.com/aws/aws-lambda-go/events"
)

// FuzzEventFromStream: any stream image (as the stream's JSON carries it)
// is read without a panic, and what is accepted is a valid event.
func FuzzEventFromStream(f *testing.F) {
	f.Add(`{"kind":{"S":"event"},"event_id":{"S":"0000000000000000000000000000002a"},"sandbox_id":{"S":"s"},"type":{"S":"created"},"generation":{"N":"1"},"occurred_at_ms":{"N":"5"}}`)
	f.Add(`{"kind":{"N":"1"},"generation":{"S":"x"}}`)
	f.Add(`{"kind":{"S":"event"},"event_id":{"L":[]},"generation":{"N":"1e99"}}`)
	f.Fuzz(func(t *testing.T, js string) {
		var img map[string]lambdaevents.DynamoDBAttributeValue
		if json.Unmarshal([]byte(js), &img) != nil {
			return
		}
		ev, ok := EventFromStream(img)
		if ok && ev.Validate() != nil {
			t.Fatalf("accepted an invalid event %+v", ev)
		}
	})
}
