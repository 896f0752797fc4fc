// Package placement decides which fabric each workflow component runs on, and applies that
// decision to a pod template. Both are pure functions, table-tested.
//
// The rule: components that share a channel (one writes what the other reads, or both bind
// it) and that both ask for a fast link form one group, as do components joined by
// placement.colocateWith. A group is packed into one fabric domain: the fabric named by its
// members if they name exactly one, otherwise (all "any-fast") the Ready fabric with the
// most ready nodes. A component that asked for nothing, or whose fabric does not exist or is
// not Ready, or whose group names several fabrics, runs over TCP and its status says why.
//
// Placement is sticky: an any-fast group already placed on a fabric (Component.Current)
// stays there while that fabric is Ready, whatever the other fabrics' node counts; it is
// placed again only when the fabric is gone or not Ready. Moving would restart its pods.
package placement

import (
	"fmt"
	"sort"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// Reasons of a Decision.
const (
	// ReasonNoFabricRequested: the component asked for no fabric; TCP by choice.
	ReasonNoFabricRequested = "NoFabricRequested"
	// ReasonFabricAssigned: the component runs in a fabric domain.
	ReasonFabricAssigned = "FabricAssigned"
	// ReasonFabricNotFound: the named fabric does not exist; TCP fallback.
	ReasonFabricNotFound = "FabricNotFound"
	// ReasonFabricNotReady: the named fabric has no ready node; TCP fallback until it has.
	ReasonFabricNotReady = "FabricNotReady"
	// ReasonNoFabricAvailable: "any-fast" but no fabric is Ready; TCP fallback.
	ReasonNoFabricAvailable = "NoFabricAvailable"
	// ReasonFabricConflict: components sharing a channel name different fabrics; TCP fallback.
	ReasonFabricConflict = "FabricConflict"
)

// Component is what placement needs to know about a workflow component.
type Component struct {
	Name            string
	Fabric          string // fabric name, conflux.AnyFastFabric, or ""
	Inputs, Outputs []string
	ColocateWith    []string
	// Current is the fabric the component was placed on by the last decision (the Workflow's
	// status), empty if none.
	Current string
}

// Fabric is what placement needs to know about a Fabric.
type Fabric struct {
	Name string
	// Ready: the fabric has nodes that can run its pods (its Ready condition, up to date).
	Ready bool
	// Pending: its reconciler has not judged its current generation yet (a Fabric created
	// in the same apply as the Workflow). A component that names it is placed there rather
	// than started on TCP and rolled again a moment later; any-fast waits for Ready.
	Pending bool
	// Nodes: its ready nodes.
	Nodes int32
}

// Decision is where one component runs.
type Decision struct {
	Fabric  string // empty for TCP
	Link    conflux.LinkType
	Reason  string
	Message string
}

// Decide places every component. It never fails: the worst outcome is TCP with a reason.
func Decide(components []Component, fabrics []Fabric) map[string]Decision {
	known := map[string]Fabric{}
	for _, f := range fabrics {
		known[f.Name] = f
	}
	byName := map[string]Component{}
	for _, c := range components {
		byName[c.Name] = c
	}

	// Union-find over components that want a fast link.
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if parent[x] != x {
			parent[x] = find(parent[x])
		}
		return parent[x]
	}
	union := func(a, b string) {
		ra, rb := find(a), find(b)
		if ra == rb {
			return
		}
		if ra < rb {
			parent[rb] = ra
		} else {
			parent[ra] = rb
		}
	}
	wantsFast := func(c Component) bool { return c.Fabric != "" }
	users := map[string][]string{} // channel -> fast components binding it
	for _, c := range components {
		if !wantsFast(c) {
			continue
		}
		parent[c.Name] = c.Name
		seen := map[string]bool{}
		for _, ch := range append(append([]string{}, c.Inputs...), c.Outputs...) {
			if !seen[ch] {
				seen[ch] = true
				users[ch] = append(users[ch], c.Name)
			}
		}
	}
	for _, names := range users {
		for _, n := range names[1:] {
			union(names[0], n)
		}
	}
	for _, c := range components {
		if !wantsFast(c) {
			continue
		}
		for _, o := range c.ColocateWith {
			if oc, ok := byName[o]; ok && wantsFast(oc) {
				union(c.Name, o)
			}
		}
	}

	groups := map[string][]string{}
	for _, c := range components {
		if wantsFast(c) {
			r := find(c.Name)
			groups[r] = append(groups[r], c.Name)
		}
	}

	out := map[string]Decision{}
	for _, c := range components {
		if !wantsFast(c) {
			out[c.Name] = Decision{Link: conflux.LinkTCP, Reason: ReasonNoFabricRequested,
				Message: "no fabric requested; pods use TCP across nodes"}
		}
	}
	for _, members := range groups {
		sort.Strings(members)
		named := map[string]bool{}
		for _, m := range members {
			if f := byName[m].Fabric; f != conflux.AnyFastFabric {
				named[f] = true
			}
		}
		var d Decision
		switch len(named) {
		case 0:
			best, ok := current(members, byName, known)
			if !ok {
				best, ok = pickAnyFast(fabrics)
			}
			if ok {
				d = assigned(best, members)
			} else {
				d = Decision{Link: conflux.LinkTCP, Reason: ReasonNoFabricAvailable,
					Message: "any-fast requested but no Fabric is Ready; falling back to TCP"}
			}
		case 1:
			var name string
			for n := range named {
				name = n
			}
			if f, ok := known[name]; ok && (f.Ready || f.Pending) {
				d = assigned(name, members)
			} else if ok {
				d = Decision{Link: conflux.LinkTCP, Reason: ReasonFabricNotReady,
					Message: fmt.Sprintf("Fabric %q has no ready node; falling back to TCP", name)}
			} else {
				d = Decision{Link: conflux.LinkTCP, Reason: ReasonFabricNotFound,
					Message: fmt.Sprintf("Fabric %q not found; falling back to TCP", name)}
			}
		default:
			names := make([]string, 0, len(named))
			for n := range named {
				names = append(names, n)
			}
			sort.Strings(names)
			d = Decision{Link: conflux.LinkTCP, Reason: ReasonFabricConflict,
				Message: fmt.Sprintf("components %v share channels but ask for different fabrics %v; falling back to TCP", members, names)}
		}
		for _, m := range members {
			out[m] = d
		}
	}
	return out
}

