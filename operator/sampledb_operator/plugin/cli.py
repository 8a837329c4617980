"""Command line of `kubectl sampledb` (the console script `kubectl-sampledb`): arguments, dispatch, exit codes.

Invariants: exit 0 on success, 1 when the command ran but failed (the object does not exist, the
API server refused, a backup or restore failed), 2 for a usage error; an error is one line on
stderr, never a traceback; --namespace/--context/--kubeconfig are accepted before or after the
command, as kubectl's own flags; arguments after `--` go to psql and to nothing else; Ctrl-C
ends `logs -f` with exit 0 (it is how a followed log ends) and any other command with exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from sampledb_operator.kube.errors import ApiError, KubeError, NotFound
from sampledb_operator.plugin import commands, lifecycle, pgbench, psql
from sampledb_operator.plugin.actions import ActionError
from sampledb_operator.plugin.session import Target
from sampledb_operator.plugin.version import __version__

PROG = "kubectl sampledb"
EXIT_FAILED, EXIT_USAGE = 1, 2
KUBECTL_ENV = "SAMPLEDB_KUBECTL"  # the kubectl command `psql` runs (words split as a shell would)
# Only a kubeconfig user with a legacy auth-provider needs it (kube/credentials.py); the plugin installed
# alone (hack/build-plugin.sh) leaves it out, as the extra `auth-provider` of its distribution.
LEGACY_AUTH_PACKAGE = "kubernetes_asyncio"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the process exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args_list:
        cut = args_list.index("--")
        args_list, extra = args_list[:cut], args_list[cut + 1:]
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:   # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if extra and args.command not in ("psql", "pgbench"):
        print(f"{PROG}: error: only psql and pgbench take arguments after --", file=sys.stderr)
        return EXIT_USAGE
    args.extra = extra
    _quiet_logging(args.verbose)
    target = Target(kubeconfig=args.kubeconfig, context=args.context, namespace=args.namespace)
    try:
        return int(args.handler(args, target))
    except NotFound as err:
        print(f"Error: {err.message or err} (namespace {target.resolved_namespace()})", file=sys.stderr)
    except ApiError as err:
        print(f"Error from server ({err.reason or err.status}): {err.message or err}", file=sys.stderr)
    except KubeError as err:
        print(f"Error: {err}{_missing_package_hint(err)}", file=sys.stderr)
    except ActionError as err:
        print(f"Error: {err}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
    return EXIT_FAILED


def _missing_package_hint(err: KubeError) -> str:
    """The remedy, when the kubeconfig needs a package the plugin installed alone leaves out."""
    cause = err.__cause__
    if isinstance(cause, ModuleNotFoundError) and (cause.name or "").partition(".")[0] == LEGACY_AUTH_PACKAGE:
        return (f" (a kubeconfig user with an auth-provider needs it; with the plugin installed alone by pipx:"
                f" pipx inject kubectl-sampledb {LEGACY_AUTH_PACKAGE})")
    return ""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Operate SampleDB PostgreSQL databases.")
    _connection_flags(parser, None)
    parser.add_argument("--version", action="version", version=f"kubectl-sampledb {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    _connection_flags(common, argparse.SUPPRESS)   # after the command too, without resetting the first
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", dest="command")

    p = sub.add_parser("status", parents=[common], help="one screen about a database: phase, conditions,"
                       " children, backups, versions, endpoint")
    p.add_argument("db", metavar="DB")
    p.set_defaults(handler=lambda a, t: _run(commands.status(t, a.db)))

    p = sub.add_parser("backup", parents=[common], help="take a backup now (a SampleDBBackup, reason manual)")
    p.add_argument("db", metavar="DB")
    p.add_argument("--name", help="the SampleDBBackup's name (default: DB-manual-<UTC yyyymmddhhmmss>)")
    _wait_flags(p, 600)
    p.set_defaults(handler=lambda a, t: _run(commands.backup(t, a.db, name=a.name, dry_run=a.dry_run, wait=a.wait,
                                                            wait_seconds=a.timeout)))

    p = sub.add_parser("restore", parents=[common], help="create a new database restored from a backup")
    p.add_argument("backup", metavar="BACKUP", help="a SampleDBBackup of this namespace")
    p.add_argument("--to", required=True, metavar="NEW", help="the new SampleDB's name")
    p.add_argument("--version", dest="pg_version", metavar="VERSION",
                   help="PostgreSQL MAJOR.MINOR of the new database (default: the backup's)")
    p.add_argument("--storage-size", metavar="SIZE", help="data volume size (default: the source database's)")
    _wait_flags(p, 1800)
    p.set_defaults(handler=lambda a, t: _run(commands.restore(
        t, a.backup, a.to, version=a.pg_version, storage_size=a.storage_size, dry_run=a.dry_run, wait=a.wait,
        wait_seconds=a.timeout)))

    _object_store_commands(sub, common)

    p = sub.add_parser("psql", parents=[common], help="psql on the database through kubectl port-forward"
                       " (arguments after -- go to psql)")
    p.add_argument("db", metavar="DB")
    p.add_argument("--kubectl", default=os.environ.get(KUBECTL_ENV, "kubectl"),
                   help=f"the kubectl command for the port-forward [env {KUBECTL_ENV}; default: kubectl]")
    p.add_argument("--psql", default="psql", help="the psql program (default: psql on PATH)")
    p.add_argument("--local-port", type=int, help="local port of the forward (default: a free one)")
    p.add_argument("--dry-run", action="store_true", help="print the commands instead of running them"
                   " (the password as a placeholder)")
    p.add_argument("--superuser", action="store_true", help="as the database's superuser (its Secret"
                   " <db>-superuser) instead of the application's role")
    p.set_defaults(handler=_psql)

    p = sub.add_parser("pgbench", parents=[common], help="pgbench in the primary's container, as the database's"
                       " user (arguments after -- go to pgbench, e.g. -- --client 8 --time 60)")
    p.add_argument("db", metavar="DB")
    p.add_argument("--initialize", type=_count(1), metavar="SCALE", dest="scale",
                   help="create pgbench's tables first, at this scale (pgbench --initialize --scale SCALE)")
    p.add_argument("--kubectl", default=os.environ.get(KUBECTL_ENV, "kubectl"),
                   help=f"the kubectl command for the exec [env {KUBECTL_ENV}; default: kubectl]")
    p.add_argument("--dry-run", action="store_true", help="print the commands instead of running them")
    p.set_defaults(handler=_pgbench)

    p = sub.add_parser("upgrade", parents=[common], help="ask for another PostgreSQL version (spec.version)")
    p.add_argument("db", metavar="DB")
    p.add_argument("version", metavar="VERSION", help='MAJOR.MINOR, e.g. "17.2"')
    p.add_argument("--image", help="the image to run it (needed when spec.image pins one)")
    p.add_argument("--default-image", action="store_true", help="drop spec.image: run postgres:VERSION")
    p.add_argument("--dry-run", action="store_true", help="print the patch instead of sending it")
    p.set_defaults(handler=lambda a, t: _run(commands.upgrade(t, a.db, a.version, image=a.image,
                                                             default_image=a.default_image, dry_run=a.dry_run)))

    _operating_commands(sub, common)
    _lifecycle_commands(sub, common)

    for name, paused, text in (("pause", True, "stop reconciling a database (spec.paused: true)"),
                               ("resume", False, "reconcile a paused database again (spec.paused: false)")):
        p = sub.add_parser(name, parents=[common], help=text)
        p.add_argument("db", metavar="DB")
        p.set_defaults(handler=lambda a, t, paused=paused: _run(commands.set_paused(t, a.db, paused)))
    return parser


def _connection_flags(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("-n", "--namespace", default=default, help="namespace (default: the kubeconfig context's)")
    parser.add_argument("--context", default=default, help="kubeconfig context (default: the current one)")
    parser.add_argument("--kubeconfig", default=default, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        default=argparse.SUPPRESS if default is argparse.SUPPRESS else False,
                        help="log the API client's progress to stderr")


def _object_store_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """recover and verify-recovery: the commands about a database's archive in its object store."""
    p = sub.add_parser("recover", parents=[common], help="create a new database recovered from another one's"
                       " archive in its object store, to a point in time")
    p.add_argument("source", metavar="SOURCE", help="the archived database's name (in the store)")
    p.add_argument("--to", required=True, metavar="NEW", help="the new SampleDB's name")
    p.add_argument("--time", help="recover the commits up to this time (RFC 3339, e.g. 2026-12-05T07:30:00Z)")
    p.add_argument("--restore-point", help="recover up to a pg_create_restore_point() name")
    p.add_argument("--lsn", help="recover up to this WAL position")
    p.add_argument("--store-from", metavar="DB", help="a SampleDB of this namespace whose spec.backup.objectStore"
                   " names the store (default: SOURCE itself, while it exists)")
    p.add_argument("--path", help="the source's path in the bucket (default: the store's path, else its namespace)")
    p.add_argument("--version", dest="pg_version", metavar="VERSION", help="PostgreSQL MAJOR.MINOR (default: the"
                   " store database's)")
    p.add_argument("--storage-size", metavar="SIZE", help="data volume size (default: the store database's)")
    _wait_flags(p, 3600)
    p.set_defaults(handler=lambda a, t: _run(commands.recover(
        t, a.source, a.to, store_from=a.store_from, time=a.time, restore_point=a.restore_point, lsn=a.lsn,
        version=a.pg_version, storage_size=a.storage_size, path=a.path, dry_run=a.dry_run, wait=a.wait,
        wait_seconds=a.timeout)))

    p = sub.add_parser("verify-recovery", parents=[common], help="prove now that the object store restores a"
                       " database: a restore point, recovered into a throw-away server, every table compared")
    p.add_argument("db", metavar="DB")
    _wait_flags(p, 3600)
    p.set_defaults(handler=lambda a, t: _run(commands.verify_recovery(t, a.db, dry_run=a.dry_run, wait=a.wait,
                                                                     wait_seconds=a.timeout)))


