package infra_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// metadata-index.yaml (security model T19, docs/index.md): the table and its
// two managed policies, held to an exact table. The writer may only PutItem
// rows made of the SDK's attributes, the reader only BatchGetItem, both on
// the index table alone; nothing is attached by the template.
// ---------------------------------------------------------------------------

const (
	miTemplate = "metadata-index.yaml"
	miTable    = "GetAtt:IndexTable.Arn"
	miWriter   = "RayitoIndexWriter/PolicyDocument"
	miReader   = "RayitoIndexReader/PolicyDocument"
)

var miResources = map[string]string{
	"IndexTable":        "AWS::DynamoDB::Table",
	"RayitoIndexWriter": "AWS::IAM::ManagedPolicy",
	"RayitoIndexReader": "AWS::IAM::ManagedPolicy",
}

// miAttributes are the attributes the SDK writes (sdk/index.go): never a
// token, its hash, envs, secrets or the payload.
var miAttributes = []string{"pk", "image_arn", "image_version", "started_at", "metadata", "sdk_version", "expires_at"}

var miExpected = map[string][]stmt{
	miWriter: {{Sid: "PutIndexRows", Actions: []string{"dynamodb:PutItem"}, Resources: []string{miTable},
		Condition: []string{"ForAllValues:StringEquals dynamodb:Attributes=" + strings.Join(sortedUnique(miAttributes), ",")}}},
	miReader: {{Sid: "ReadIndexRows", Actions: []string{"dynamodb:BatchGetItem"}, Resources: []string{miTable}}},
}

func miDocuments(tpl map[string]any) (map[string][]stmt, problems) {
	return roleDocuments(tpl, miResources, func(name, typ string, props map[string]any, add func(string, any), p *problems) {
		if typ != "AWS::IAM::ManagedPolicy" {
			return
		}
		for _, k := range []string{"Roles", "Users", "Groups"} {
			if _, ok := props[k]; ok {
				p.addf("resource %s: attached by the template (%s); callers attach it", name, k)
			}
		}
		add(name+"/PolicyDocument", props["PolicyDocument"])
	})
}

// miCheckTable: the key, billing, TTL, encryption and backups the docs
// promise.
func miCheckTable(tpl map[string]any) problems {
	var p problems
	r := section(section(tpl, "Resources"), "IndexTable")
	props, _ := r["Properties"].(map[string]any)
	want := map[string]string{
		"BillingMode":                      "PAY_PER_REQUEST",
		"AttributeDefinitions":             "[map[AttributeName:pk AttributeType:S]]",
		"KeySchema":                        "[map[AttributeName:pk KeyType:HASH]]",
		"TimeToLiveSpecification":          "map[AttributeName:expires_at Enabled:true]",
		"SSESpecification":                 "map[SSEEnabled:true]",
		"PointInTimeRecoverySpecification": "map[PointInTimeRecoveryEnabled:true]",
		"TableName":                        "map[Ref:TableName]",
	}
	for k, v := range want {
		if got := fmt.Sprint(props[k]); got != v {
			p.addf("IndexTable: %s is %s, want %s", k, got, v)
		}
	}
	for _, k := range []string{"GlobalSecondaryIndexes", "LocalSecondaryIndexes", "StreamSpecification", "ResourcePolicy", "KinesisStreamSpecification"} {
		if _, ok := props[k]; ok {
			p.addf("IndexTable: unexpected %s (another way to read or copy the rows)", k)
		}
	}
	if r["DeletionPolicy"] != "Delete" {
		p.addf("IndexTable: DeletionPolicy %v, want Delete (deleting the stack deletes the copy)", r["DeletionPolicy"])
	}
	outs := section(tpl, "Outputs")
	for _, o := range []string{"TableName", "TableArn", "WriterPolicyArn", "ReaderPolicyArn"} {
		if _, ok := outs[o]; !ok {
			p.addf("output %s missing", o)
		}
	}
	return p
}

