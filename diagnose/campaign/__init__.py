"""Acceptance as a campaign: evidence per host and phase gathered over many runs, until a cluster that is
never whole at once can be signed off.

* ``phases`` — the phases, which results evidence each, what a change voids (pure);
* ``identity`` — a host's parts and versions from its facts, and what changed between two (pure);
* ``evidence`` — what one results document proves about each host and the cluster (pure);
* ``ledger`` — the campaign's tables in the history database: recording a run, voiding, exclusions;
* ``standing`` — accepted, pending, failed, repaired or excluded per host, and the cluster's phases (pure);
* ``plan`` — what ``campaign next`` runs, on which hosts, in which batches (pure);
* ``playbook`` — a playbook cut down to the phases a step runs;
* ``reference`` — the cluster's own figures as variables of later runs;
* ``soak`` — the soak's rounds in time, resumable from the ledger (pure);
* ``certificate`` — the certificate's content from the ledger (pure).

This package imports nothing from it at the top, so the engine can take ``identity`` without the ledger.
"""
