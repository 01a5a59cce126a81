"""Slurm with real accounting for the tests of teams mapped to Slurm accounts
(tests/e2e/test_slurm_accounts.py): sshare and sacct need slurmdbd, which
needs MariaDB.

Everything is private to one folder and stopped afterwards: a mariadbd with
its own datadir and socket there, listening on a free loopback port only
(never the system's service or its /run/mysqld), a slurmdbd on another
loopback port with its slurmdbd.conf beside the cluster's slurm.conf (where
Slurm's commands look for it), and the 2-node localhost cluster of
slurm_cluster.py with AccountingStorageType=accounting_storage/slurmdbd and
PriorityType=priority/multifactor. The cluster is registered and the
accounts the test asks for are added with `sacctmgr -i` before slurmctld
starts.

    python3 tests/e2e/slurmdbd_fixture.py DIR    # start, print the env, wait for Ctrl-C
"""
import contextlib
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import poll
from slurm_cluster import Cluster, _free_port, have_slurm, log_tails, serve, stop_daemons


def have_accounting():
    return have_slurm() and all(shutil.which(p) for p in
                                ("slurmdbd", "mariadbd", "mariadb-install-db", "mariadb",
                                 "sacctmgr", "sshare", "sacct"))


MISSING = ("slurmdbd and MariaDB are not installed (apt install slurmdbd mariadb-server;"
           " scripts/install-deps.sh)")


class Accounting:
    """mariadbd + slurmdbd for one cluster; accounts: {account: [users]}."""

    def __init__(self, root, accounts):
        self.root = Path(root)
        self.accounts = accounts
        self.db_port = _free_port()
        self.dbd_port = _free_port()
        self.db_pass = secrets.token_hex(12)
        self.pids = []
        self.cluster = None

    # slurm.conf's lines for a cluster that accounts through our slurmdbd
    def conf_set(self, munge_socket):
        return {
            "AccountingStorageType": "accounting_storage/slurmdbd",
            "AccountingStorageHost": "localhost",
            "AccountingStoragePort": str(self.dbd_port),
            # with munge, the socket of the munged that signs the requests to slurmdbd
            "AccountingStoragePass": str(munge_socket),
            "AccountingStorageEnforce": "associations",
            "JobAcctGatherType": "jobacct_gather/linux",
            "JobAcctGatherFrequency": "5",
            "PriorityType": "priority/multifactor",
            "PriorityDecayHalfLife": "1-0",
            "PriorityCalcPeriod": "1",
            "PriorityWeightFairshare": "10000",
        }

    def _log(self, name):
        return self.root / "log" / name

    def _start_mariadb(self):
        r = self.root
        data, run = r / "mysql", r / "mysqlrun"
        for d in (data, run, r / "log"):
            d.mkdir(parents=True, exist_ok=True)
        self.socket = run / "mysqld.sock"
        user = ["--user=root"] if os.getuid() == 0 else []
        p = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}",
                            "--auth-root-authentication-method=socket", "--skip-test-db",
                            *user], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed ({p.returncode}): {p.stderr[-2000:]}")
        pid_file = run / "mysqld.pid"
        subprocess.Popen(["mariadbd", "--no-defaults", f"--datadir={data}",
                          f"--socket={self.socket}", f"--pid-file={pid_file}",
                          "--bind-address=127.0.0.1", f"--port={self.db_port}",
                          "--skip-name-resolve", f"--log-error={self._log('mariadbd.log')}",
                          "--innodb-buffer-pool-size=16M", *user],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)

        def up():
            return subprocess.run(["mariadb", f"--socket={self.socket}", "-e", "SELECT 1"],
                                  capture_output=True).returncode == 0
        if not poll(up, 60, 0.2):
            raise RuntimeError("the private mariadbd did not come up:\n" + self.logs())
        self.pids.append(int(pid_file.read_text().strip()))
        sql = (f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{self.db_pass}';"
               "GRANT ALL ON *.* TO 'slurm'@'127.0.0.1';")
        p = subprocess.run(["mariadb", f"--socket={self.socket}", "-e", sql],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"cannot make the slurm database user: {p.stderr}")

    def _start_slurmdbd(self, cluster):
        r = self.root
        conf = cluster.conf.parent / "slurmdbd.conf"
        conf.write_text(f"""AuthType=auth/munge
AuthInfo=socket={cluster.root}/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={self.dbd_port}
SlurmUser={"root" if os.getuid() == 0 else os.environ.get("USER", "root")}
PidFile={r}/slurmdbd.pid
LogFile={self._log('slurmdbd.log')}
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.db_port}
StorageUser=slurm
StoragePass={self.db_pass}
StorageLoc=slurm_acct_db
""")
        os.chmod(conf, 0o600)  # slurmdbd refuses a conf others can read (it holds the password)
        p = subprocess.run(["slurmdbd"], env=cluster.env, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"slurmdbd failed ({p.returncode}): {p.stderr}\n{self.logs()}")

        def up():
            return self.sacctmgr(cluster, "list", "cluster", check=False).returncode == 0
        if not poll(up, 60, 0.3):
            raise RuntimeError("slurmdbd did not answer:\n" + self.logs())
        try:
            self.pids.append(int((r / "slurmdbd.pid").read_text().strip()))
        except (OSError, ValueError):
            pass

    def sacctmgr(self, cluster, *args, check=True):
        p = subprocess.run(["sacctmgr", "-i", *args], env=cluster.env, capture_output=True,
                           text=True, timeout=60)
        if check and p.returncode != 0:
            raise RuntimeError(f"sacctmgr {' '.join(args)} failed: {p.stdout}{p.stderr}")
        return p

    def before_ctld(self, cluster):
        """Cluster's hook: the databases up, the cluster and the accounts in them."""
        self._start_mariadb()
        self._start_slurmdbd(cluster)
        self.cluster = cluster  # slurmdbd answers: stop() removes the accounts through it
        self.sacctmgr(cluster, "add", "cluster", "tctest")
        for acct, users in self.accounts.items():
            self.sacctmgr(cluster, "add", "account", acct, "cluster=tctest",
                          f"description=trainctl test {acct}", "organization=trainctl")
            for u in users:
                self.sacctmgr(cluster, "add", "user", u, f"account={acct}", "cluster=tctest")

    def stop(self):
        if self.cluster:
            for acct in self.accounts:
                try:
                    self.sacctmgr(self.cluster, "delete", "account", acct, check=False)
                except subprocess.TimeoutExpired:
                    break  # slurmdbd is gone; the database goes with the test's folder
        stop_daemons(list(reversed(self.pids)))
        self.pids = []

    def logs(self):
        return log_tails(self.root / "log")


@contextlib.contextmanager
def accounting_cluster(root, accounts):
    """The localhost cluster with slurmdbd and MariaDB under root (a folder of the
    test's), accounts {account: [users]} added; yields (cluster, accounting);
    everything stopped afterwards, also when a start fails."""
    root = Path(root)
    acct = Accounting(root / "acct", accounts)
    (root / "acct").mkdir(parents=True, exist_ok=True)
    croot = root / "slurm"
    cluster = Cluster(croot, conf_set=acct.conf_set(croot / "munge" / "munge.socket"),
                      before_ctld=acct.before_ctld)
    try:
        cluster.start()
        yield cluster, acct
    finally:
        cluster.stop()
        acct.stop()


if __name__ == "__main__":
    where = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/trainctl-slurmdbd").resolve()
    user = "root" if os.getuid() == 0 else os.environ.get("USER", "root")
    with accounting_cluster(where, {"tc_demo": [user]}) as (c, a):
        serve(c)
