package controller

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/placement"
)

// Pure tests of the status functions: no API server.

func TestSetSpaceServerReadyCondition(t *testing.T) {
	sts := func(ready int32, gen, observed int64) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: gen},
			Status: appsv1.StatefulSetStatus{ReadyReplicas: ready, ObservedGeneration: observed}}
	}
	tests := []struct {
		name       string
		scope      spaceScope
		wantStatus metav1.ConditionStatus
		wantReason string // "" means no condition
	}{
		{"no statefulset yet, no error", spaceScope{}, "", ""},
		{"creation failed", spaceScope{err: errors.New("boom")}, metav1.ConditionFalse, conflux.ReasonReconcileError},
		{"not ready", spaceScope{statefulSet: sts(0, 1, 1)}, metav1.ConditionFalse, conflux.ReasonWaitingForReplicas},
		{"ready but stale", spaceScope{statefulSet: sts(1, 2, 1)}, metav1.ConditionFalse, conflux.ReasonWaitingForReplicas},
		{"ready", spaceScope{statefulSet: sts(1, 2, 2)}, metav1.ConditionTrue, conflux.ReasonReconciled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := tt.scope
			s.space = &conflux.Space{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			setSpaceServerReadyCondition(&s)
			c := meta.FindStatusCondition(s.space.Status.Conditions, conflux.SpaceServerReadyCondition)
			if tt.wantReason == "" {
				g.Expect(c).To(BeNil())
				return
			}
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(tt.wantStatus))
			g.Expect(c.Reason).To(Equal(tt.wantReason))
			g.Expect(c.ObservedGeneration).To(Equal(int64(3)))
		})
	}
}

func TestUpdateSpaceStatusObservedGeneration(t *testing.T) {
	g := NewWithT(t)
	s := &spaceScope{space: &conflux.Space{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n", Generation: 4}}, err: errors.New("boom")}
	updateSpaceStatus(s)
	g.Expect(s.space.Status.ObservedGeneration).To(BeZero(), "not after a failed reconcile")
	g.Expect(meta.FindStatusCondition(s.space.Status.Conditions, conflux.ReadyCondition).Reason).To(Equal(conflux.ReasonReconcileError))
	s.err, s.service, s.statefulSet = nil, &corev1.Service{}, &appsv1.StatefulSet{}
	updateSpaceStatus(s)
	g.Expect(s.space.Status.ObservedGeneration).To(Equal(int64(4)))
	g.Expect(s.space.Status.Endpoint).To(Equal("a.n.svc:7400"))
}

func TestSetSpaceExposedCondition(t *testing.T) {
	g := NewWithT(t)
	exposed := &conflux.SpaceExposure{Enabled: true, SNIHost: "s.example.org"}
	for _, c := range []struct {
		name     string
		exposure *conflux.SpaceExposure
		scope    spaceScope
		want     string // reason; "" = no condition
		status   metav1.ConditionStatus
	}{
		{"not exposed", nil, spaceScope{edgeOn: true}, "", ""},
		{"exposure off", &conflux.SpaceExposure{SNIHost: "s.example.org"}, spaceScope{edgeOn: true}, "", ""},
		{"no edge", exposed, spaceScope{}, conflux.ReasonEdgeDisabled, metav1.ConditionFalse},
		{"served", exposed, spaceScope{edgeOn: true, edgeBuilt: true, exposed: true}, conflux.ReasonReconciled, metav1.ConditionTrue},
		{"conflict", exposed, spaceScope{edgeOn: true, edgeBuilt: true, exposureHolder: "a/b"}, conflux.ReasonSNIConflict, metav1.ConditionFalse},
		{"not built yet", exposed, spaceScope{edgeOn: true}, conflux.ReasonEdgePending, metav1.ConditionFalse},
	} {
		s := c.scope
		s.space = &conflux.Space{Spec: conflux.SpaceSpec{Exposure: c.exposure}}
		s.space.Status.Conditions = []metav1.Condition{{Type: conflux.SpaceExposedCondition, Status: metav1.ConditionTrue, Reason: "Old"}}
		setSpaceExposedCondition(&s)
		got := meta.FindStatusCondition(s.space.Status.Conditions, conflux.SpaceExposedCondition)
		if c.want == "" {
			g.Expect(got).To(BeNil(), c.name)
			continue
		}
		g.Expect(got).NotTo(BeNil(), c.name)
		g.Expect(got.Reason).To(Equal(c.want), c.name)
		g.Expect(got.Status).To(Equal(c.status), c.name)
	}
}

func TestSetReadySummary(t *testing.T) {
	cond := func(typ string, st metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason}
	}
	tests := []struct {
		name       string
		conds      []metav1.Condition
		deleting   bool
		err        error
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{"all true", []metav1.Condition{cond("A", "True", "R"), cond("B", "True", "R")}, false, nil, "True", conflux.ReasonReconciled, ""},
		{"one false", []metav1.Condition{cond("A", "True", "R"), cond("B", "False", "Nope")}, false, nil, "False", conflux.ReasonNotReady, "not ready: B=Nope"},
		{"one missing", []metav1.Condition{cond("A", "True", "R")}, false, nil, "False", conflux.ReasonNotReady, "not ready: B=Unknown"},
		{"error wins", []metav1.Condition{cond("A", "True", "R"), cond("B", "True", "R")}, false, errors.New("boom"), "False", conflux.ReasonReconcileError, "boom"},
		{"deleting wins", nil, true, errors.New("boom"), "False", conflux.ReasonDeleting, "bye"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			conds := append([]metav1.Condition{}, tt.conds...)
			setReadySummary(&conds, 1, tt.deleting, "bye", tt.err, "A", "B")
			c := meta.FindStatusCondition(conds, conflux.ReadyCondition)
			g.Expect(c.Status).To(Equal(tt.wantStatus))
			g.Expect(c.Reason).To(Equal(tt.wantReason))
			g.Expect(c.Message).To(Equal(tt.wantMsg))
		})
	}
}

