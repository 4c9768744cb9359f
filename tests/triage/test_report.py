"""The postmortem report: golden HTML and Markdown, self-containment, charts, and a real browser.

Golden files pin the bytes so a change to the report is seen in review, not discovered
in a ticket; `REGEN_GOLDEN=1 pytest tests/triage/test_report.py` rewrites them (and the
screenshot in docs/) after an intended change. The browser test opens the HTML in a real
headless Chromium (Debian package `chromium`): parsing proves the markup is well formed,
only a browser proves the charts take up space on the page. Without Chromium it skips
loudly; under CI=true it fails, since CI must run it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signals.fixture import Fixture, load_fixture
from signals.frame import FloatArray
from triage.core.graph import TriageGraph
from triage.report.charts import Band, LineChart, Marker, downsample, nice_ticks, render_svg, time_ticks
from triage.report.report import Report, build_report, chart_signals, chart_table, render_report

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
SCREENSHOT = ROOT / "docs" / "report-screenshot.png"
FIXTURES = ("kv-pressure-long-context", "replica-down-queue-growth")
GENERATED_AT = 1_800_000_000.0  # 2027-01-15T08:00:00Z, fixed so the goldens are stable
EVERY = 60.0
REGEN = os.environ.get("REGEN_GOLDEN") == "1"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@pytest.fixture(scope="module")
def fixtures() -> dict[str, Fixture]:
    return {name: load_fixture(str(ROOT / "fixtures" / f"{name}.yaml")) for name in FIXTURES}


@pytest.fixture(scope="module")
def reports(graph: TriageGraph, fixtures: dict[str, Fixture]) -> dict[str, Report]:
    return {name: build_report(graph, f, EVERY, GENERATED_AT) for name, f in fixtures.items()}


def check_golden(path: Path, text: str) -> None:
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing; run with REGEN_GOLDEN=1 to write it"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        old, new = expected.splitlines(), text.splitlines()
        first = next(
            (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new))
        )
        pytest.fail(
            f"{path.name} differs from the golden file at line {first + 1}:\n"
            f"  golden: {old[first][:200] if first < len(old) else '<end>'}\n"
            f"  now:    {new[first][:200] if first < len(new) else '<end>'}\n"
            "rerun with REGEN_GOLDEN=1 if the change is intended"
        )


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("fmt", ["html", "md"])
def test_golden(reports: dict[str, Report], name: str, fmt: str) -> None:
    text = render_report(reports[name], "html" if fmt == "html" else "md", None)
    check_golden(GOLDEN / f"report-{name}.{fmt}", text)


class Structure(HTMLParser):
    """Checks nesting as it parses: every non-void tag closed, in order; collects src/href and charts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.links: list[str] = []
        self.charts: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._attrs(tag, attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._attrs(tag, attrs)

    def _attrs(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        found = dict(attrs)
        for key in ("src", "href", "xlink:href", "action", "poster", "data"):
            if found.get(key):
                self.links.append(found[key] or "")
        if tag == "svg" and "chart" in (found.get("class") or "").split():
            self.charts.append(found.get("data-signal") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> at line {self.getpos()[0]} closes {self.stack[-1:] or 'nothing'}")
            if tag in self.stack:
                while self.stack.pop() != tag:
                    pass
            return
        self.stack.pop()


def parse(html: str) -> Structure:
    parser = Structure()
    parser.feed(html)
    parser.close()
    return parser


@pytest.mark.parametrize("name", FIXTURES)
def test_html_is_self_contained_and_well_formed(reports: dict[str, Report], name: str) -> None:
    html = render_report(reports[name], "html", None)
    found = parse(html)
    assert found.problems == []
    assert found.stack == [], f"never closed: {found.stack}"
    assert not [link for link in found.links if re.match(r"\s*(https?:|//)", link, re.IGNORECASE)]
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//)""", html, re.IGNORECASE)
    assert {"script", "link", "img", "iframe", "object"}.isdisjoint(found.tags)
    assert "@import" not in html and "url(" not in html
    assert len(html.encode()) < 3_000_000


@pytest.mark.parametrize("name", FIXTURES)
def test_one_chart_per_evidence_signal_of_the_top_cause(
    reports: dict[str, Report], fixtures: dict[str, Fixture], name: str
) -> None:
    report = reports[name]
    top, expect = report.diagnosis.top, fixtures[name].expect
    assert top is not None and expect is not None and top.cause == expect.cause
    assert report.expected_met is True
    expected = list(dict.fromkeys(e.signal for e in top.evidence if e.holds and e.signal))
    assert chart_signals(report.diagnosis, fixtures[name].frame) == expected
    html = render_report(report, "html", None)
    assert parse(html).charts == expected
    assert html.count('<svg class="chart"') == len(expected)
    md = render_report(report, "md", None)
    assert md.count('<svg class="chart"') == len(expected)


@pytest.mark.parametrize("name", FIXTURES)
def test_summary_agrees_with_the_replay(reports: dict[str, Report], name: str) -> None:
    report = reports[name]
    s = report.summary
    top = report.diagnosis.top
    assert top is not None and s.final_top == top.cause
    assert report.timeline[-1].at == report.at
    assert s.first_seen is not None and s.settled is not None and s.first_seen <= s.settled <= report.at
    first_right = next(row.at for row in report.timeline if row.right)
    assert first_right == s.first_seen
    assert all(len(row.causes) <= 3 for row in report.timeline)
    md = render_report(report, "md", None)
    assert f"| {len(report.timeline)} diagnoses every 1m" in md


def test_markdown_svg_sits_in_one_html_block(reports: dict[str, Report]) -> None:
    """A blank line inside would end the HTML block and spill SVG source into the page."""
    md = render_report(reports["kv-pressure-long-context"], "md", None)
    blocks = re.findall(r"\n\n<div>\n(.*?)\n</div>\n\n", md, flags=re.DOTALL)
    assert len(blocks) == len(reports["kv-pressure-long-context"].charts)
    for block in blocks:
        assert "\n" not in block and block.startswith('<svg class="chart"') and block.endswith("</svg>")
    assert md.count("| time | | fleet (") == len(blocks)


def test_text_is_escaped_in_both_formats(reports: dict[str, Report]) -> None:
    evil = '<script>alert("x")</script> | & co'
    report = dataclasses.replace(reports["kv-pressure-long-context"], description=evil, name="a<b>")
    html = render_report(report, "html", None)
    assert "<script>" not in html and "&lt;script&gt;" in html and "a&lt;b&gt;" in html
    md = render_report(report, "md", None)
    assert "<script>" not in md and "&lt;script&gt;" in md
    md = render_report(dataclasses.replace(report, name="evil\x1b[2J\u202e"), "md", None)
    assert "\x1b" not in md and "\u202e" not in md
    assert "# Postmortem: evil\\\\x1b\\[2J\\\\u202e" in md and "`evil\\x1b[2J\\u202e`" in md


def test_rendering_is_deterministic_and_clock_free(reports: dict[str, Report]) -> None:
    report = reports["replica-down-queue-growth"]
    assert render_report(report, "html", None) == render_report(report, "html", None)
    later = dataclasses.replace(report, generated_at=GENERATED_AT + 3600)
    html = render_report(later, "html", None)
    assert "2027-01-15T09:00:00Z" in html and "2027-01-15T08:00:00Z" not in html


def test_user_templates_override_and_extend(reports: dict[str, Report], tmp_path: Path) -> None:
    report = reports["kv-pressure-long-context"]
    (tmp_path / "report.html.j2").write_text(
        '{% extends "builtin/report.html.j2" %}'
        "{% block footer %}<footer>ACME incident review · {{ generated_at }}</footer>{% endblock %}"
    )
    (tmp_path / "report.md.j2").write_text("{{ r.name }}: {{ d.top.cause }} <{{ r.description }}>\n")
    html = render_report(report, "html", tmp_path)
    assert "<footer>ACME incident review · 2027-01-15T08:00:00Z</footer>" in html
    assert '<svg class="chart"' in html
    md = render_report(report, "md", tmp_path)
    assert md.startswith("kv-pressure-long-context: kv_pressure <Contexts grew")
    strict = tmp_path / "strict"
    strict.mkdir()
    (strict / "report.md.j2").write_text("{{ no_such_thing }}")
    with pytest.raises(jinja2.UndefinedError):
        render_report(report, "md", strict)
    with pytest.raises(ValueError, match="format"):
        render_report(report, "pdf", None)  # type: ignore[arg-type]


def test_build_report_rejects_a_bad_step(graph: TriageGraph, fixtures: dict[str, Fixture]) -> None:
    with pytest.raises(ValueError, match="every"):
        build_report(graph, fixtures["kv-pressure-long-context"], 0.0, GENERATED_AT)


def test_chart_table_reads_the_baseline_and_every_marker(reports: dict[str, Report]) -> None:
    chart = reports["kv-pressure-long-context"].charts[0]
    rows = chart_table(chart)
    # the data begins at 13:00; its first five minutes are warm-up (rates filling), not baseline
    assert rows[0].label.startswith("baseline: median from 13:05")
    labels = {row.label for row in rows}
    assert {"onset", "diagnosis right", "diagnosed"} <= labels
    row = next(r for r in rows if r.label == "diagnosed")
    assert row.low is not None and row.high is not None and row.median is not None
    assert row.low <= row.median <= row.high


# --- charts -------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=1, max_value=900),
    st.integers(min_value=1, max_value=60),
    st.integers(min_value=0, max_value=2**31),
)
def test_downsample_keeps_every_extreme_in_time_order(rows: int, n: int, buckets: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    times: FloatArray = np.asarray(1_000_000.0 + 15.0 * np.arange(n), dtype=np.float64)
    values = rng.normal(0, 1, (rows, n))
    values[rng.random((rows, n)) < 0.1] = np.nan
    t, v = downsample(times, values, buckets)
    assert t.shape == v.shape and t.shape[0] == rows and t.shape[1] <= max(2 * buckets, n)
    for i in range(rows):
        original = values[i][np.isfinite(values[i])]
        kept = v[i][np.isfinite(v[i])]
        if original.size:
            assert kept.min() == original.min() and kept.max() == original.max()
        ts = t[i][np.isfinite(t[i])]
        assert np.all(np.diff(ts) >= 0)
        # every kept point is a real sample at its real time
        for when, value in zip(t[i], v[i], strict=True):
            if math.isfinite(value):
                assert values[i][round(float(when - times[0]) / 15.0)] == value


def test_downsample_one_series_and_gaps() -> None:
    times = np.arange(1000.0)
    values = np.sin(times / 50)
    values[300:500] = np.nan
    t, v = downsample(times, values, 50)
    assert t.ndim == 1 and v.shape == (100,)
    assert np.isnan(v).any()  # the all-NaN buckets are a gap, not a line across it
    assert np.nanmax(v) == np.nanmax(values) and np.nanmin(v) == np.nanmin(values)


def test_ticks_cover_the_range() -> None:
    ticks = nice_ticks(0.37, 0.98)
    assert ticks[0] <= 0.37 and ticks[-1] >= 0.98 and 3 <= len(ticks) <= 8
    assert nice_ticks(5.0, 5.0)[0] < 5.0 < nice_ticks(5.0, 5.0)[-1]
    start = 1_791_982_800.0  # 13:00Z
    assert time_ticks(start, start + 6 * 3600) == [start + h * 3600 for h in range(7)]
    assert len(time_ticks(start, start + 5400)) <= 8


def test_svg_escapes_every_text_and_is_well_formed() -> None:
    n = 200
    times: FloatArray = np.asarray(1_791_982_800.0 + 15.0 * np.arange(n), dtype=np.float64)
    chart = LineChart(
        title='queue <depth> & "more"',
        unit="req<s>",
        times=times,
        fleet=np.linspace(0, 10, n),
        fleet_label="fleet & co",
        replica_names=("r<1>", 'r"2"'),
        replicas=np.vstack([np.linspace(0, 5, n), np.linspace(5, 0, n)]),
        band=Band(1.0, 2.0, times[0], times[50]),
        markers=(Marker(times[100], "onset <x>", "onset"), Marker(times[101], "right & on", "turned")),
        highlight=frozenset({"r<1>"}),
        data=(("signal", 'x"y'),),
    )
    svg = render_svg(chart)
    assert "<depth>" not in svg and "&lt;depth&gt;" in svg and "r&lt;1&gt;" in svg and "&amp; co" in svg
    assert 'data-signal="x&quot;y"' in svg and "onset &lt;x&gt;" in svg
    found = parse(svg)
    assert found.problems == [] and found.stack == []
    assert 'class="replica hot"' in svg and 'class="band-window"' in svg
    empty = render_svg(LineChart(title="nothing", unit="", times=times, fleet=np.full(n, np.nan)))
    assert "no samples" in empty and parse(empty).stack == []


# --- a real browser -----------------------------------------------------------------


def chromium() -> str:
    """The Chromium binary; skip loudly without it, fail under CI=true (CI must run this)."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found:
        return found
    reason = "!!! chromium not found: the real-browser report test NOT RUN (apt-get install -y chromium) !!!"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def run_chromium(binary: str, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="triage-chromium-") as profile:
        return subprocess.run(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


PROBE = """<script>
for (const svg of document.querySelectorAll("svg.chart")) {
  const box = svg.getBoundingClientRect();
  svg.setAttribute("data-box", box.width + "x" + box.height);
  let drawn = 0;
  for (const path of svg.querySelectorAll("path")) {
    const b = path.getBoundingClientRect();
    if (b.width > 0 && b.height > 0) drawn++;
  }
  svg.setAttribute("data-drawn", drawn);
}
document.body.setAttribute("data-bg", getComputedStyle(document.body).backgroundColor);
</script>"""


@pytest.mark.parametrize("name", FIXTURES)
def test_charts_render_in_a_real_browser(reports: dict[str, Report], name: str, tmp_path: Path) -> None:
    binary = chromium()
    html = render_report(reports[name], "html", None)
    page = tmp_path / "report.html"
    page.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    light = run_chromium(binary, page, "--dump-dom", "--window-size=1280,2000")
    assert light.returncode == 0, light.stderr[-2000:]
    boxes = re.findall(
        r'<svg class="chart"[^>]*data-box="([\d.]+)x([\d.]+)"[^>]*data-drawn="(\d+)"', light.stdout
    )
    assert len(boxes) == len(reports[name].charts) > 0, light.stdout[:500]
    for width, height, drawn in boxes:
        assert float(width) > 300 and float(height) > 100 and int(drawn) >= 1
    dark = run_chromium(binary, page, "--dump-dom", "--force-dark-mode", "--window-size=1280,2000")
    light_bg = re.search(r'data-bg="([^"]+)"', light.stdout)
    dark_bg = re.search(r'data-bg="([^"]+)"', dark.stdout)
    assert light_bg and dark_bg and light_bg.group(1) == "rgb(255, 255, 255)"
    assert dark_bg.group(1) != light_bg.group(1), "prefers-color-scheme: dark is not honoured"


def png_summary(data: bytes) -> tuple[int, int, int]:
    """Width, height and the number of distinct byte values in the image data (1-3 when blank)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def test_screenshot_is_not_blank(reports: dict[str, Report], tmp_path: Path) -> None:
    binary = chromium()
    page = tmp_path / "report.html"
    page.write_text(render_report(reports["kv-pressure-long-context"], "html", None), encoding="utf-8")
    shot = tmp_path / "shot.png"
    result = run_chromium(binary, page, f"--screenshot={shot}", "--window-size=1280,2000")
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    width, height, distinct = png_summary(shot.read_bytes())
    assert (width, height) == (1280, 2000)
    assert distinct > 50, "the screenshot is blank"
    if REGEN:
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)
