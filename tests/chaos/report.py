"""The chaos suite's report as markdown (the figures docs/reliability.md records)."""

from __future__ import annotations

from typing import Any


def markdown(result: Any) -> str:
    lines = [f"## chaos run, seed {result.seed}: {'PASS' if result.ok else 'FAIL'}", ""]
    m = result.machine
    lines.append(f"- date {m.get('date')}, {m.get('cpus')} CPUs, load average at start {m.get('loadavg')}, "
                 f"at end {m.get('loadavg_end')}; python {m.get('python')}, kernel {m.get('kernel')}")
    if m.get("command"):
        lines.append(f"- command: `{m['command']}`")
    lines.append("- timings (s): " + ", ".join(f"{k} {v}" for k, v in sorted(result.timings.items())))
    lines += ["", "| event | planned |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(result.events.items())]
    lines.append(f"| **total** | {sum(result.events.values())} |")
    lines += ["", "| outcome | count |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(result.outcomes.items())]
    lines += ["", "| proxy (world) | counts |", "|---|---|"]
    lines += [f"| {w} | {', '.join(f'{k} {v}' for k, v in c.items())} |" for w, c in sorted(result.proxy.items())]
    lines += ["", "| operator | instances | longest life s | RSS first MiB | peak | last | stable |",
              "|---|---|---|---|---|---|---|"]
    for w in result.rss.values():
        for op, s in sorted(w.items()):
            lines.append(f"| {op} | {s['instances']} | {s['longest_s']} | {s['first_mib']} | {s['peak_mib']} | "
                         f"{s['last_mib']} | {s['stable']} |")
    lines += ["", "End-state checks (empty = held):", ""]
    for world, findings in sorted(result.findings.items()):
        if isinstance(findings, dict):
            for check, found in sorted(findings.items()):
                lines.append(f"- {world} / {check}: {found[:10] if found else 'ok'}")
        else:
            lines.append(f"- {world}: {findings[:10] if findings else 'ok'}")
    if result.failures:
        lines += ["", "Failures:", *(f"- {f}" for f in result.failures[:20])]
    return "\n".join(lines) + "\n"
