"""The capability matrix: complete, derived from code, and in sync with the docs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli.capabilities_cmd import app
from baton.providers.capabilities import (
    DECLARATIONS,
    ROWS,
    STATUSES,
    build_matrix,
    load_probes,
    merge_probes,
    render_json,
    render_markdown,
)
from baton.providers.registry import families

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "capabilities.md"
SEED = REPO.parent / "shared" / "seeds" / "000_7fc7f2a68899cc21.txt"


def seed_rows() -> list[str]:
    lines = SEED.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Capability\t"))
    rows = []
    for line in lines[start + 1 :]:
        if "\t" not in line:
            break
        rows.append(line.split("\t", 1)[0])
    return rows


def test_rows_are_exactly_the_seeds_capabilities() -> None:
    if not SEED.exists():
        pytest.skip("the shared seed is not beside the checkout")
    assert [r.title for r in ROWS] == seed_rows()


def test_every_cell_has_a_status_and_a_reason() -> None:
    matrix = build_matrix()
    assert list(matrix) == list(families())
    for family, cells in matrix.items():
        assert list(cells) == [r.key for r in ROWS], family
        for key, cell in cells.items():
            assert cell.status in STATUSES, (family, key)
            assert cell.reason.strip(), (family, key)


def test_declarations_only_name_known_rows() -> None:
    keys = {r.key for r in ROWS}
    for family, claims in DECLARATIONS.items():
        assert set(claims) <= keys, family


def test_cursor_answers_every_row_of_the_seed() -> None:
    cursor = build_matrix()["cursor"]
    unverified = [k for k, c in cursor.items() if c.status == "unverified"]
    assert unverified == ["files_diffs"], "only files/diffs lacks evidence (as in the seed)"
    assert cursor["steering"].status == "unsupported"
    assert cursor["usage"].status == "unsupported"
    assert cursor["checklist"].status == "implemented"
    assert cursor["child_activity"].status == "implemented"


def test_inferred_evidence_alone_is_unverified() -> None:
    qwen = build_matrix()["qwen"]
    observed = {"modes", "usage", "files_diffs", "cancellation"}  # test_qwen_baton.py
    assert {c.status for k, c in qwen.items() if k not in observed} == {"unverified"}
    assert qwen["usage"].status == "implemented" and "observed" in qwen["usage"].reason


def test_the_doc_is_generated_from_the_matrix() -> None:
    text = render_markdown()
    if os.environ.get("BATON_REGEN_GOLDEN") == "1":
        DOC.write_text(text, encoding="utf-8")
    assert DOC.exists(), "docs/capabilities.md is missing: BATON_REGEN_GOLDEN=1 regenerates it"
    assert DOC.read_text(encoding="utf-8") == text, (
        "docs/capabilities.md is stale: run `baton capabilities --markdown > docs/capabilities.md` "
        "or the tests with BATON_REGEN_GOLDEN=1"
    )


PROBE = {
    "agent": "cursor",
    "initialize": {
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False},
            "mcpCapabilities": {"http": True, "sse": True},
            "sessionCapabilities": {},
        },
    },
    "methods": {"session/fork": "method_not_found", "session/resume": "method_not_found"},
}


def test_probes_annotate_and_only_downgrade() -> None:
    base = build_matrix()
    merged = merge_probes(base, [PROBE, {"agent": "nobody"}, {"no": "agent"}])
    cursor = merged["cursor"]
    assert (
        cursor["discovery"].status == "unsupported"
        and "probe cursor: list=no" in cursor["discovery"].reason
    )
    assert cursor["session_continuity"].status == base["cursor"]["session_continuity"].status
    assert "probe cursor" in cursor["prompt_media"].reason
    assert cursor["fork_resume"].status == "unsupported"
    for family in merged:
        for key, cell in merged[family].items():
            before = STATUSES.index(base[family][key].status)
            assert cell.status == base[family][key].status or cell.status == "unsupported", before


def test_probe_files_may_hold_one_probe_a_list_or_an_object() -> None:
    assert load_probes(json.dumps(PROBE)) == [PROBE]
    assert load_probes(json.dumps([PROBE, 3])) == [PROBE]
    assert load_probes(json.dumps({"probes": [PROBE]})) == [PROBE]


def test_cli_prints_text_markdown_and_json(tmp_path: Path) -> None:
    runner = CliRunner()
    text = runner.invoke(app, ["--agent", "cursor"])
    assert text.exit_code == 0 and text.output.startswith("cursor\n")
    md = runner.invoke(app, ["--markdown"])
    assert md.exit_code == 0 and md.output == render_markdown()
    js = runner.invoke(app, ["--json", "--agent", "claude"])
    assert js.exit_code == 0 and json.loads(js.output) == json.loads(render_json(only="claude"))
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(PROBE), encoding="utf-8")
    merged = runner.invoke(app, ["--json", "--agent", "cursor", "--probe", str(probe)])
    assert json.loads(merged.output)["providers"]["cursor"]["discovery"]["status"] == "unsupported"


@pytest.mark.parametrize(
    "args",
    [["--agent", "nope"], ["--markdown", "--json"], ["--probe", "/nonexistent/probe.json"]],
)
def test_cli_usage_errors_are_one_line_and_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.output.startswith("baton: ") and result.output.count("\n") == 1
    assert "ConfigError" not in result.output


def test_cli_is_mounted_in_the_baton_app() -> None:
    try:
        from baton.cli.app import app as baton_app
    except (
        ImportError
    ) as exc:  # the top-level app is another module's; it may not be importable yet
        pytest.skip(f"baton.cli.app not importable: {exc}")
    result = CliRunner().invoke(baton_app, ["capabilities", "--agent", "opencode"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("opencode\n")