def _operating_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """switchover (alias promote), logs and report: moving the primary, reading PostgreSQL's log, a support
    archive."""
    p = sub.add_parser("switchover", aliases=["promote"], parents=[common], help="move the primary to a ready"
                       " standby (the annotation sampledb.io/switchover)")
    p.add_argument("db", metavar="DB")
    p.add_argument("--to", metavar="INSTANCE", help="the standby to promote, by pod name (e.g. DB-i1-0; default:"
                   " the ready standby with the least lag)")
    p.add_argument("--wait", action="store_true", help="wait until it is the primary, showing the progress")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                   help="how long --wait waits (default: 300)")
    p.add_argument("--dry-run", action="store_true", help="print the patch instead of sending it")
    p.set_defaults(handler=lambda a, t: _run(commands.switchover(t, a.db, to=a.to, dry_run=a.dry_run, wait=a.wait,
                                                                wait_seconds=a.timeout)))

    p = sub.add_parser("logs", parents=[common], help="the PostgreSQL container's log of the primary or of an"
                       " instance")
    p.add_argument("db", metavar="DB")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--instance", metavar="NAME", help="an instance, by pod name (e.g. DB-i1-0)")
    which.add_argument("--primary", action="store_true", help="the primary's log (the default)")
    p.add_argument("-p", "--previous", action="store_true", help="the log of the container's previous run")
    p.add_argument("--tail", type=_count(-1), default=-1, metavar="N", help="the last N lines (default: all)")
    p.add_argument("-f", "--follow", action="store_true", help="go on printing the log as it grows, until Ctrl-C")
    p.set_defaults(handler=_logs)

    p = sub.add_parser("report", parents=[common], help="write a support archive (.tar.gz) about a database,"
                       " Secrets by name and key names only, credentials redacted")
    p.add_argument("db", metavar="DB")
    p.add_argument("-o", "--output", metavar="FILE", help="the archive's file (default:"
                   " sampledb-report-<namespace>-DB-<UTC time>.tar.gz in the current directory)")
    p.add_argument("--log-lines", type=_count(1), default=500, metavar="N",
                   help="the last N lines of each instance's log (default: 500)")
    p.set_defaults(handler=lambda a, t: _run(commands.support_report(t, a.db, output=a.output,
                                                                    log_lines=a.log_lines)))


