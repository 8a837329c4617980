"""`kubectl sampledb`: a kubectl plugin (the console script `kubectl-sampledb`) for SampleDB users.

Commands: status, backup, restore, recover, verify-recovery, psql, upgrade, pause, resume, switchover
(alias promote), logs, report (plugin/cli.py).

How it talks to the API server: with the package's own kube client (kube/client.py, kube/api.py),
not by running kubectl for every read and write. The reasons: the plugin then reads and writes the
same objects the operator does through the same Resource definitions, names (model/names.py) and
error tree (kube/errors.py: NotFound, Conflict and Invalid become precise messages, not parsed
kubectl stderr); it sends its writes with its own field manager (`kubectl-sampledb`); it needs no
kubectl of a particular version on PATH for anything but `psql`; and the commands are tested
against a real API server without a kubectl in between. It honours the same kubeconfig as kubectl
(--kubeconfig, $KUBECONFIG, ~/.kube/config, --context, the context's namespace, exec credential
plugins). Only `psql` runs kubectl, for `kubectl port-forward`: forwarding a port needs the API
server's streaming protocol, which the client does not speak.

Layout: cli.py (arguments, dispatch, exit codes), commands.py (each command's reads, write and
output), session.py (connection, namespace, the API verbs the commands use), report.py (reads
everything `status` shows), render.py (pure: text of a status screen), actions.py (pure: the
objects and patches backup/restore/upgrade/pause/resume send), psql.py (the port-forward and psql
command lines; runs them), instances.py (pure: the standby a switchover promotes, the pod `logs`
reads), podlog.py (pods/log, read or followed), support.py (pure: the support archive of `report`,
its redaction), support_read.py (the reads behind it), lifecycle.py (hibernate, wake, restart,
reload), version.py (the installed distribution's version: the operator's, or the plugin's own).

Installed alone: hack/build-plugin.sh builds the distribution `kubectl-sampledb` from this source
tree: this package and the modules it imports (no reconcilers, no PostgreSQL driver, no
certificates), with only the dependencies those need, as a wheel (pipx) and a krew archive.

Invariant: a database password is only ever put into psql's environment (PGPASSWORD): never into
an argv, the plugin's output, its logs, or a report's archive (which holds Secrets by name and key
names only).
"""