func TestSetChannelConditions(t *testing.T) {
	tests := []struct {
		name               string
		scope              channelScope
		wantSpace, wantReg string // reasons
		wantReady          metav1.ConditionStatus
	}{
		{"no space", channelScope{spaceReason: conflux.ReasonNoSpace}, conflux.ReasonNoSpace, conflux.ReasonNoSpace, "True"},
		{"space missing", channelScope{spaceReason: conflux.ReasonSpaceNotFound, spaceMessage: "m"}, conflux.ReasonSpaceNotFound, conflux.ReasonSpaceNotFound, "False"},
		{"registered", channelScope{space: &conflux.Space{}, registered: true}, conflux.ReasonReconciled, conflux.ReasonReconciled, "True"},
		{"registration failed", channelScope{space: &conflux.Space{}, registerErr: errors.New("down"), err: errors.New("down")},
			conflux.ReasonReconciled, conflux.ReasonRegistrationFailed, "False"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := tt.scope
			s.channel = &conflux.Channel{}
			updateChannelStatus(&s)
			conds := s.channel.Status.Conditions
			g.Expect(meta.FindStatusCondition(conds, conflux.ChannelSpaceResolvedCondition).Reason).To(Equal(tt.wantSpace))
			g.Expect(meta.FindStatusCondition(conds, conflux.ChannelRegisteredCondition).Reason).To(Equal(tt.wantReg))
			g.Expect(meta.FindStatusCondition(conds, conflux.ReadyCondition).Status).To(Equal(tt.wantReady))
		})
	}
}

func TestWorkflowStatusFunctions(t *testing.T) {
	wf := func() *conflux.Workflow {
		return &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Generation: 2}, Spec: conflux.WorkflowSpec{Components: []conflux.Component{
			{Name: "a", Fabric: "ib"}, {Name: "b", DependsOn: []string{"a"}}}}}
	}
	fast := map[string]placement.Decision{"a": {Fabric: "ib", Link: conflux.LinkFast}, "b": {Link: conflux.LinkTCP, Reason: placement.ReasonNoFabricRequested}}
	tcp := map[string]placement.Decision{"a": {Link: conflux.LinkTCP, Reason: placement.ReasonFabricNotFound}, "b": {Link: conflux.LinkTCP}}
	tests := []struct {
		name                      string
		scope                     workflowScope
		wantPhase                 conflux.WorkflowPhase
		wantPlaced, wantCompReady string // reasons; "" = absent
	}{
		{"missing channels", workflowScope{missingChannels: []string{"x"}}, conflux.WorkflowPending, "", conflux.ReasonNotReady},
		{"error", workflowScope{err: errors.New("boom")}, conflux.WorkflowFailed, "", conflux.ReasonNotReady},
		{"waiting for dependency", workflowScope{decisions: fast, components: map[string]*componentState{
			"a": {replicas: 1, created: true}, "b": {replicas: 1, waitingFor: []string{"a"}}}},
			conflux.WorkflowProgressing, placement.ReasonFabricAssigned, conflux.ReasonWaitingForDependencies},
		{"fallback, running", workflowScope{decisions: tcp, components: map[string]*componentState{
			"a": {replicas: 1, ready: 1, created: true}, "b": {replicas: 1, ready: 1, created: true}}},
			conflux.WorkflowRunning, conflux.ReasonFallbackToTCP, conflux.ReasonReconciled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := tt.scope
			s.workflow = wf()
			updateWorkflowStatus(&s)
			st := s.workflow.Status
			g.Expect(st.Phase).To(Equal(tt.wantPhase))
			placed := meta.FindStatusCondition(st.Conditions, conflux.WorkflowPlacedCondition)
			if tt.wantPlaced == "" {
				g.Expect(placed).To(BeNil())
			} else {
				g.Expect(placed.Reason).To(Equal(tt.wantPlaced))
			}
			g.Expect(meta.FindStatusCondition(st.Conditions, conflux.WorkflowComponentsReadyCondition).Reason).To(Equal(tt.wantCompReady))
			if s.err == nil {
				g.Expect(st.ObservedGeneration).To(Equal(int64(2)))
			} else {
				g.Expect(st.ObservedGeneration).To(BeZero())
			}
		})
	}
}