def _count(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least `minimum`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}")
        return value
    return parse


def _logs(args: argparse.Namespace, target: Target) -> int:
    """logs: Ctrl-C is how a followed log ends (exit 0, no message); a closed stdout (`| head`) ends it too."""
    try:
        return _run(commands.logs(target, args.db, instance=args.instance, previous=args.previous,
                                  tail=args.tail, follow=args.follow))
    except KeyboardInterrupt:
        if not args.follow:
            raise
        return 0
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)   # the interpreter's last flush of stdout must not fail
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _wait_flags(parser: argparse.ArgumentParser, timeout: int, *, dry_run: bool = True) -> None:
    parser.add_argument("--wait", action="store_true", help="wait until it has finished, showing its progress")
    parser.add_argument("--timeout", type=float, default=float(timeout), metavar="SECONDS",
                        help=f"how long --wait waits (default: {timeout})")
    if dry_run:
        parser.add_argument("--dry-run", action="store_true", help="print the object instead of creating it")


def _run(coro: Coroutine[Any, Any, int]) -> int:
    return asyncio.run(coro)


def _psql(args: argparse.Namespace, target: Target) -> int:
    kubectl = shlex.split(args.kubectl)
    plan, secret = asyncio.run(commands.psql_plan(target, args.db, kubectl=kubectl, psql_path=args.psql,
                                                  local_port=args.local_port, extra=args.extra,
                                                  superuser=args.superuser))
    if args.dry_run:
        sys.stdout.write(psql.describe(plan, secret))
        return 0
    for program, what in ((kubectl[0] if kubectl else "", "--kubectl"), (args.psql, "--psql")):
        if not program or shutil.which(program) is None:
            raise ActionError(f"{program or 'kubectl'} not found on PATH (install it, or name it with {what})")
    return psql.run(plan)


