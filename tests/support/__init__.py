"""What the tests share, one module per concern; a test module imports from here, never from another test module.

paths (REPO, TESTS, FIXTURES, CAPTURED, FACTS) · prerequisites (fail under CI, skip elsewhere) · facts (the
parser-case runner) · testbed, nshost (sshd hosts in namespaces) · slurmbed (Slurm on loopback) · kubekit (a
kubectl into bed hosts) · hostkit (healthy and faulty H100 hosts) · bedhosts (the bed's hosts as diagnose sees
them) · stagerun (one benchmark stage run) · playbooks · cli (a fresh ``diagnose`` process) · nightly, fleet,
traces (documents built from captured runs).
"""
