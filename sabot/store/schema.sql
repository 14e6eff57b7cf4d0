-- The Sabot store. Every derived row carries the run ids and content hashes it came from.
-- Per-partition writes are delete-then-insert inside one transaction, so a re-materialization
-- replaces exactly its own rows. `manifest` and `scoreboard_manifest` are append-only.

CREATE TABLE IF NOT EXISTS corpus_imports (
    wave          VARCHAR NOT NULL,
    corpus_root   VARCHAR NOT NULL,
    imported_at   TIMESTAMP NOT NULL,
    files         INTEGER NOT NULL,
    missing       JSON NOT NULL,     -- expected files that are absent, by path
    not_run       JSON NOT NULL,     -- fault runs never made because their baseline failed
    registry_hash VARCHAR NOT NULL
);

-- The landing zone of an import: every corpus file verbatim, with its content hash.
CREATE TABLE IF NOT EXISTS corpus_files (
    wave      VARCHAR NOT NULL,
    kind      VARCHAR NOT NULL,      -- fault | baseline | cellverdict | judgeverdict | judgeverdict-variant1
    operator  VARCHAR NOT NULL,      -- '' for baselines
    probe     VARCHAR NOT NULL,
    rel_path  VARCHAR NOT NULL,
    sha256    VARCHAR NOT NULL,
    body      VARCHAR NOT NULL,
    PRIMARY KEY (wave, rel_path)
);

-- One row per run slot the run assets materialized; `status` = present | absent.
CREATE TABLE IF NOT EXISTS runs (
    wave               VARCHAR NOT NULL,
    operator           VARCHAR NOT NULL, -- '' for baselines
    probe              VARCHAR NOT NULL,
    status             VARCHAR NOT NULL,
    run_id             VARCHAR,
    framework          VARCHAR NOT NULL,
    config             VARCHAR NOT NULL,
    task               VARCHAR NOT NULL,
    seed               INTEGER NOT NULL,
    injection_seq      INTEGER,
    injection_verified BOOLEAN,
    task_passed        BOOLEAN,
    error              VARCHAR,
    source_path        VARCHAR NOT NULL,
    source_sha256      VARCHAR,
    record             JSON,             -- the full run record in the reference format
    dagster_run_id     VARCHAR NOT NULL,
    materialized_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (wave, operator, probe)
);
-- Live slots: which attempt (below) the slot holds; NULL for imported runs. Older stores gain it here.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS attempt INTEGER;
-- The record's reference-schema fields (sabot.trace.RESULT_KEYS), what the scorer reads: a live
-- record is mostly model exchanges no verdict reads (sabot.store.runs.read_scored_runs). NULL for
-- an imported run (its record is its landed file). Older stores gain it here, filled on opening.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS scored JSON;

-- Append-only: every finished attempt of a live run slot, whatever its outcome. The slot's scored
-- run (`runs` above) is its latest complete attempt, else its latest RUN_ERROR attempt, so a
-- failed attempt never replaces a good one. Ingested from the run root (sabot/runroot.py).
CREATE TABLE IF NOT EXISTS attempts (
    wave            VARCHAR NOT NULL,
    operator        VARCHAR NOT NULL, -- '' for baselines
    probe           VARCHAR NOT NULL,
    attempt         INTEGER NOT NULL, -- 1, 2, ... per slot, in start order
    outcome         VARCHAR NOT NULL, -- complete | run_error | stopped (cut off by a budget)
    run_id          VARCHAR NOT NULL,
    error           VARCHAR,
    runner_version  VARCHAR NOT NULL,
    endpoint        VARCHAR NOT NULL,
    pipeline_model  VARCHAR NOT NULL,
    downgrade_model VARCHAR NOT NULL,
    protocol        INTEGER NOT NULL,
    source_path     VARCHAR NOT NULL, -- the run file, relative to the run root
    source_sha256   VARCHAR NOT NULL,
    record          JSON NOT NULL,
    intent          JSON NOT NULL,
    dagster_run_id  VARCHAR NOT NULL,
    started_at      VARCHAR NOT NULL,
    finished_at     VARCHAR NOT NULL,
    ingested_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (wave, operator, probe, attempt)
);

-- An index of each stored run's events; their payloads are read from the run's record (`record_sql`),
-- never stored twice: a second copy of a large trace's payloads was most of an import's peak memory.
CREATE TABLE IF NOT EXISTS events (
    wave     VARCHAR NOT NULL,
    operator VARCHAR NOT NULL,
    probe    VARCHAR NOT NULL,
    run_id   VARCHAR NOT NULL,
    seq      INTEGER NOT NULL,
    agent    VARCHAR NOT NULL,
    kind     VARCHAR NOT NULL,
    PRIMARY KEY (wave, operator, probe, seq)
);
-- Older stores held the payloads here too; the record holds them all.
ALTER TABLE events DROP COLUMN IF EXISTS payload;