func miCheckAll(tpl map[string]any) problems {
	docs, p := miDocuments(tpl)
	p = append(p, checkExact(docs, miExpected)...)
	p = append(p, checkReferences(tpl)...)
	p = append(p, miCheckTable(tpl)...)
	// The split itself, stated on its own: the writer never reads, the
	// reader never writes.
	for _, s := range docs[miWriter] {
		if !slices.Equal(s.Actions, []string{"dynamodb:PutItem"}) {
			p.addf("the writer policy gets %v (PutItem only)", s.Actions)
		}
	}
	for _, s := range docs[miReader] {
		if !slices.Equal(s.Actions, []string{"dynamodb:BatchGetItem"}) {
			p.addf("the reader policy gets %v (BatchGetItem only)", s.Actions)
		}
	}
	return p
}

func TestMetadataIndexTemplate(t *testing.T) {
	for _, msg := range miCheckAll(loadTemplateFile(t, miTemplate)) {
		t.Error(msg)
	}
}

// TestMetadataIndexCheckerCatches: each widening is reported.
func TestMetadataIndexCheckerCatches(t *testing.T) {
	sub := func(s string) map[string]any { return map[string]any{"Fn::Sub": s} }
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, tpl map[string]any)
		want   string
	}{
		{"writer reads", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, miWriter, "PutIndexRows"), "Action", "dynamodb:GetItem")
		}, "the writer policy gets"},
		{"writer deletes", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, miWriter, "PutIndexRows"), "Action", "dynamodb:DeleteItem")
		}, miWriter + " statement \"PutIndexRows\""},
		{"writer adds attributes", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, miWriter, "PutIndexRows"), "Condition")
		}, miWriter + " statement \"PutIndexRows\""},
		{"writer writes a token attribute", func(t *testing.T, tpl map[string]any) {
			c := findStmt(t, tpl, miWriter, "PutIndexRows")["Condition"].(map[string]any)["ForAllValues:StringEquals"].(map[string]any)
			addToList(c, "dynamodb:Attributes", "token_sha256")
		}, miWriter + " statement \"PutIndexRows\""},
		{"reader scans", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, miReader, "ReadIndexRows"), "Action", "dynamodb:Scan")
		}, "the reader policy gets"},
		{"reader on every table", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, miReader, "ReadIndexRows")["Resource"] = sub("arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/*")
		}, miReader + " statement \"ReadIndexRows\""},
		{"new statement", func(t *testing.T, tpl map[string]any) {
			doc := section(section(tpl, "Resources"), "RayitoIndexReader")["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)
			doc["Statement"] = append(doc["Statement"].([]any), map[string]any{"Sid": "More", "Effect": "Allow", "Action": "dynamodb:Query", "Resource": map[string]any{"Fn::GetAtt": []any{"IndexTable", "Arn"}}})
		}, "unexpected statement \"More\""},
		{"attached", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Resources"), "RayitoIndexWriter")["Properties"].(map[string]any)["Roles"] = []any{"x"}
		}, "attached by the template"},
		{"no TTL", func(t *testing.T, tpl map[string]any) {
			delete(section(section(tpl, "Resources"), "IndexTable")["Properties"].(map[string]any), "TimeToLiveSpecification")
		}, "TimeToLiveSpecification"},
		{"no encryption", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Resources"), "IndexTable")["Properties"].(map[string]any)["SSESpecification"] = map[string]any{"SSEEnabled": "false"}
		}, "SSESpecification"},
		{"a stream copies the rows", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Resources"), "IndexTable")["Properties"].(map[string]any)["StreamSpecification"] = map[string]any{"StreamViewType": "NEW_IMAGE"}
		}, "unexpected StreamSpecification"},
		{"another resource", func(t *testing.T, tpl map[string]any) {
			section(tpl, "Resources")["Extra"] = map[string]any{"Type": "AWS::IAM::Policy", "Properties": map[string]any{}}
		}, "resource Extra: unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl := loadTemplateFile(t, miTemplate)
			tc.mutate(t, tpl)
			p := miCheckAll(tpl)
			for _, s := range p {
				if strings.Contains(s, tc.want) {
					return
				}
			}
			t.Errorf("checker did not report %q; it reported %d problems: %v", tc.want, len(p), p)
		})
	}
}
