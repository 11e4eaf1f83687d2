package main

import (
	"fmt"
	"testing"
)

func TestParseFlagsGenerateToggle(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{args: nil, want: true},
		{args: []string{"--generate-validating-admission-policy=false"}, want: false},
		{args: []string{"--generateValidatingAdmissionPolicy=false"}, want: false},
		{args: []string{"--generateValidatingAdmissionPolicy=false", "--generate-validating-admission-policy=true"}, want: true},
	}
	for _, tt := range tests {
		o, err := parseFlags(tt.args)
		if err != nil {
			t.Fatalf("parseFlags(%q): %v", tt.args, err)
		}
		if o.generateVAP != tt.want {
			t.Errorf("parseFlags(%q).generateVAP = %v, want %v", tt.args, o.generateVAP, tt.want)
		}
	}
}

func TestParseFlagsRejectsUnknown(t *testing.T) {
	if _, err := parseFlags([]string{"--no-such-flag"}); err == nil {
		t.Fatal("parseFlags accepted an unknown flag")
	}
}

func TestKyvernoConfigFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr bool
	}{
		{args: nil, want: "{Kyverno:kyverno/kyverno Own:/ Disabled:false}"},
		{args: []string{"--webhook-namespace=kyvap-system"}, want: "{Kyverno:kyverno/kyverno Own:kyvap-system/kyvap-kyverno-config Disabled:false}"},
		{args: []string{"--kyverno-config=security/kyverno-cfg", "--kyverno-config-fallback=ops/filters"}, want: "{Kyverno:security/kyverno-cfg Own:ops/filters Disabled:false}"},
		{args: []string{"--kyverno-config=none"}, want: "{Kyverno:/ Own:/ Disabled:true}"},
		{args: []string{"--kyverno-config=kyverno"}, wantErr: true},
		{args: []string{"--kyverno-config=a/b/c"}, wantErr: true},
		{args: []string{"--kyverno-config-fallback=/x"}, wantErr: true},
	} {
		o, err := parseFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		got, err := o.kyvernoConfigOptions()
		if (err != nil) != tc.wantErr {
			t.Errorf("%v: error %v, want error %v", tc.args, err, tc.wantErr)
			continue
		}
		if err == nil && fmt.Sprintf("%+v", got) != tc.want {
			t.Errorf("%v: got %+v, want %s", tc.args, got, tc.want)
		}
	}
}