func assigned(fabric string, members []string) Decision {
	msg := fmt.Sprintf("placed in fabric %q", fabric)
	if len(members) > 1 {
		msg = fmt.Sprintf("placed in fabric %q with %v", fabric, members)
	}
	return Decision{Fabric: fabric, Link: conflux.LinkFast, Reason: ReasonFabricAssigned, Message: msg}
}

// current returns the Ready fabric the group's members are on now: the one most of them
// are on (ties by name); none if no member is on a Ready fabric.
func current(members []string, byName map[string]Component, known map[string]Fabric) (string, bool) {
	count := map[string]int{}
	best := ""
	for _, m := range members {
		f := byName[m].Current
		if kf, ok := known[f]; !ok || !kf.Ready {
			continue
		}
		count[f]++
		if best == "" || count[f] > count[best] || (count[f] == count[best] && f < best) {
			best = f
		}
	}
	return best, best != ""
}

// pickAnyFast returns the Ready fabric with the most ready nodes (ties by name); none if no
// fabric is Ready.
func pickAnyFast(fabrics []Fabric) (string, bool) {
	var best Fabric
	for _, f := range fabrics {
		if !f.Ready || f.Nodes <= 0 {
			continue
		}
		if !best.Ready || f.Nodes > best.Nodes || (f.Nodes == best.Nodes && f.Name < best.Name) {
			best = f
		}
	}
	return best.Name, best.Ready
}
