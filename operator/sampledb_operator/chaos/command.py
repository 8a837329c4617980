"""`sampledb-operator chaos`: the subcommand's flags, and the run against the cluster.

Invariants: importing this module is cheap (the kube client is imported when the command runs);
a missing or ambiguous scope, an unknown fault or a bad duration is a usage error (ConfigError:
exit code 2, one line); the exit code is 0 when every injected fault recovered, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from typing import Any

from sampledb_operator.chaos.faults import Fault, parse_faults
from sampledb_operator.chaos.plan import ScopeError, parse_duration, scope_from_flags
from sampledb_operator.chaos.report import FaultRecord, Report, render_text
from sampledb_operator.chaos.run import Options, summary_exit_code
from sampledb_operator.config import DEFAULT_LEASE_NAMESPACE, ConfigError

DEFAULT_LEASE_NAME = "sampledb-operator"
EXEC_TIMEOUT = 120.0  # seconds: a fill of a large volume writes for a while


def add_parser(sub: Any) -> None:
    """Add `chaos` to the CLI's subparsers."""
    p = sub.add_parser(
        "chaos", help="inject faults into the databases the operator manages, and report recovery",
        description="Inject faults into SampleDBs selected by namespace and label selector, one at a time, "
                    "and report how long each database took to be Ready again. Refuses to run without a "
                    "scope; never touches an object of a SampleDB the scope does not name.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", help="the namespace of the SampleDBs")
    where.add_argument("-A", "--all-namespaces", action="store_true", help="SampleDBs of every namespace "
                       "(needs --selector)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("-l", "--selector", help="label selector of the SampleDBs to disturb (e.g. tier=staging)")
    which.add_argument("--all", action="store_true", help="every SampleDB of --namespace")
    p.add_argument("--seed", type=int, default=None, help="random seed: the same seed, scope and flags give the "
                   "same faults in the same order (default: a random seed, printed in the report)")
    p.add_argument("--duration", default="5m", help="how long to inject faults, e.g. 90s, 10m (default 5m)")
    p.add_argument("--rate", type=float, default=2.0, help="faults per minute (default 2)")
    p.add_argument("--faults", default=None, help="comma-separated fault kinds (default: every kind but "
                   "kill-leader): " + ", ".join(f.value for f in Fault) + "; delete-child = the four deletions")
    p.add_argument("--dry-run", action="store_true", help="list the planned faults; touch nothing")
    p.add_argument("--recovery-timeout", default="5m", help="how long to wait for a database to be Ready again "
                   "after a fault (default 5m)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="report format")
    p.add_argument("--lease-namespace", default=DEFAULT_LEASE_NAMESPACE,
                   help=f"the operator's namespace, for kill-leader (default {DEFAULT_LEASE_NAMESPACE})")
    p.add_argument("--lease-name", default=DEFAULT_LEASE_NAME,
                   help=f"the operator's leader-election Lease, for kill-leader (default {DEFAULT_LEASE_NAME})")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig file (default $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--context", default=None, help="kubeconfig context")
    p.set_defaults(handler=handle)


def options_from_args(args: argparse.Namespace) -> Options:
    """The run's options; ConfigError for a usage error."""
    try:
        scope = scope_from_flags(args.namespace, args.all_namespaces, args.selector, args.all)
        faults = parse_faults(args.faults)
        duration = parse_duration(args.duration)
        recovery_timeout = parse_duration(args.recovery_timeout)
    except (ScopeError, ValueError) as exc:
        raise ConfigError(f"chaos: {exc}") from None
    if args.rate <= 0:
        raise ConfigError("chaos: --rate must be a positive number of faults per minute")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    return Options(scope=scope, seed=seed, duration=duration, rate=args.rate, faults=faults, dry_run=args.dry_run,
                   recovery_timeout=recovery_timeout, lease=(args.lease_namespace, args.lease_name))


def handle(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    from sampledb_operator.observability.logging import configure_logging

    configure_logging("warning", "console")  # stderr; stdout is the report's
    from sampledb_operator.kube.errors import KubeError

    try:
        report = asyncio.run(_run(options, args.kubeconfig, args.context, progress=args.output == "text"))
    except KubeError as exc:
        print(f"sampledb-operator chaos: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("sampledb-operator chaos: interrupted (fill files were removed)", file=sys.stderr)
        return 130
    if args.output == "json":
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(report))
    if not report.databases:
        print(f"sampledb-operator chaos: no SampleDB in {options.scope.describe()}", file=sys.stderr)
    return summary_exit_code(report)


class _Clock:
    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _run(options: Options, kubeconfig: str | None, context: str | None, *, progress: bool) -> Report:
    from functools import partial

    from sampledb_operator.chaos.run import execute
    from sampledb_operator.kube.api import ResourceApi
    from sampledb_operator.kube.client import KubeClient
    from sampledb_operator.kube.exec import exec_in_pod
    from sampledb_operator.kube.resources import CONFIGMAP, JOB, LEASE, POD, PVC, SAMPLEDB, SERVICE, STATEFULSET

    client = await KubeClient.connect(kubeconfig, context=context)
    try:
        apis = {r.kind: ResourceApi(client, r) for r in (SAMPLEDB, POD, SERVICE, CONFIGMAP, STATEFULSET, JOB, PVC,
                                                         LEASE)}
        report: Report = await execute(options, apis, partial(exec_in_pod, client, timeout=EXEC_TIMEOUT), _Clock(),
                                       progress=_print_progress if progress else None)
        return report
    finally:
        await client.close()


def _print_progress(record: FaultRecord) -> None:
    where = f"{record.namespace}/{record.database}" if record.database else "operator"
    recovery = "" if record.recovered is None else \
        (f", Ready again after {record.recovery_seconds:.1f}s" if record.recovered else ", NOT recovered")
    print(f"[{record.index}] {record.fault} {where}: {record.outcome}{recovery} {record.detail}".rstrip(),
          file=sys.stderr, flush=True)
