// Package cfntest writes CloudFormation's query-protocol answers (XML) for
// the fake CloudFormation endpoints of the CLI's tests (rayito stack,
// rayito agent --target agentcore): one copy of the wire format.
package cfntest

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
)

// Namespace is CloudFormation's XML namespace.
const Namespace = "http://cloudformation.amazonaws.com/doc/2010-05-15/"

// Reply writes action's successful answer holding result (XML already
// escaped).
func Reply(w http.ResponseWriter, action, result string) {
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<%sResponse xmlns="%s"><%sResult>%s</%sResult><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></%sResponse>`,
		action, Namespace, action, result, action, action)
}

// Error writes a 400 Sender error with code and message.
func Error(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, `<ErrorResponse xmlns="%s"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>r-1</RequestId></ErrorResponse>`,
		Namespace, Esc(code), Esc(msg))
}

// Esc escapes s for XML text.
func Esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