def _lifecycle_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """hibernate, wake, restart and reload (plugin/lifecycle.py)."""
    for name, on, text in (("hibernate", True, "stop every instance, keeping the volumes (sampledb.io/hibernation)"),
                           ("wake", False, "start the instances of a hibernated database again")):
        p = sub.add_parser(name, parents=[common], help=text)
        p.add_argument("db", metavar="DB")
        _wait_flags(p, 600, dry_run=False)
        p.set_defaults(handler=lambda a, t, on=on: _run(lifecycle.hibernate(t, a.db, on, wait=a.wait,
                                                                            wait_seconds=a.timeout)))
    p = sub.add_parser("restart", parents=[common], help="restart every instance (a new pod each:"
                       " the annotation sampledb.io/restart)")
    p.add_argument("db", metavar="DB")
    _wait_flags(p, 600, dry_run=False)
    p.set_defaults(handler=lambda a, t: _run(lifecycle.restart(t, a.db, wait=a.wait, wait_seconds=a.timeout)))
    p = sub.add_parser("reload", parents=[common], help="have every running instance read its configuration again"
                       " (pg_reload_conf() over its socket, through kubectl exec)")
    p.add_argument("db", metavar="DB")
    p.add_argument("--kubectl", default=os.environ.get(KUBECTL_ENV, "kubectl"),
                   help=f"the kubectl command for the exec [env {KUBECTL_ENV}; default: kubectl]")
    p.add_argument("--dry-run", action="store_true", help="print the commands instead of running them")
    p.set_defaults(handler=_reload)


def _reload(args: argparse.Namespace, target: Target) -> int:
    kubectl = shlex.split(args.kubectl)
    plan = asyncio.run(lifecycle.reload_plan_for(target, args.db, kubectl=kubectl))
    return _exec_plan(args.dry_run, kubectl, lifecycle.describe(plan), lambda: lifecycle.run_reload(plan))


def _pgbench(args: argparse.Namespace, target: Target) -> int:
    kubectl = shlex.split(args.kubectl)
    plan = asyncio.run(commands.pgbench_plan(target, args.db, kubectl=kubectl, scale=args.scale, extra=args.extra))
    return _exec_plan(args.dry_run, kubectl, pgbench.describe(plan), lambda: pgbench.run(plan))


def _exec_plan(dry_run: bool, kubectl: list[str], described: str, run: Callable[[], int]) -> int:
    """`kubectl exec` commands: printed (--dry-run), or run once kubectl is found."""
    if dry_run:
        sys.stdout.write(described)
        return 0
    if not kubectl or shutil.which(kubectl[0]) is None:
        raise ActionError(f"{kubectl[0] if kubectl else 'kubectl'} not found on PATH (install it, or name it with"
                          " --kubectl)")
    return run()


def _quiet_logging(verbose: bool) -> None:
    from sampledb_operator.observability.logging import configure_logging

    configure_logging("info" if verbose else "warning", "console")
