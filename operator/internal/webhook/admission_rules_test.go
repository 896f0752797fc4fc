package webhook

import (
	"testing"

	. "github.com/onsi/gomega"

	conflux "conflux.dev/operator/api/v1alpha1"
)

func TestValidatePipeWriters(t *testing.T) {
	c := func(name string, outputs ...string) conflux.Component {
		return conflux.Component{Name: name, Outputs: outputs}
	}
	pipes := map[string]bool{"p": true, "q": true}
	tests := []struct {
		name  string
		comps []conflux.Component
		want  []string
	}{
		{"one writer per pipe", []conflux.Component{c("a", "p"), c("b", "q", "e"), c("c", "e")}, nil},
		{"two writers on an event channel or a channel not created yet", []conflux.Component{c("a", "e", "x"), c("b", "e", "x")}, nil},
		{"two writers", []conflux.Component{c("a", "e"), c("b", "p"), c("c", "p")},
			[]string{`spec.components[1].outputs: Invalid value: "p": pipe p has one writer, but components b, c all write it`}},
		{"two pipes, sorted", []conflux.Component{c("a", "q", "p"), c("b", "p", "q"), c("c", "q")},
			[]string{"pipe p has one writer, but components a, b all write it", "pipe q has one writer, but components a, b, c all write it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := ValidatePipeWriters(&conflux.WorkflowSpec{Components: tt.comps}, pipes)
			g.Expect(errs).To(HaveLen(len(tt.want)), "%v", errs)
			for i, w := range tt.want {
				g.Expect(errs[i].Error()).To(ContainSubstring(w))
			}
		})
	}
}

func TestValidateNodeSelectorValues(t *testing.T) {
	g := NewWithT(t)
	long := make([]byte, 64)
	for i := range long {
		long[i] = 'a'
	}
	g.Expect(ValidateNodeSelectorValues(map[string]string{"a": "", "b": "Y_1.z", "c": string(long[:63])})).To(BeEmpty())
	errs := ValidateNodeSelectorValues(map[string]string{"z": "-x", "a": string(long), "ok": "v"})
	g.Expect(errs).To(HaveLen(2), "%v", errs)
	g.Expect(errs[0].Error()).To(ContainSubstring("spec.nodeSelector[a]"))
	g.Expect(errs[0].Error()).To(ContainSubstring("must be no more than 63 characters"))
	g.Expect(errs[1].Error()).To(ContainSubstring(`spec.nodeSelector[z]: Invalid value: "-x": nodeSelector values must be label values`))
}
