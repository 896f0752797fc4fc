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

func TestValidateWorkloadNames(t *testing.T) {
	g := NewWithT(t)
	wf := "workflow-with-a-name-of-forty-characters" // 40
	g.Expect(wf).To(HaveLen(40))
	comps := func(names ...string) *conflux.WorkflowSpec {
		s := &conflux.WorkflowSpec{}
		for _, n := range names {
			s.Components = append(s.Components, conflux.Component{Name: n})
		}
		return s
	}
	fits, long := "c234567890123456789012", "c2345678901234567890123" // 63 and 64 with the workflow
	g.Expect(ValidateWorkloadNames(wf, comps(fits), nil)).To(BeEmpty())
	errs := ValidateWorkloadNames(wf, comps(fits, long), nil)
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Error()).To(ContainSubstring("spec.components[1].name"))
	g.Expect(errs[0].Error()).To(ContainSubstring("is 64 characters, at most 63"))
	// an update keeps a component that existed before, refuses a new one
	g.Expect(ValidateWorkloadNames(wf, comps(long, fits), comps(long))).To(BeEmpty())
	g.Expect(ValidateWorkloadNames(wf, comps(long, long+"x"), comps(long))).To(HaveLen(1))
}
