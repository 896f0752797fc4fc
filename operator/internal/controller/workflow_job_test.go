package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kptr "k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/sidecar"
)

// envtest has no kubelet and no Job controller: the tests write the Job's status
// subresource as the Job controller would (the API server validates its consistency).

func getJob(g Gomega, ns, name string) *batchv1.Job {
	j := &batchv1.Job{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j)).To(Succeed())
	return j
}

// setJobStatus re-reads the Job, lets edit change its status, and writes it.
func setJobStatus(g Gomega, ns, name string, edit func(*batchv1.JobStatus)) {
	j := getJob(g, ns, name)
	edit(&j.Status)
	g.Expect(k8sClient.Status().Update(context.Background(), j)).To(Succeed())
}

func jobStarted(active int32) func(*batchv1.JobStatus) {
	return func(st *batchv1.JobStatus) {
		st.StartTime = kptr.To(metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second)))
		st.Active, st.Ready = active, kptr.To(active)
	}
}

func jobCond(t batchv1.JobConditionType, reason, msg string) batchv1.JobCondition {
	now := metav1.Now()
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastProbeTime: now, LastTransitionTime: now}
}

func jobCompleted(succeeded int32) func(*batchv1.JobStatus) {
	return func(st *batchv1.JobStatus) {
		st.Active, st.Ready, st.Terminating, st.Succeeded = 0, kptr.To[int32](0), kptr.To[int32](0), succeeded
		st.CompletionTime = kptr.To(metav1.Now())
		st.Conditions = append(st.Conditions, jobCond(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
			jobCond(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"))
	}
}

func jobFailed(failed int32) func(*batchv1.JobStatus) {
	return func(st *batchv1.JobStatus) {
		st.Active, st.Ready, st.Terminating, st.Failed = 0, kptr.To[int32](0), kptr.To[int32](0), failed
		st.Conditions = append(st.Conditions, jobCond(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"),
			jobCond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"))
	}
}

func jobWorkflow(ns string, policy conflux.RunPolicy, comps ...conflux.Component) *conflux.Workflow {
	for i := range comps {
		comps[i].Template = appTemplate()
	}
	return &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: ns},
		Spec: conflux.WorkflowSpec{RunPolicy: policy, Components: comps}}
}

func wfConds(wf *conflux.Workflow) func() []metav1.Condition {
	return func() []metav1.Condition { return wf.Status.Conditions }
}

func componentStatus(wf *conflux.Workflow, name string) conflux.ComponentStatus {
	for _, cs := range wf.Status.Components {
		if cs.Name == name {
			return cs
		}
	}
	return conflux.ComponentStatus{}
}

// A Workflow with runPolicy Complete: its Job runs with the native sidecar and the Job
// fields, a StatefulSet service gets its headless Service, the Workflow succeeds when the
// Job completes, the service is scaled to zero, and a Job deleted afterwards (its TTL) is
// not run again.
func TestWorkflowJobSucceeds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createChannels(t, ns, "x")
	wf := jobWorkflow(ns, conflux.RunComplete,
		conflux.Component{Name: "db", Workload: conflux.WorkloadStatefulSet, Replicas: kptr.To[int32](2), Outputs: []string{"x"}},
		conflux.Component{Name: "solve", Workload: conflux.WorkloadJob, Inputs: []string{"x"}, DependsOn: []string{"db"},
			Completions: kptr.To[int32](4), Parallelism: kptr.To[int32](2), BackoffLimit: kptr.To[int32](1),
			ActiveDeadlineSeconds: kptr.To[int64](600), TTLSecondsAfterFinished: kptr.To[int32](60)})
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())

	// the StatefulSet and its headless Service, owned by the Workflow
	g.Eventually(func(g Gomega) {
		sts := &appsv1.StatefulSet{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-db"}, sts)).To(Succeed())
		svc := &corev1.Service{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: sts.Spec.ServiceName}, svc)).To(Succeed())
		g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		g.Expect(svc.Spec.PublishNotReadyAddresses).To(BeTrue())
		g.Expect(svc.Spec.Selector).To(Equal(sts.Spec.Selector.MatchLabels))
		g.Expect(metav1.IsControlledBy(svc, wf)).To(BeTrue())
		g.Expect(*metav1.GetControllerOf(svc).BlockOwnerDeletion).To(BeTrue(), "deleted with the Workflow by the garbage collector")
		g.Expect(svc.Labels).To(HaveKeyWithValue(ManagedByLabel, ManagedByValue))
	}, timeout, interval).Should(Succeed())
	// the Job waits for db
	g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-solve"}, &batchv1.Job{}))).To(BeTrue())
	g.Eventually(func(g Gomega) {
		sts := &appsv1.StatefulSet{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-db"}, sts)).To(Succeed())
		sts.Status.Replicas, sts.Status.ReadyReplicas, sts.Status.AvailableReplicas, sts.Status.ObservedGeneration = 2, 2, 2, sts.Generation
		g.Expect(k8sClient.Status().Update(ctx, sts)).To(Succeed())
	}, timeout, interval).Should(Succeed())

	g.Eventually(func(g Gomega) {
		j := getJob(g, ns, "wf-solve")
		g.Expect(metav1.IsControlledBy(j, wf)).To(BeTrue())
		g.Expect(j.Spec.Completions).To(Equal(kptr.To[int32](4)))
		g.Expect(j.Spec.Parallelism).To(Equal(kptr.To[int32](2)))
		g.Expect(j.Spec.BackoffLimit).To(Equal(kptr.To[int32](1)))
		g.Expect(j.Spec.ActiveDeadlineSeconds).To(Equal(kptr.To[int64](600)))
		g.Expect(j.Spec.TTLSecondsAfterFinished).To(Equal(kptr.To[int32](60)))
		g.Expect(j.Spec.Suspend).To(Equal(kptr.To(false)))
		g.Expect(j.Spec.Template.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
		// the sidecar is a native sidecar, so the pod finishes when the app does
		g.Expect(j.Spec.Template.Spec.Containers).To(ConsistOf(HaveField("Name", "app")))
		sc := sidecar.Find(&j.Spec.Template.Spec)
		g.Expect(sc).NotTo(BeNil())
		g.Expect(j.Spec.Template.Spec.InitContainers).To(ContainElement(HaveField("Name", sidecar.ContainerName)))
		g.Expect(sc.RestartPolicy).To(Equal(kptr.To(corev1.ContainerRestartPolicyAlways)))
		g.Expect(sc.Args).To(ContainElement("--inputs=x"))
	}, timeout, interval).Should(Succeed())

	g.Eventually(func(g Gomega) { setJobStatus(g, ns, "wf-solve", jobStarted(2)) }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := condition(g, wf, wfConds(wf), conflux.WorkflowCompleteCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(conflux.ReasonJobsRunning))
		g.Expect(wf.Status.Phase).To(Equal(conflux.WorkflowRunning))
		g.Expect(wf.Status.StartTime).NotTo(BeNil())
		g.Expect(wf.Status.CompletionTime).To(BeNil())
		cs := componentStatus(wf, "solve")
		g.Expect(cs.Phase).To(Equal(conflux.ComponentRunning))
		g.Expect(cs.StartTime).NotTo(BeNil())
		g.Expect(componentStatus(wf, "db").Phase).To(Equal(conflux.ComponentRunning))
	}, timeout, interval).Should(Succeed())

	g.Eventually(func(g Gomega) { setJobStatus(g, ns, "wf-solve", jobCompleted(4)) }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := condition(g, wf, wfConds(wf), conflux.WorkflowCompleteCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(wf.Status.Phase).To(Equal(conflux.WorkflowSucceeded))
		g.Expect(wf.Status.CompletionTime).NotTo(BeNil())
		failed := condition(g, wf, wfConds(wf), conflux.WorkflowFailedCondition)
		g.Expect(failed.Status).To(Equal(metav1.ConditionFalse))
		cs := componentStatus(wf, "solve")
		g.Expect(cs.Phase).To(Equal(conflux.ComponentSucceeded))
		g.Expect(cs.CompletionTime).NotTo(BeNil())
		g.Expect(cs.Conditions).To(ContainElement(And(HaveField("Type", conflux.WorkflowCompleteCondition),
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", batchv1.JobReasonCompletionsReached))))
		g.Expect(componentStatus(wf, "db").Phase).To(Equal(conflux.ComponentSucceeded))
		sts := &appsv1.StatefulSet{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-db"}, sts)).To(Succeed())
		g.Expect(*sts.Spec.Replicas).To(BeZero(), "services are scaled to zero when the Workflow finished")
	}, timeout, interval).Should(Succeed())

	// the Job goes (ttlSecondsAfterFinished): it is not run again, the outcome stays
	g.Expect(k8sClient.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wf-solve"}},
		client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-solve"}, &batchv1.Job{}))
	}, timeout, interval).Should(BeTrue())
	touchWorkflow(g, wf) // queue a reconcile
	g.Consistently(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-solve"}, &batchv1.Job{}))).To(BeTrue())
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf)).To(Succeed())
		g.Expect(wf.Status.Phase).To(Equal(conflux.WorkflowSucceeded))
		g.Expect(componentStatus(wf, "solve").Phase).To(Equal(conflux.ComponentSucceeded))
	}, 3*time.Second, interval).Should(Succeed())
}

// touchWorkflow changes a label of the Workflow, which queues it.
func touchWorkflow(g Gomega, wf *conflux.Workflow) {
	g.Eventually(func() error {
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(wf), wf); err != nil {
			return err
		}
		if wf.Labels == nil {
			wf.Labels = map[string]string{}
		}
		wf.Labels["touched"] = time.Now().Format("150405.000000")
		return k8sClient.Update(context.Background(), wf)
	}, timeout, interval).Should(Succeed())
}