CREATE TABLE IF NOT EXISTS cell_verdicts (
    wave            VARCHAR NOT NULL,
    ruleset         VARCHAR NOT NULL,
    ruleset_hash    VARCHAR NOT NULL,
    operator        VARCHAR NOT NULL,
    probe           VARCHAR NOT NULL,
    framework       VARCHAR NOT NULL,
    config          VARCHAR NOT NULL,
    task            VARCHAR NOT NULL,
    seed            INTEGER NOT NULL,
    status          VARCHAR NOT NULL, -- valid | excluded | incomplete | carved_out
    excluded        VARCHAR,
    missing         JSON NOT NULL,
    mapping         BOOLEAN NOT NULL,
    flags           JSON NOT NULL,
    flags_noticed   BOOLEAN NOT NULL,
    flags_anchored  BOOLEAN NOT NULL,
    detected_hard   BOOLEAN NOT NULL,
    reacted         BOOLEAN NOT NULL,
    recovered       BOOLEAN NOT NULL,
    fault_run_id    VARCHAR,
    fault_sha256    VARCHAR,
    baseline_run_id VARCHAR,
    baseline_sha256 VARCHAR,
    dagster_run_id  VARCHAR NOT NULL,
    PRIMARY KEY (wave, ruleset, operator, probe)
);

CREATE TABLE IF NOT EXISTS acts (
    wave      VARCHAR NOT NULL,
    ruleset   VARCHAR NOT NULL,
    operator  VARCHAR NOT NULL,
    probe     VARCHAR NOT NULL,
    run_id    VARCHAR NOT NULL,
    seq       INTEGER NOT NULL,
    act       VARCHAR NOT NULL,
    component VARCHAR NOT NULL,
    reason    VARCHAR,
    surface   VARCHAR NOT NULL,
    counted   BOOLEAN NOT NULL,
    note      VARCHAR NOT NULL
);

-- Counts, never rates: a rate is always rendered from its numerator and denominator.
CREATE TABLE IF NOT EXISTS scoreboard (
    wave              VARCHAR NOT NULL,
    ruleset           VARCHAR NOT NULL,
    ruleset_hash      VARCHAR NOT NULL,
    table_name        VARCHAR NOT NULL, -- framework_config | operator | task_operator
    group_key         VARCHAR NOT NULL,
    valid             INTEGER NOT NULL,
    counts            JSON NOT NULL,
    cells_fingerprint VARCHAR NOT NULL,
    dagster_run_id    VARCHAR NOT NULL,
    PRIMARY KEY (wave, ruleset, table_name, group_key)
);

CREATE TABLE IF NOT EXISTS reports (
    wave           VARCHAR NOT NULL,
    ruleset        VARCHAR NOT NULL,
    format         VARCHAR NOT NULL,
    body           VARCHAR NOT NULL,
    sha256         VARCHAR NOT NULL,
    dagster_run_id VARCHAR NOT NULL,
    PRIMARY KEY (wave, ruleset, format)
);

CREATE SEQUENCE IF NOT EXISTS manifest_id;

-- Append-only: what every materialization wrote, and from what.
CREATE TABLE IF NOT EXISTS manifest (
    id             BIGINT DEFAULT nextval('manifest_id') PRIMARY KEY,
    written_at     TIMESTAMP NOT NULL,
    wave           VARCHAR NOT NULL,
    asset          VARCHAR NOT NULL,
    dagster_run_id VARCHAR NOT NULL,
    partitions     INTEGER NOT NULL,
    row_count      INTEGER NOT NULL,
    content_sha256 VARCHAR NOT NULL,
    inputs         JSON NOT NULL
);

-- Append-only: the cells behind every published scoreboard build, with their provenance.
CREATE TABLE IF NOT EXISTS scoreboard_manifest (
    dagster_run_id  VARCHAR NOT NULL,
    built_at        TIMESTAMP NOT NULL,
    wave            VARCHAR NOT NULL,
    ruleset         VARCHAR NOT NULL,
    ruleset_hash    VARCHAR NOT NULL,
    operator        VARCHAR NOT NULL,
    probe           VARCHAR NOT NULL,
    status          VARCHAR NOT NULL,
    excluded        VARCHAR,
    detected_hard   BOOLEAN NOT NULL,
    fault_run_id    VARCHAR,
    fault_sha256    VARCHAR,
    baseline_run_id VARCHAR,
    baseline_sha256 VARCHAR
);

