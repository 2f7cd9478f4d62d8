package stack

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// section returns the keys declared two spaces deep under the top-level
// key name of the template, in order.
func section(t *testing.T, name string) []string {
	t.Helper()
	var keys []string
	in := false
	for line := range strings.Lines(string(Template)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == name+":":
			in = true
		case line != "" && line[0] != ' ' && line[0] != '#':
			in = false
		case in && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.HasSuffix(line, ":"):
			keys = append(keys, strings.TrimSuffix(strings.TrimSpace(line), ":"))
		}
	}
	if len(keys) == 0 {
		t.Fatalf("no %s in the template", name)
	}
	return keys
}

// The constants name exactly what the template declares.
func TestConstantsMatchTemplate(t *testing.T) {
	params := []string{ParamImageLogGroupName, ParamCodeBucket, ParamCodePrefix, ParamReconcileMinutes, ParamLogRetentionDays}
	if got := section(t, "Parameters"); !slices.Equal(got, params) {
		t.Errorf("parameters %v, want %v", got, params)
	}
	if got := section(t, "Outputs"); !slices.Equal(got, Outputs) {
		t.Errorf("outputs %v, want %v", got, Outputs)
	}
	res := section(t, "Resources")
	for _, r := range []string{ResourceStackKeySecret, ResourceEventsTable} {
		if !slices.Contains(res, r) {
			t.Errorf("no resource %s", r)
		}
	}
	tpl := string(Template)
	for _, fn := range Functions {
		key := fmt.Sprintf(`S3Key: !Sub "%s"`, ZipKey("${"+ParamCodePrefix+"}", fn))
		if strings.Count(tpl, key) != 1 {
			t.Errorf("the template does not read %s once", key)
		}
	}
	for _, want := range []string{
		fmt.Sprintf("MinValue: %d", ReconcileMinutesMin),
		fmt.Sprintf("MaxValue: %d", ReconcileMinutesMax),
		fmt.Sprintf("Default: %d", ReconcileMinutesDefault),
		fmt.Sprintf("Default: %d", LogRetentionDaysDefault),
		"AllowedValues: [" + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(LogRetentionDays)), ", "), "[]") + "]",
		`Name: !Sub "` + StackKeySecretName("${AWS::StackName}") + `"`,
		"Runtime: provided.al2023",
		"Description: >-\n  " + DescriptionPrefix,
		"Handler: " + ZipEntry,
	} {
		if !strings.Contains(tpl, want) {
			t.Errorf("the template lacks %q", want)
		}
	}
	// CAPABILITY_IAM is enough only while no IAM resource has a custom
	// name (CAPABILITY_NAMED_IAM) and there is no macro
	// (CAPABILITY_AUTO_EXPAND).
	for _, named := range []string{"RoleName:", "ManagedPolicyName:", "UserName:", "GroupName:", "InstanceProfileName:", "Transform:"} {
		if regexp.MustCompile(`(?m)^\s*(- )?` + named).MatchString(tpl) {
			t.Errorf("the template has %s: Capabilities must change", named)
		}
	}
	if !slices.Equal(Capabilities, []string{"CAPABILITY_IAM"}) {
		t.Errorf("Capabilities %v", Capabilities)
	}
}