// A failed Job fails the Workflow with the Job's reason; services keep running under
// runPolicy Continuous.
func TestWorkflowJobFails(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	wf := jobWorkflow(ns, conflux.RunContinuous,
		conflux.Component{Name: "web"},
		conflux.Component{Name: "step", Workload: conflux.WorkloadJob, BackoffLimit: kptr.To[int32](0)})
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())
	g.Eventually(func(g Gomega) { setJobStatus(g, ns, "wf-step", jobStarted(1)) }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf)).To(Succeed())
		g.Expect(componentStatus(wf, "step").Phase).To(Equal(conflux.ComponentRunning))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) { setJobStatus(g, ns, "wf-step", jobFailed(1)) }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := condition(g, wf, wfConds(wf), conflux.WorkflowFailedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(batchv1.JobReasonBackoffLimitExceeded))
		g.Expect(c.Message).To(Equal("component step: Job has reached the specified backoff limit"))
		g.Expect(wf.Status.Phase).To(Equal(conflux.WorkflowFailed))
		g.Expect(wf.Status.CompletionTime).NotTo(BeNil())
		cs := componentStatus(wf, "step")
		g.Expect(cs.Phase).To(Equal(conflux.ComponentFailed))
		g.Expect(cs.CompletionTime).NotTo(BeNil())
		g.Expect(cs.Conditions).To(ContainElement(And(HaveField("Type", conflux.WorkflowFailedCondition),
			HaveField("Reason", batchv1.JobReasonBackoffLimitExceeded))))
		ready := condition(g, wf, wfConds(wf), conflux.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(*getDeployment(g, ns, "wf-web").Spec.Replicas).To(Equal(int32(1)), "Continuous: services keep running")
	}, timeout, interval).Should(Succeed())
}