-- What the scripted model decided and why, per live run. The scorer never reads this table; the
-- oracle tests compare the scorer's verdicts against it.
CREATE TABLE IF NOT EXISTS simulator_intent (
    wave     VARCHAR NOT NULL,
    operator VARCHAR NOT NULL,
    probe    VARCHAR NOT NULL,
    run_id   VARCHAR NOT NULL,
    intent   JSON NOT NULL,
    PRIMARY KEY (wave, operator, probe)
);

-- Soft tier: one judge verdict per cell and prompt variant (variant 1 only for the kappa subset).
-- Cached: scoring a wave reads these rows and calls no model.
CREATE TABLE IF NOT EXISTS judge_verdicts (
    wave               VARCHAR NOT NULL,
    operator           VARCHAR NOT NULL,
    probe              VARCHAR NOT NULL,
    prompt_variant     INTEGER NOT NULL,
    backend            VARCHAR NOT NULL,
    backend_version    VARCHAR,
    status             VARCHAR NOT NULL, -- ok | judge_excluded
    noticed            BOOLEAN,
    by_which_component VARCHAR,
    evidence_quote     VARCHAR,
    raw                VARCHAR NOT NULL,
    attempts           INTEGER,
    reason             VARCHAR,
    source             VARCHAR,
    dagster_run_id     VARCHAR NOT NULL,
    PRIMARY KEY (wave, operator, probe, prompt_variant)
);

-- Every model call a stored run record made (all of its attempts: a failed attempt was paid for
-- too), priced from the registered price table. Keyed by the record's content hash, so storing the
-- same record again (or replaying it) adds nothing, while a new attempt of a cell adds its own rows.
CREATE TABLE IF NOT EXISTS model_calls (
    wave              VARCHAR NOT NULL,
    operator          VARCHAR NOT NULL, -- '' for baselines
    probe             VARCHAR NOT NULL,
    run_id            VARCHAR NOT NULL,
    record_sha256     VARCHAR NOT NULL,
    attempt           INTEGER NOT NULL, -- the runner's attempt (1, or 2 after an infrastructure retry)
    n                 INTEGER NOT NULL, -- the call's order within its attempt
    model             VARCHAR,
    status            INTEGER,
    upstream_attempts INTEGER NOT NULL, -- tries the call policy made for this call
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    cached_tokens     BIGINT NOT NULL,
    reasoning_tokens  BIGINT NOT NULL,
    usage_reported    BOOLEAN NOT NULL,
    cost_usd          DOUBLE,           -- NULL: unpriced model or no usage reported, never 0
    price_table       VARCHAR NOT NULL,
    endpoint          VARCHAR,
    PRIMARY KEY (wave, operator, probe, record_sha256, attempt, n)
);

-- A project's registration as this store first saw it (`sabot registry lock DIR`, else its first
-- run): every later run and score of the project is checked against it, so a mapping edited
-- together with the lock file inside the project folder is refused (sabot.project_registry).
CREATE TABLE IF NOT EXISTS project_registrations (
    project      VARCHAR NOT NULL PRIMARY KEY,
    registration VARCHAR NOT NULL, -- sha256 over the project's registered files and their sha256
    files        JSON NOT NULL,
    pinned_at    TIMESTAMP NOT NULL,
    pinned_by    VARCHAR NOT NULL  -- 'registry lock' | 'first run'
);

-- The standard's registration as this store first saw each file: one row per registered data file.
-- Append-only: a new dated version is a new file and is pinned when first met; a pinned file whose
-- registered sha256 moved (an edited rule with an edited data/registry.lock.json) or that vanished
-- is refused by every asset, naming the lock (sabot.registry.pin_standard).
CREATE TABLE IF NOT EXISTS standard_registration (
    path       VARCHAR NOT NULL PRIMARY KEY, -- relative to data/, forward slashes
    sha256     VARCHAR NOT NULL,
    pinned_at  TIMESTAMP NOT NULL
);

-- Which Dagster board run settled which state of a wave (sabot_assets.settled): written after the
-- board run succeeded and was tagged with the same fingerprint, so a command with nothing to do
-- finds it here without creating the Dagster instance (about half a second of Dagster's storage
-- imports). A row never goes stale by itself: any later write to the wave changes the fingerprint.
CREATE TABLE IF NOT EXISTS settlements (
    wave           VARCHAR NOT NULL,
    fingerprint    VARCHAR NOT NULL,
    dagster_run_id VARCHAR NOT NULL,
    settled_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (wave, fingerprint)
);
