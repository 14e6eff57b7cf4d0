"""A bundle says who made it only as far as the verifier can check: its manifest is signed with the
exporter's Ed25519 key (kept outside SABOT_VAR); `verify --key PUB` or `--expect SHA256` tells the
exported bundle from one forged without the key (a trace edited, its hash in seals.json and the
manifest rewritten: still consistent), and without either `verify` says "not authenticated". A bundle
whose rules differ from the verifier's registered standard is named file by file.

One live slice of the demo wave (a baseline and one fault run) is scored and exported once."""

import hashlib
import json
import os
import shutil
import stat
import subprocess

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from sabot import signing
from sabot_assets.bundle_trust import MANIFEST, NotAuthenticated, authenticate
from sabot_assets.definitions import build_definitions
from sabot_assets.evidence_bundle import export_bundle, verify_bundle
from sabot_assets.wave_jobs import Slice, run_wave
from tests.conftest import PROJECT

SLICE = Slice(frameworks=("langgraph",), configs=("default",), tasks=("T1",), operators=("O1",))
TRACE = "harness/runs/demo/langgraph/default/T1/O1/seed11/runresult.json"


@pytest.fixture(scope="module")
def exported(registry, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("signed")
    (tmp / "dagster").mkdir()
    (tmp / "store").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp / "dagster")) as instance:
        defs = build_definitions(registry, DuckDBResource(database=str(tmp / "store" / "sabot.duckdb")))
        assert run_wave(registry, defs, instance, "demo", selection=SLICE).tally.ran == 2
    key = tmp / "keys" / "signing.key"
    done = export_bundle(
        registry, tmp / "store" / "sabot.duckdb", "demo", tmp / "bundle", signer=signing.load_or_create(key)
    )
    return tmp / "bundle", key, done


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def forged(bundle, tmp_path):
    """What anyone can do without the key: edit one trace, put its new hash wherever the old one stood
    (seals.json, the published verdicts), and rewrite the manifest."""
    copy = tmp_path / "forged"
    shutil.copytree(bundle, copy)
    before = sha(copy / TRACE)
    trace = json.loads((copy / TRACE).read_text())
    trace["note"] = "edited after export"  # kept by the record, read by no rule: every number still re-derives
    (copy / TRACE).write_text(json.dumps(trace))
    after = sha(copy / TRACE)
    files = [p for p in copy.rglob("*") if p.is_file() and p.name not in (MANIFEST, "manifest.sig")]
    for path in files:
        path.write_text(path.read_text().replace(before, after))
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest["files"] = {p.relative_to(copy).as_posix(): sha(p) for p in files}
    (copy / MANIFEST).write_text(json.dumps(manifest))
    return copy


def test_the_key_is_created_owner_only_and_the_bundle_is_signed_by_it(exported):
    bundle, key, done = exported
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and signing.public_path(key).is_file()
    fingerprint = signing.fingerprint(signing.load_public(signing.public_path(key)))
    assert done.signed_by == fingerprint
    trust = authenticate(bundle, key=signing.public_path(key), expect=done.manifest_sha256)
    assert trust.authenticated_by == f"manifest sha256 {done.manifest_sha256} as expected; signed by {fingerprint}"
    assert trust.rule_differences == [] and trust.strict_failure() is None