// A suspended Workflow runs no pod: its Job is created suspended and its Deployment with
// zero replicas; unsuspending resumes both.
func TestWorkflowSuspendAndResume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	wf := jobWorkflow(ns, conflux.RunComplete,
		conflux.Component{Name: "web", Replicas: kptr.To[int32](3)},
		conflux.Component{Name: "step", Workload: conflux.WorkloadJob})
	wf.Spec.Suspend = true
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getJob(g, ns, "wf-step").Spec.Suspend).To(Equal(kptr.To(true)))
		g.Expect(*getDeployment(g, ns, "wf-web").Spec.Replicas).To(BeZero())
		c := condition(g, wf, wfConds(wf), conflux.WorkflowSuspendedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(wf.Status.Phase).To(Equal(conflux.WorkflowPending))
		g.Expect(wf.Status.StartTime).To(BeNil(), "nothing started while suspended")
		g.Expect(componentStatus(wf, "web").Phase).To(Equal(conflux.ComponentPending))
		g.Expect(componentStatus(wf, "step").Phase).To(Equal(conflux.ComponentPending))
	}, timeout, interval).Should(Succeed())

	g.Eventually(func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf); err != nil {
			return err
		}
		wf.Spec.Suspend = false
		return k8sClient.Update(ctx, wf)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getJob(g, ns, "wf-step").Spec.Suspend).To(Equal(kptr.To(false)))
		g.Expect(*getDeployment(g, ns, "wf-web").Spec.Replicas).To(Equal(int32(3)))
		g.Expect(condition(g, wf, wfConds(wf), conflux.WorkflowSuspendedCondition)).To(BeNil())
		g.Expect(wf.Status.StartTime).NotTo(BeNil())
		g.Expect(componentStatus(wf, "web").Phase).To(Equal(conflux.ComponentRunning))
	}, timeout, interval).Should(Succeed())
}

