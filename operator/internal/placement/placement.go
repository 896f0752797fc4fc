// Package placement decides which fabric each workflow component runs on, and applies that
// decision to a pod template. Both are pure functions, table-tested.
//
// The rule: components that share a channel (one writes what the other reads, or both bind
// it) and that both ask for a fast link form one group, as do components joined by
// placement.colocateWith. A group is packed into one fabric domain: the fabric named by its
// members if they name exactly one, otherwise (all "any-fast") the existing fabric with the
// most nodes. A component that asked for nothing, or whose fabric does not exist, or whose
// group names several fabrics, runs over TCP and its status says why.
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
	// ReasonNoFabricAvailable: "any-fast" but no fabric has nodes; TCP fallback.
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
}

// Fabric is what placement needs to know about a Fabric.
type Fabric struct {
	Name  string
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
			best, ok := pickAnyFast(fabrics)
			if ok {
				d = assigned(best, members)
			} else {
				d = Decision{Link: conflux.LinkTCP, Reason: ReasonNoFabricAvailable,
					Message: "any-fast requested but no Fabric has matching nodes; falling back to TCP"}
			}
		case 1:
			var name string
			for n := range named {
				name = n
			}
			if _, ok := known[name]; ok {
				d = assigned(name, members)
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

// pickAnyFast returns the fabric with the most nodes (ties by name); none if no fabric has nodes.
func pickAnyFast(fabrics []Fabric) (string, bool) {
	best := Fabric{Nodes: 0}
	for _, f := range fabrics {
		if f.Nodes > best.Nodes || (f.Nodes == best.Nodes && f.Nodes > 0 && f.Name < best.Name) {
			best = f
		}
	}
	return best.Name, best.Nodes > 0
}