def test_a_bundle_forged_without_the_key_is_consistent_but_fails_key_and_expect_naming_the_manifest(exported, tmp_path):
    bundle, key, done = exported
    copy = forged(bundle, tmp_path)
    assert verify_bundle(copy).runs == 2  # consistent: the manifest alone proves nothing about who wrote it
    unauthenticated = authenticate(copy)
    assert unauthenticated.authenticated_by is None and unauthenticated.lines()[0].startswith(
        "consistent, not authenticated"
    )
    with pytest.raises(
        NotAuthenticated,
        match=rf"^bundle {MANIFEST}: its signature does not verify under {signing.fingerprint(signing.load_public(signing.public_path(key)))}",
    ):
        authenticate(copy, key=signing.public_path(key))
    with pytest.raises(
        NotAuthenticated, match=rf"^bundle {MANIFEST}: sha256 [0-9a-f]{{64}}, not the expected {done.manifest_sha256}"
    ):
        authenticate(copy, expect=done.manifest_sha256)
    from sabot_assets.bundle_trust import sign_bundle  # a forger signs with a key of their own: named, never trusted

    theirs = sign_bundle(copy, signing.load_or_create(tmp_path / "forger.key"))
    assert theirs in authenticate(copy).lines()[0] and "anyone can make" in authenticate(copy).lines()[0]
    with pytest.raises(NotAuthenticated, match="does not verify under"):
        authenticate(copy, key=signing.public_path(key))


def test_a_bundle_scored_under_other_rules_is_named_file_by_file(exported, tmp_path):
    bundle, _, _ = exported
    copy = tmp_path / "other-rules"
    shutil.copytree(bundle, copy)
    rule = copy / "rules" / "standard" / "anchors.v0.2.0.json"
    rule.write_text(rule.read_text().replace('"no issues"', '"no issue"', 1))
    lock = json.loads((copy / "rules" / "registry.lock.json").read_text())
    lock["files"]["standard/anchors.v0.2.0.json"] = sha(rule)
    (copy / "rules" / "registry.lock.json").write_text(json.dumps(lock, indent=1))
    differences = authenticate(copy).rule_differences
    assert [line.split(":")[0] for line in differences] == ["registry.lock.json", "standard/anchors.v0.2.0.json"], (
        differences
    )
    assert all(": differs (bundle sha256 " in line for line in differences)


def test_the_cli_says_not_authenticated_fails_under_strict_and_says_signed_by_with_the_key(exported, tmp_path):
    bundle, key, _ = exported
    env = {**os.environ, "SABOT_VAR": str(tmp_path / "no-store")}
    sabot = str(PROJECT / ".venv/bin/sabot")

    def verify(*flags):
        return subprocess.run(
            [sabot, "verify", str(bundle), *flags], env=env, capture_output=True, text=True, timeout=600
        )

    plain, strict, keyed = verify(), verify("--strict"), verify("--key", str(signing.public_path(key)), "--strict")
    assert plain.returncode == 0 and "consistent, not authenticated" in plain.stdout, plain.stderr
    assert strict.returncode == 1 and "not authenticated (--strict)" in strict.stderr
    assert (
        keyed.returncode == 0
        and f"authenticated: signed by {signing.fingerprint(signing.load_public(signing.public_path(key)))}"
        in keyed.stdout
    )
    assert "rules: the registered standard's, file for file" in keyed.stdout


def test_a_signing_key_under_sabot_var_is_refused(tmp_path):
    with pytest.raises(signing.SigningError, match="must live outside SABOT_VAR"):
        signing.key_path(tmp_path / "var" / "signing.key", tmp_path / "var")
    loose = tmp_path / "loose.key"
    signing.load_or_create(loose)
    loose.chmod(0o644)
    with pytest.raises(signing.SigningError, match="readable by others"):
        signing.load_or_create(loose)


def test_a_fifo_in_place_of_the_manifest_is_refused_without_waiting_for_a_writer(tmp_path):
    import threading

    from sabot_assets.evidence import VerifyError

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    os.mkfifo(bundle / MANIFEST)
    outcomes = []

    def check():
        for step in (lambda: authenticate(bundle), lambda: verify_bundle(bundle)):
            try:
                step()
            except (NotAuthenticated, VerifyError) as exc:
                outcomes.append(str(exc))

    checking = threading.Thread(target=check, daemon=True)
    checking.start()
    checking.join(30)
    assert not checking.is_alive(), "the read waited on the FIFO"
    assert len(outcomes) == 2 and all(
        f"bundle {MANIFEST}: unreadable" in o and "not a regular file" in o for o in outcomes
    ), outcomes