// A Workflow managed by another controller is not touched; managedBy cannot change.
func TestWorkflowManagedByAnotherController(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	other := jobWorkflow(ns, "", conflux.Component{Name: "a"})
	other.Name, other.Spec.ManagedBy = "other", "example.com/multicluster"
	mine := jobWorkflow(ns, "", conflux.Component{Name: "a"})
	mine.Spec.ManagedBy = conflux.ManagedByConflux
	g.Expect(k8sClient.Create(ctx, other)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, mine)).To(Succeed())
	g.Eventually(func(g Gomega) { getDeployment(g, ns, "wf-a") }, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "other-a"}, &appsv1.Deployment{}))).To(BeTrue())
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(other), other)).To(Succeed())
		g.Expect(other.Status.Phase).To(BeEmpty(), "not even the status is written")
	}, 2*time.Second, interval).Should(Succeed())

	for _, change := range []string{"", conflux.ManagedByConflux} {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(other), other)).To(Succeed())
		other.Spec.ManagedBy = change
		err := k8sClient.Update(ctx, other)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("managedBy is immutable"))
	}
}

// A StatefulSet component that becomes a Deployment loses its headless Service.
func TestWorkflowHeadlessServiceFollowsStatefulSet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	wf := jobWorkflow(ns, "", conflux.Component{Name: "db", Workload: conflux.WorkloadStatefulSet})
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())
	key := client.ObjectKey{Namespace: ns, Name: "wf-db"}
	g.Eventually(func() error { return k8sClient.Get(ctx, key, &corev1.Service{}) }, timeout, interval).Should(Succeed())
	g.Eventually(func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf); err != nil {
			return err
		}
		wf.Spec.Components[0].Workload = conflux.WorkloadDeployment
		return k8sClient.Update(ctx, wf)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		getDeployment(g, ns, "wf-db")
		g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key, &corev1.Service{}))).To(BeTrue())
		g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key, &appsv1.StatefulSet{}))).To(BeTrue())
	}, timeout, interval).Should(Succeed())
}

// The admission rules of Job components and of runPolicy.
func TestAdmissionJobFields(t *testing.T) {
	ns := newNamespace(t)
	job := conflux.WorkloadJob
	tests := []struct {
		name    string
		invalid client.Object
		reason  []string
		valid   client.Object
	}{
		{"job fields on a deployment", admWorkflow(ns, "dep", conflux.Component{Name: "a", Completions: kptr.To[int32](2)}),
			[]string{"component a: completions, parallelism, backoffLimit, activeDeadlineSeconds and ttlSecondsAfterFinished apply to a Job component only"},
			admWorkflow(ns, "job", conflux.Component{Name: "a", Workload: job, Completions: kptr.To[int32](2)})},
		{"ttl on a statefulset", admWorkflow(ns, "sts", conflux.Component{Name: "b", Workload: conflux.WorkloadStatefulSet, TTLSecondsAfterFinished: kptr.To[int32](5)}),
			[]string{"component b: completions, parallelism", "(workload: Job)"},
			admWorkflow(ns, "sts-ok", conflux.Component{Name: "b", Workload: conflux.WorkloadStatefulSet})},
		{"replicas on a job", admWorkflow(ns, "rep", conflux.Component{Name: "c", Workload: job, Replicas: kptr.To[int32](3)}),
			[]string{"component c: a Job component has no replicas; set parallelism and completions"},
			admWorkflow(ns, "par", conflux.Component{Name: "c", Workload: job, Parallelism: kptr.To[int32](3)})},
		{"runPolicy Complete without a job", &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "nojob", Namespace: ns},
			Spec: conflux.WorkflowSpec{RunPolicy: conflux.RunComplete, Components: admWorkflow(ns, "", conflux.Component{Name: "a"}).Spec.Components}},
			[]string{"runPolicy Complete needs at least one Job component"},
			&conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "withjob", Namespace: ns},
				Spec: conflux.WorkflowSpec{RunPolicy: conflux.RunComplete, Components: admWorkflow(ns, "", conflux.Component{Name: "a", Workload: job}).Spec.Components}}},
	}
	always := admWorkflow(ns, "always", conflux.Component{Name: "d", Workload: job})
	always.Spec.Components[0].Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	onFailure := admWorkflow(ns, "onfailure", conflux.Component{Name: "d", Workload: job})
	onFailure.Spec.Components[0].Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	tests = append(tests, struct {
		name    string
		invalid client.Object
		reason  []string
		valid   client.Object
	}{"job restarting Always", always, []string{"component d: a Job component restarts its pods Never or OnFailure, not Always"}, onFailure})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := createOrReason(t, tt.invalid)
			g.Expect(got).NotTo(BeEmpty(), "the invalid %s is accepted", tt.invalid.GetName())
			for _, r := range tt.reason {
				g.Expect(got).To(ContainSubstring(r))
			}
			g.Expect(createOrReason(t, tt.valid)).To(BeEmpty())
		})
	}
}
