"""bench/results/index.md: the page a person reads first. It opens with one line per area (where
Conflux leads, where it trails, on how many links, which run.sh reproduces it), then a short
table per area (Conflux / best peer at up to three points, ▲ ahead, **▼** behind, numbered
references to the commands), then the figures (figures.py), then the full tables.
problems() is what `report.py --check` fails on."""
import os

import figures
from areas import good

AHEAD, BEHIND = "▲", "**▼**"


def num(v):
    if v is None:
        return "n/a"
    a = abs(v)
    return f"{v:,.0f}" if a >= 1000 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 0.1 else f"{v:.3f}"


def spread(t):
    if not t:
        return "—"
    return num(t[0]) if t[1] == t[2] else f"{num(t[0])} ({num(t[1])}–{num(t[2])})"


def machine_text(m):
    if not m:
        return "machine not recorded"
    parts = [str(m.get("cpu", "CPU not recorded"))]
    if m.get("cores"):
        parts.append(f"{m['cores']} cores")
    if m.get("kernel"):
        parts.append(f"Linux {m['kernel']}")
    if m.get("host"):
        parts.append(f"host {m['host']}")
    return ", ".join(parts)


class Refs:
    """Numbered references: each command once on the page."""
    def __init__(self):
        self.cmds = []

    def cite(self, cmds):
        out = []
        for c in sorted(c for c in cmds if c):
            if c not in self.cmds:
                self.cmds.append(c)
            out.append(self.cmds.index(c) + 1)
        return "[" + ", ".join(str(n) for n in sorted(set(out))) + "]" if out else ""


def best_at(series, x):
    """The strongest peer at x among a link's series: (series, advantage), or (None, None)."""
    got = [(s, s.advantage(x)) for s in series]
    got = [(s, a) for s, a in got if a is not None]
    return min(got, key=lambda g: g[1]) if got else (None, None)


def by_link(q):
    links = {}
    for s in q.main():
        links.setdefault(s.link, []).append(s)
    return links


def xs_of(series):
    return sorted({x for s in series for x in s.points if s.advantage(x) is not None},
                  key=lambda x: (x is None, x or 0))


