"""The history database's schema, one script per version, oldest first.

A later change appends a script here; a shipped one is never edited: a database records the version it
reached, and :func:`diagnose.history.storage.open_db` runs the scripts it has not yet seen, each in one
transaction with its version bump.
"""

MIGRATIONS: tuple[str, ...] = (
    # 1: the first schema. A later change appends a script here; never edit a shipped one.
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        started TEXT NOT NULL,
        started_ts REAL NOT NULL,
        finished TEXT,
        verdict TEXT NOT NULL,
        inventory TEXT NOT NULL,
        playbook TEXT NOT NULL,
        profile TEXT,
        tool_version TEXT,
        run_dir TEXT,
        counts TEXT NOT NULL
    );
    CREATE INDEX runs_series ON runs (inventory, playbook, started_ts);
    CREATE TABLE hosts (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        address TEXT,
        reachable INTEGER NOT NULL,
        error TEXT,
        environment TEXT NOT NULL,
        PRIMARY KEY (run_id, name)
    );
    CREATE TABLE checks (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        check_id TEXT NOT NULL,
        host TEXT NOT NULL,
        checklist TEXT,
        status TEXT NOT NULL,
        observed TEXT,
        expected TEXT,
        message TEXT
    );
    CREATE INDEX checks_run ON checks (run_id);
    CREATE INDEX checks_trend ON checks (check_id, host);
    CREATE TABLE benchmarks (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        collective TEXT NOT NULL,
        tool TEXT,
        backend TEXT,
        nodes INTEGER,
        ranks INTEGER,
        inter_node TEXT,
        status TEXT,
        expected_busbw_gbps REAL,
        message TEXT,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE bench_rows (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        time_us REAL,
        algbw_gbps REAL,
        busbw_gbps REAL,
        wrong INTEGER,
        FOREIGN KEY (run_id, seq) REFERENCES benchmarks (run_id, seq) ON DELETE CASCADE
    );
    CREATE INDEX bench_rows_run ON bench_rows (run_id, seq);
    CREATE TABLE baselines (
        inventory TEXT NOT NULL,
        playbook TEXT NOT NULL,
        run_id TEXT NOT NULL REFERENCES runs (id),
        pinned TEXT NOT NULL,
        PRIMARY KEY (inventory, playbook)
    );
    """,
    # 2: when each host was last covered by a run of a series (diagnose.history.coverage). Not tied to
    # runs: retention forgets old runs, a rotation must still know a node was covered eight nights ago.
    """
    CREATE TABLE coverage (
        inventory TEXT NOT NULL,
        playbook TEXT NOT NULL,
        host TEXT NOT NULL,
        run_id TEXT NOT NULL,
        covered TEXT NOT NULL,
        covered_ts REAL NOT NULL,
        PRIMARY KEY (inventory, playbook, host)
    );
    """,
    # 3: the run's regressions apart from its counts, which follow the tally (diagnose.history.counts).
    # NULL: recorded before, when counts took each benchmark twice and regressions as FAILs.
    """
    ALTER TABLE runs ADD COLUMN regressions INTEGER;
    """,
    # 4: the watch list (diagnose.history.watch_store): one number per component, metric and night, in
    # integers where it can (a night is a recorded run with readings; metric names once). A pruned run takes
    # its night's readings with it (the cascade to watch_runs, then the trigger).
    """
    CREATE TABLE watch_runs (
        run_id TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
        night INTEGER NOT NULL UNIQUE
    );
    CREATE TABLE watch_metrics (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE
    );
    CREATE TABLE watch_components (
        id INTEGER PRIMARY KEY,
        component TEXT NOT NULL UNIQUE,
        model TEXT NOT NULL,
        host TEXT NOT NULL,
        slot TEXT NOT NULL,
        first_night INTEGER NOT NULL,
        last_night INTEGER NOT NULL
    );
    CREATE INDEX watch_components_slot ON watch_components (slot);
    CREATE TABLE watch_readings (
        component INTEGER NOT NULL,
        metric INTEGER NOT NULL,
        night INTEGER NOT NULL,
        value REAL NOT NULL,
        lim REAL,
        PRIMARY KEY (component, metric, night)
    ) WITHOUT ROWID;
    CREATE TRIGGER watch_night_forgotten AFTER DELETE ON watch_runs BEGIN
        DELETE FROM watch_readings WHERE night = old.night;
    END;
    """,
    # 5: acceptance campaigns (diagnose.campaign.ledger): per campaign, host and phase the latest evidence
    # with the identity it was measured on (deduplicated snapshots), the events that failed, voided or
    # repaired it, the cluster's phases, burn-in hours per GPU, the cluster's own reference figures and the
    # soak's rounds. Not tied to runs: retention may forget a run, a sign-off must keep its evidence.
    """
    CREATE TABLE campaigns (
        name TEXT PRIMARY KEY,
        created TEXT NOT NULL,
        playbook TEXT,
        inventory TEXT,
        needs TEXT NOT NULL,
        settings TEXT NOT NULL
    );
    CREATE TABLE campaign_runs (
        campaign TEXT NOT NULL REFERENCES campaigns (name) ON DELETE CASCADE,
        run_id TEXT NOT NULL,
        started TEXT NOT NULL,
        verdict TEXT NOT NULL,
        hosts INTEGER NOT NULL,
        kind TEXT NOT NULL,
        PRIMARY KEY (campaign, run_id)
    );
    CREATE TABLE campaign_hosts (
        campaign TEXT NOT NULL REFERENCES campaigns (name) ON DELETE CASCADE,
        host TEXT NOT NULL,
        identity INTEGER,
        excluded TEXT,
        repaired TEXT,
        PRIMARY KEY (campaign, host)
    ) WITHOUT ROWID;
    CREATE TABLE campaign_identities (
        id INTEGER PRIMARY KEY,
        campaign TEXT NOT NULL,
        digest TEXT NOT NULL,
        identity TEXT NOT NULL,
        UNIQUE (campaign, digest)
    );
    CREATE TABLE campaign_evidence (
        campaign TEXT NOT NULL REFERENCES campaigns (name) ON DELETE CASCADE,
        host TEXT NOT NULL,
        phase TEXT NOT NULL,
        run_id TEXT NOT NULL,
        at TEXT NOT NULL,
        verdict TEXT NOT NULL,
        detail TEXT NOT NULL,
        identity INTEGER,
        voided INTEGER,
        PRIMARY KEY (campaign, host, phase)
    ) WITHOUT ROWID;
    CREATE TABLE campaign_cluster (
        campaign TEXT NOT NULL REFERENCES campaigns (name) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        run_id TEXT NOT NULL,
        at TEXT NOT NULL,
        verdict TEXT NOT NULL,
        hosts TEXT NOT NULL,
        detail TEXT NOT NULL,
        voided INTEGER,
        PRIMARY KEY (campaign, phase)
    ) WITHOUT ROWID;
    CREATE TABLE campaign_events (
        id INTEGER PRIMARY KEY,
        campaign TEXT NOT NULL REFERENCES campaigns (name) ON DELETE CASCADE,
        at TEXT NOT NULL,
        host TEXT,
        kind TEXT NOT NULL,
        run_id TEXT,
        text TEXT NOT NULL,
        phases TEXT
    );
    CREATE INDEX campaign_events_campaign ON campaign_events (campaign, id);
    CREATE TABLE campaign_burnin (
        campaign TEXT NOT NULL REFERENCES campaigns (name) ON DELETE CASCADE,
        host TEXT NOT NULL,
        gpu TEXT NOT NULL,
        part TEXT,
        hours REAL NOT NULL,
        PRIMARY KEY (campaign, host, gpu)
    ) WITHOUT ROWID;
    CREATE TABLE campaign_figures (
        campaign TEXT NOT NULL REFERENCES campaigns (name) ON DELETE CASCADE,
        key TEXT NOT NULL,
        source TEXT NOT NULL,
        value REAL NOT NULL,
        run_id TEXT NOT NULL,
        at TEXT NOT NULL,
        PRIMARY KEY (campaign, key, source)
    ) WITHOUT ROWID;
    CREATE TABLE campaign_reference (
        campaign TEXT NOT NULL REFERENCES campaigns (name) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value REAL NOT NULL,
        sources INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        at TEXT NOT NULL,
        PRIMARY KEY (campaign, key)
    ) WITHOUT ROWID;
    CREATE TABLE campaign_soak (
        campaign TEXT NOT NULL REFERENCES campaigns (name) ON DELETE CASCADE,
        round INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        started TEXT NOT NULL,
        verdict TEXT NOT NULL,
        hosts TEXT NOT NULL,
        PRIMARY KEY (campaign, round)
    ) WITHOUT ROWID;
    """,
    # 6: each stage's seconds as results.json's run.stages holds them (diagnose.render.stage_times), so that
    # ``--check`` estimates a run from this machine's own past runs (diagnose.history.durations). NULL:
    # recorded before; such a run still gives its wall time.
    """
    ALTER TABLE runs ADD COLUMN stages TEXT;
    """,
)
