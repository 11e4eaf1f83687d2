package main

import "testing"

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