def three(xs):
    """Up to three points: the smallest, one in the middle, the largest."""
    if len(xs) <= 3:
        return xs
    return [xs[0], xs[len(xs) // 2], xs[-1]]


def verdict(a):
    """The area's first-screen line: where Conflux leads, where it trails, on k of n links."""
    if a.absent:
        return f"- **{a.name}**: {a.absent}."
    links, trails = [], {}
    for q in a.questions:
        for link, series in by_link(q).items():
            if link not in links:
                links.append(link)
            for x in xs_of(series):
                s, adv = best_at(series, x)
                if adv < 1:
                    trails.setdefault(link, []).append((adv, q.short, x, s.peer))
    compared = [l for l in links if any(xs_of(by_link(q).get(l, [])) for q in a.questions)]
    ahead = [l for l in compared if l not in trails]
    parts = []
    if ahead:
        parts.append(f"leads on {len(ahead)} of {len(compared)} {a.word} ({', '.join(ahead)})")
    if trails:
        adv, short, x, peer, link = min(t + (l,) for l, ts in trails.items() for t in ts)
        at = f" at {figures.size_name(x)}" if x is not None else ""
        parts.append(f"trails on {len(trails)} of {len(compared)} {a.word} ({', '.join(l for l in compared if l in trails)}; "
                     f"furthest: {link}, {short}{at} vs {peer}, {adv:.2f}×)".replace(" 0.00×", f" {adv:.1g}×"))
    if not compared:
        parts.append("no point with a peer")
    err = f" Not read: {'; '.join(a.errors)}." if a.errors else ""
    return (f"- **{a.name}**: " + "; ".join(parts) + ". Reproduce: " +
            ", ".join(f"`{r}`" for r in sorted(set(a.runs))) + "." + err)


def area_table(a, refs):
    L = [f"## {a.name}", ""]
    if a.absent:
        return L + [a.absent[0].upper() + a.absent[1:] + ".", ""]
    L += ["Conflux / best peer at that point (the peer named); ▲ Conflux ahead, **▼** behind; "
          "[n]: the commands, below.", "",
          "| question | link | smallest | middle | largest |", "| --- | --- | --- | --- | --- |"]
    for q in a.questions:
        for link, series in by_link(q).items():
            cells = []
            for x in three(xs_of(series)):
                s, adv = best_at(series, x)
                cx, pe = s.points[x]
                at = f"{figures.size_name(x)}: " if x is not None else ""
                cells.append(f"{at}{num(cx[0])} / {num(pe[0])} {q.unit if len(q.unit) < 6 else ''} "
                             f"({s.peer}) {AHEAD if adv >= 1 else BEHIND} "
                             f"{refs.cite(s.cx_cmds | s.peer_cmds)}".replace("  ", " "))
            if not cells:
                cells = ["no point with a peer"]
            cells += [""] * (3 - len(cells))
            what = f"{q.short} ({q.source})" if q.source else q.short
            L.append(f"| {what} | {link} | " + " | ".join(cells) + " |")
    L.append("")
    L += [f"- {n}" for n in dict.fromkeys(a.notes)]
    L += [f"- not read: {e}" for e in a.errors]
    return L + ([""] if a.notes or a.errors else [])


def full_table(q):
    L = [f"### {q.title}", "",
         "Advantage: how many times Conflux is ahead (peer / Conflux for times, Conflux / peer for "
         "rates); below 1 Conflux trails. Medians with (min–max).", "",
         f"| link | Conflux side | peer | {q.xlabel} | Conflux ({q.unit}) | peer ({q.unit}) | advantage | |",
         "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in q.series:
        for x in sorted(s.points, key=lambda x: (x is None, x or 0)):
            cx, pe = s.points[x]
            adv = s.advantage(x)
            mark = "" if adv is None else AHEAD if adv >= 1 else BEHIND
            side = s.cx_name + (" (variant)" if s.role == "variant" else "")
            peer = (s.peer or "—") + (" (reference)" if s.role == "reference" else "")
            L.append(f"| {s.link} | {side} | {peer} | {figures.size_name(x)} | "
                     f"{spread(cx)} | {spread(pe)} | {num(adv) if adv else '—'} | {mark} |")
    return L + [""]


def problems(areas, drawn):
    """What makes `report.py --check` fail: a results file not read, a figure not drawn, a
    panel without a peer, a point not positive and finite."""
    out = []
    for a in areas:
        out += [f"{a.name}: {e}" for e in a.errors]
        for q in a.questions:
            if q.figure:
                got = drawn.get(q.key)
                path = got[0] if got else None
                if got is None or got[1] is None or not path or not os.path.exists(path) \
                        or os.path.getsize(path) == 0:
                    out.append(f"{a.name}: figure {q.key} not drawn")
                elif len(got[1]) != len([s for s in q.main() if any(x is not None for x in s.points)]):
                    out.append(f"{a.name}: figure {q.key} lacks a panel")
            for s in q.series:
                if s.role == "main" and not any(p[1] for p in s.points.values()):
                    out.append(f"{a.name}: {q.key}: panel '{s.title()}' has no peer")
                for x, (cx, pe) in s.points.items():
                    for who, t in ((s.cx_name, cx), (s.peer, pe)):
                        if t is None and (who == s.cx_name or any(p[1] for p in s.points.values())):
                            out.append(f"{a.name}: {q.key}: {s.link}, {who} at {figures.size_name(x)}: "
                                       "no figure")
                        elif t is not None and not all(good(v) for v in t):
                            out.append(f"{a.name}: {q.key}: {s.link}, {who} at {figures.size_name(x)}: "
                                       f"{t} is not positive and finite")
    return out


def write(areas, out, machine, plots="plots", draw=True):
    """Draws the figures into out/plots (unless draw is False) and writes out/index.md; returns
    {question: (path, panels drawn or None)} for problems()."""
    os.makedirs(os.path.join(out, plots), exist_ok=True)
    if draw:  # the figures of an earlier run (or of an older report) are not this page's
        for f in os.listdir(os.path.join(out, plots)):
            if f.endswith(".png"):
                os.remove(os.path.join(out, plots, f))
    refs = Refs()
    dates = sorted({d for a in areas for d in a.dates})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}" if dates else "date not recorded"
    L = ["# Conflux benchmarks at a glance", "",
         f"Machine: {machine_text(machine)}. Results of {when}. Each point is Conflux against its "
         "best peer measured in the same run on the same machine; speed says something only on an "
         "otherwise quiet machine.", "", "## Where Conflux leads and trails", ""]
    L += [verdict(a) for a in areas] + [""]
    body = []
    for a in areas:
        body += area_table(a, refs)
    L += body + ["## Commands", ""] + [f"{i}. `{c}`" for i, c in enumerate(refs.cmds, 1)] + [""]
    L += ["## Figures", "",
          "Conflux solid, its peer dashed in the same colour, bars min–max; the strip under each "
          "panel is Conflux's advantage (× ahead, log scale), shaded red where Conflux trails.", ""]
    drawn = {}
    for a in areas:
        for q in a.questions:
            if not q.figure:
                continue
            path = os.path.join(out, plots, q.key + ".png")
            caption = (f"{machine_text(machine)}; results of {q.date or 'an unknown date'}. "
                       f"Reproduce: {q.source}/run.sh.")
            panels = figures.draw(q, path, caption) if draw else None
            drawn[q.key] = (path, panels)
            if panels:
                L += [f"### {a.name}: {q.short} ({q.source})", "", f"![{q.title}]({plots}/{q.key}.png)", ""]
    L += ["## Full tables", "",
          "Every test of bench/micro (CPU per message, overlap, buffer reuse, hot-spot, ...), tls, "
          "and why a cell is empty: [summary.md](summary.md).", ""]
    for a in areas:
        for q in a.questions:
            L += full_table(q)
    with open(os.path.join(out, "index.md"), "w") as f:
        f.write("\n".join(L))
    return drawn
